// Package teams reads the teams-and-kinds mapping file (--attribution.teams-file)
// and applies it to allocations: who pays (team) and what sort of job it is
// (kind). The file is strict YAML (internal/configfile): an unknown key, a
// bad regular expression or an unknown kind is an error naming file, line and
// key. Keys are snake_case; the older camelCase names (podLabel, jobName,
// podName, builtinKinds) are still read, with a deprecation warning.
//
//	team:
//	  namespaces: {ml-research: research}
//	  accounts:   {physics: physics}
//	  users:      {alice: research}
//	  pod_label: team                # trust this pod label to name the team where no mapping above does
//	  default: unassigned            # when nothing matches ("" leaves the team empty)
//	kinds:                           # first match wins; a rule matches when any of its patterns does
//	  - kind: service
//	    pod_name: '^triton-'
//	  - kind: interactive
//	    job_name: '^(rstudio|vscode)'
//	builtin_kinds: true              # then gpuwatch's defaults (schema.KindDefaults); default true
//
// Team rules are tried in the order namespace, account, user, pod label:
// the operator's own mappings first. A pod label is written by whoever
// creates the pod, so it names a team only where the operator trusts that
// label (pod_label) and no mapping of the operator's applies; reading the
// file then warns that pods in unmapped namespaces choose their own team.
package teams

import (
	"fmt"
	"regexp"

	"go.yaml.in/yaml/v3"

	"github.com/gpuwatch/gpuwatch/exporter/source"
	"github.com/gpuwatch/gpuwatch/internal/configfile"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Config is the parsed file.
type Config struct {
	Team         TeamRules  `yaml:"team"`
	Kinds        []KindRule `yaml:"kinds"`
	BuiltinKinds *bool      `yaml:"builtin_kinds"`
	// Warnings are notes from reading the file: deprecated keys, and the
	// pod label it trusts to name teams.
	Warnings []string `yaml:"-"`
}

// renamed are the keys the file had before it followed the snake_case of
// every other gpuwatch file; they are still read, with a warning.
var renamed = map[string]string{"podLabel": "pod_label", "builtinKinds": "builtin_kinds", "jobName": "job_name", "podName": "pod_name"}

// TeamRules map an allocation's owner to a team.
type TeamRules struct {
	// PodLabel is the pod label trusted to name a pod's team when no
	// namespace, account or user mapping does; "" trusts none.
	PodLabel   string            `yaml:"pod_label"`
	Namespaces map[string]string `yaml:"namespaces"`
	Accounts   map[string]string `yaml:"accounts"`
	Users      map[string]string `yaml:"users"`
	Default    string            `yaml:"default"`
}

// KindRule gives a kind to jobs whose job name or pod name matches.
type KindRule struct {
	Kind    string   `yaml:"kind"`
	JobName *Pattern `yaml:"job_name"`
	PodName *Pattern `yaml:"pod_name"`
}

// Pattern is a regular expression compiled while the file is read, so a bad
// one is reported with its line.
type Pattern struct{ *regexp.Regexp }

// UnmarshalYAML compiles the pattern.
func (p *Pattern) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	re, err := regexp.Compile(s)
	if err != nil {
		return configfile.FieldError(n, "bad pattern %q: %v", s, err)
	}
	p.Regexp = re
	return nil
}

// Load reads and validates a mapping file.
func Load(path string) (*Config, error) {
	data, err := configfile.ReadFile(path)
	if err != nil {
		return nil, configfile.Errors{{File: path, Msg: err.Error()}}
	}
	return ParseFile(path, data)
}

// Parse parses and validates a mapping file's content.
func Parse(data []byte) (*Config, error) { return ParseFile("teams file", data) }

// ParseFile parses and validates a mapping file's content; name labels errors.
func ParseFile(name string, data []byte) (*Config, error) {
	c := &Config{}
	doc, err := configfile.DecodeWith(name, data, c, configfile.Options{Renamed: renamed})
	if err != nil {
		return nil, err
	}
	c.Warnings = doc.Warnings
	var errs configfile.Errors
	for i, k := range c.Kinds {
		at := fmt.Sprintf("kinds[%d]", i)
		switch k.Kind {
		case schema.KindBatch, schema.KindInteractive, schema.KindService:
		default:
			errs = append(errs, doc.Errorf(at+".kind", "kind %q is not batch, interactive or service", k.Kind))
		}
		if k.JobName == nil && k.PodName == nil {
			errs = append(errs, doc.Errorf(at, "give job_name, pod_name or both"))
		}
	}
	if l := c.Team.PodLabel; l != "" {
		if err := schema.ValidLabelKey(l); err != nil {
			errs = append(errs, doc.Errorf("team.pod_label", "%v", err))
		} else {
			c.Warnings = append(c.Warnings, doc.Errorf("team.pod_label", "the pod label %q names the team of a pod whose namespace team.namespaces does not map: "+
				"any user who can create or update pods in such a namespace chooses their team, and with it the policy's tiers and exemptions by team", l).Error())
		}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return c, nil
}

// Apply fills a.Team and a.Kind where the scheduler left them empty.
// A nil Config applies the built-in kinds only.
func (c *Config) Apply(a *source.Allocation) {
	if a.Team == "" {
		a.Team = c.team(a)
	}
	if a.Kind == "" {
		a.Kind = c.kind(a)
	}
}

func (c *Config) team(a *source.Allocation) string {
	if c == nil {
		return ""
	}
	r := &c.Team
	for _, m := range []struct {
		rules map[string]string
		key   string
	}{{r.Namespaces, a.Namespace}, {r.Accounts, a.Account}, {r.Users, a.User}} {
		if m.key == "" {
			continue
		}
		if t, ok := m.rules[m.key]; ok {
			return t
		}
	}
	// Only now the pod's own word: the operator's mappings above outrank it.
	if r.PodLabel != "" {
		if t := a.Labels[r.PodLabel]; t != "" {
			return t
		}
	}
	return r.Default
}

func (c *Config) kind(a *source.Allocation) string {
	if k, ok := c.MatchKind(a); ok {
		return k
	}
	return schema.KindBatch
}

// MatchKind reports the kind a's names give by the teams file's kind rules,
// then (unless builtin_kinds is false) gpuwatch's built-in patterns; ok is
// false when no rule matches, so a caller with a better fact (a scheduler's
// batch flag, a pod's owner) can use it instead of the batch default.
func (c *Config) MatchKind(a *source.Allocation) (string, bool) {
	if c != nil {
		for _, k := range c.Kinds {
			if k.JobName != nil && a.JobName != "" && k.JobName.MatchString(a.JobName) ||
				k.PodName != nil && a.Pod != "" && k.PodName.MatchString(a.Pod) {
				return k.Kind, true
			}
		}
		if c.BuiltinKinds != nil && !*c.BuiltinKinds {
			return "", false
		}
	}
	return schema.MatchKind(a.JobName, a.Pod)
}
