package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gpuwatch/gpuwatch/schema"
)

// trustKey is the policy key under which the operator trusts workload-owned
// match keys one by one; errors and warnings name it.
const trustKey = "trust_workload_keys"

// Trust is what the operator lets the workload decide (trust_workload_keys):
// the keys of the workload-owned map attributes (pod labels, annotations)
// and the workload-owned scalar attributes (job names, kinds) that may
// choose a tier, and whether gpuwatch.io/exempt exempts a pod. Operator-owned
// attributes need no trust. The zero Trust trusts nothing: a pod's author
// can neither pick a tier nor exempt itself.
type Trust struct {
	Keys   map[schema.Attr]map[string]bool
	Values map[schema.Attr]bool
}

// Allows reports whether attribute a may decide; key is the label or
// annotation key for a map attribute, ignored for a scalar one.
func (t Trust) Allows(a schema.Attr, key string) bool {
	s := a.Spec()
	switch {
	case !s.WorkloadOwned():
		return true
	case s.Map:
		return t.Keys[a][key]
	default:
		return t.Values[a]
	}
}

// SelfExemption lists the map attributes (pod labels, annotations) in which
// the trusted gpuwatch.io/exempt exempts a pod.
func (t Trust) SelfExemption() []schema.Attr {
	var out []schema.Attr
	for _, a := range []schema.Attr{schema.AttrPodLabels, schema.AttrPodAnnotations} {
		if t.Allows(a, schema.ExemptKey) {
			out = append(out, a)
		}
	}
	return out
}

// trustFile is trust_workload_keys as written:
//
//	trust_workload_keys:
//	  labels: [team, gpuwatch.io/exempt]   # pod label keys, each exactly
//	  annotations: [gpuwatch.io/exempt]
//	  job_names: true                      # one value per job: trusted whole
//
// Its keys are the workload-owned match keys of schema.AllocationAttrs; it
// refuses anything else as it is decoded, each problem at its own line.
type trustFile Trust

// UnmarshalYAML checks every entry against the attributes' owners.
func (t *trustFile) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fieldErrors([]string{at(n, "want a map of workload-owned match key (%s) to what is trusted", workloadKeys())})
	}
	var errs []string
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if seen[k.Value] {
			errs = append(errs, at(v, "%q is given twice", k.Value))
			continue
		}
		seen[k.Value] = true
		spec, err := trustSpec(k.Value)
		if err != "" {
			errs = append(errs, at(v, "%s", err))
			continue
		}
		if spec.Map {
			errs = append(errs, t.keys(spec, v)...)
		} else {
			errs = append(errs, t.value(spec, v)...)
		}
	}
	return fieldErrors(errs)
}

// trustSpec returns the workload-owned attribute a trust key names, or why
// the key names none.
func trustSpec(key string) (schema.AttrSpec, string) {
	spec, ok := schema.AttrByMatchKey(key)
	if !ok {
		for _, s := range schema.WorkloadMatchAttrs() {
			if string(s.Attr) == key {
				return spec, fmt.Sprintf("unknown key %q: write %q, the key a tier's match uses", key, s.MatchKey)
			}
		}
		return spec, fmt.Sprintf("unknown key %s: the workload-owned match keys are %s", printable(key), workloadKeys())
	}
	if !spec.WorkloadOwned() {
		return spec, fmt.Sprintf("%s is written by %s, not by the workload: it needs no trust", key, spec.Writers)
	}
	return spec, ""
}

// keys reads the list of trusted keys of a map attribute.
func (t *trustFile) keys(spec schema.AttrSpec, v *yaml.Node) []string {
	if v.Kind != yaml.SequenceNode {
		return []string{at(v, "want a list of %s keys, each named exactly", spec.Attr)}
	}
	var errs []string
	for _, item := range v.Content {
		if item.Kind != yaml.ScalarNode || item.ShortTag() != "!!str" {
			errs = append(errs, at(item, "want a %s key (a string)", spec.Attr))
			continue
		}
		if err := schema.ValidLabelKey(item.Value); err != nil {
			errs = append(errs, at(item, "%v", err))
			continue
		}
		if t.Keys[spec.Attr][item.Value] {
			errs = append(errs, at(item, "%q is listed twice", item.Value))
			continue
		}
		if t.Keys == nil {
			t.Keys = map[schema.Attr]map[string]bool{}
		}
		if t.Keys[spec.Attr] == nil {
			t.Keys[spec.Attr] = map[string]bool{}
		}
		t.Keys[spec.Attr][item.Value] = true
	}
	return errs
}

// value reads whether a scalar attribute is trusted.
func (t *trustFile) value(spec schema.AttrSpec, v *yaml.Node) []string {
	var on bool
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" || v.Decode(&on) != nil {
		return []string{at(v, "want true or false: a job has one %s, trusted whole or not at all", spec.Attr)}
	}
	if on {
		if t.Values == nil {
			t.Values = map[schema.Attr]bool{}
		}
		t.Values[spec.Attr] = true
	}
	return nil
}

// at is one decoding problem at n, as configfile.FieldError spells it, so
// that the file's error names n's key path and line.
func at(n *yaml.Node, format string, args ...any) string {
	return fmt.Sprintf("line %d: column %d: %s", n.Line, n.Column, fmt.Sprintf(format, args...))
}

func fieldErrors(errs []string) error {
	if len(errs) == 0 {
		return nil
	}
	return &yaml.TypeError{Errors: errs}
}

// printable bounds and quotes text from the file for a message.
func printable(s string) string {
	const most = 64
	if len(s) > most {
		return fmt.Sprintf("%q... (%d bytes)", s[:most], len(s))
	}
	return fmt.Sprintf("%q", s)
}

func workloadKeys() string {
	var keys []string
	for _, s := range schema.WorkloadMatchAttrs() {
		keys = append(keys, s.MatchKey)
	}
	return strings.Join(keys, ", ")
}

// untrusted refuses a tier's match on a workload-owned key the operator
// did not trust. Refusing at load is the safe choice: ignoring the key
// would silently widen the tier to every allocation its other keys select,
// and never matching it would let its findings fall through to a later,
// possibly harsher, tier; either way the policy would act differently from
// how it reads. An error makes the operator decide, once, in the file.
func (c *checker) untrusted(key string, m Match, trust Trust) {
	for _, s := range schema.WorkloadMatchAttrs() {
		if _, ok := m.Values[s.Attr]; ok && !trust.Allows(s.Attr, "") {
			c.fail(key+"."+s.MatchKey, "%s is written by the workload (%s), so it cannot choose a tier unless you trust it: set %s.%s: true",
				s.MatchKey, s.Writers, trustKey, s.MatchKey)
		}
		for _, k := range slices.Sorted(maps.Keys(m.Maps[s.Attr])) {
			if !trust.Allows(s.Attr, k) {
				c.fail(key+"."+s.MatchKey+"."+k, "%s key %q is written by the workload (%s), so it cannot choose a tier unless you trust it: add %q to %s.%s",
					s.Attr, k, s.Writers, k, trustKey, s.MatchKey)
			}
		}
	}
}

// trustWarnings name every decision the workload can sway because the
// operator trusted it, and who can sway it.
func (p *Policy) trustWarnings() []string {
	var out []string
	used := map[schema.Attr]map[string]bool{}
	for i := range p.Tiers {
		t := &p.Tiers[i]
		for _, s := range schema.WorkloadMatchAttrs() {
			if _, ok := t.Match.Values[s.Attr]; ok {
				out = append(out, fmt.Sprintf("tier %q is chosen by %s, which %s can write (trusted in %s): they can move their own jobs into or out of it",
					t.Name, s.MatchKey, s.Writers, trustKey))
			}
			for _, k := range slices.Sorted(maps.Keys(t.Match.Maps[s.Attr])) {
				if used[s.Attr] == nil {
					used[s.Attr] = map[string]bool{}
				}
				used[s.Attr][k] = true
				out = append(out, fmt.Sprintf("tier %q is chosen by %s key %q, which %s can write (trusted in %s): they can move their own pods into or out of it",
					t.Name, s.Attr, k, s.Writers, trustKey))
			}
		}
	}
	for _, a := range p.Trust.SelfExemption() {
		out = append(out, fmt.Sprintf("%s key %s exempts a pod from every step (trusted in %s.%s): %s can exempt their own pods",
			a, schema.ExemptKey, trustKey, a.Spec().MatchKey, a.Spec().Writers))
	}
	for _, a := range slices.Sorted(maps.Keys(p.Trust.Keys)) {
		for _, k := range slices.Sorted(maps.Keys(p.Trust.Keys[a])) {
			if !used[a][k] && k != schema.ExemptKey {
				out = append(out, fmt.Sprintf("%s.%s trusts %q, which no tier matches", trustKey, a.Spec().MatchKey, k))
			}
		}
	}
	for i, e := range p.Exemptions {
		if ns, _, pod := strings.Cut(e.Job, "/"); pod {
			out = append(out, fmt.Sprintf("exemptions[%d] names pods by name (job %q): any user who can create pods in namespace %q chooses a pod's name", i, e.Job, ns))
		}
	}
	return out
}

// PodLabelTeamWarnings warn about the tiers and exemptions that match
// teams when the teams file takes a team from the pod label label (its
// pod_label; "" for none): the pod's author then chooses the team where no
// operator mapping gives one.
func (p *Policy) PodLabelTeamWarnings(label string) []string {
	if label == "" {
		return nil
	}
	var out []string
	why := fmt.Sprintf("the teams file takes a pod's team from its label %q where no namespace, account or user mapping gives one: %s can choose it", label,
		schema.AttrPodLabels.Spec().Writers)
	for i := range p.Tiers {
		if _, ok := p.Tiers[i].Match.Values[schema.AttrTeam]; ok {
			out = append(out, fmt.Sprintf("tier %q matches teams, and %s", p.Tiers[i].Name, why))
		}
	}
	for i, e := range p.Exemptions {
		if e.Team != "" {
			out = append(out, fmt.Sprintf("exemptions[%d] exempts team %q, and %s", i, e.Team, why))
		}
	}
	return out
}

// String writes the trust as the policy file spells it; "nothing" when
// the workload decides nothing.
func (t Trust) String() string {
	var parts []string
	for _, s := range schema.WorkloadMatchAttrs() {
		if t.Values[s.Attr] {
			parts = append(parts, s.MatchKey)
		}
		if keys := slices.Sorted(maps.Keys(t.Keys[s.Attr])); len(keys) > 0 {
			parts = append(parts, s.MatchKey+"="+strings.Join(keys, ","))
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, " ")
}
