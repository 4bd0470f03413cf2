// Package teams reads the teams-and-kinds mapping file (--attribution.teams-file)
// and applies it to allocations: who pays (team) and what sort of job it is
// (kind). The file is strict YAML: an unknown key, a bad regular expression or
// an unknown kind is an error with its line number.
//
//	team:
//	  podLabel: team                 # a pod label whose value is the team (needs pod metadata)
//	  namespaces: {ml-research: research}
//	  accounts:   {physics: physics}
//	  users:      {alice: research}
//	  default: unassigned            # when nothing matches ("" leaves the team empty)
//	kinds:                           # first match wins; a rule matches when any of its patterns does
//	  - kind: service
//	    podName: '^triton-'
//	  - kind: interactive
//	    jobName: '^(rstudio|vscode)'
//	builtinKinds: true               # then gpuwatch's defaults (attribution/kind); default true
//
// Team rules are tried in the order pod label, namespace, account, user.
package teams

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"

	"go.yaml.in/yaml/v3"

	"github.com/gpuwatch/gpuwatch/exporter/attribution/kind"
	"github.com/gpuwatch/gpuwatch/exporter/source"
)

// Config is the parsed file.
type Config struct {
	Team         TeamRules  `yaml:"team"`
	Kinds        []KindRule `yaml:"kinds"`
	BuiltinKinds *bool      `yaml:"builtinKinds"`
}

// TeamRules map an allocation's owner to a team.
type TeamRules struct {
	PodLabel   string            `yaml:"podLabel"`
	Namespaces map[string]string `yaml:"namespaces"`
	Accounts   map[string]string `yaml:"accounts"`
	Users      map[string]string `yaml:"users"`
	Default    string            `yaml:"default"`
}

// KindRule gives a kind to jobs whose job name or pod name matches.
type KindRule struct {
	Kind    string   `yaml:"kind"`
	JobName *Pattern `yaml:"jobName"`
	PodName *Pattern `yaml:"podName"`
	line    int
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
		return fmt.Errorf("line %d: bad pattern %q: %w", n.Line, s, err)
	}
	p.Regexp = re
	return nil
}

// UnmarshalYAML decodes a rule key by key: a custom unmarshaler is not
// covered by the decoder's KnownFields, and re-encoding would lose the lines.
func (k *KindRule) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: a kind rule is a map with kind, jobName, podName", n.Line)
	}
	k.line = n.Line
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		var err error
		switch key.Value {
		case "kind":
			err = val.Decode(&k.Kind)
		case "jobName":
			k.JobName = &Pattern{}
			err = val.Decode(k.JobName)
		case "podName":
			k.PodName = &Pattern{}
			err = val.Decode(k.PodName)
		default:
			return fmt.Errorf("line %d: unknown key %q in a kind rule (want kind, jobName, podName)", key.Line, key.Value)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Load reads and validates a mapping file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read teams file: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse parses and validates a mapping file's content.
func Parse(data []byte) (*Config, error) {
	c := &Config{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	for i, k := range c.Kinds {
		switch k.Kind {
		case source.KindBatch, source.KindInteractive, source.KindService:
		default:
			return nil, fmt.Errorf("line %d: kinds[%d]: kind %q is not batch, interactive or service", k.line, i, k.Kind)
		}
		if k.JobName == nil && k.PodName == nil {
			return nil, fmt.Errorf("line %d: kinds[%d]: give jobName, podName or both", k.line, i)
		}
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
	if r.PodLabel != "" {
		if t := a.Labels[r.PodLabel]; t != "" {
			return t
		}
	}
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
	return r.Default
}

func (c *Config) kind(a *source.Allocation) string {
	if c != nil {
		for _, k := range c.Kinds {
			if k.JobName != nil && a.JobName != "" && k.JobName.MatchString(a.JobName) ||
				k.PodName != nil && a.Pod != "" && k.PodName.MatchString(a.Pod) {
				return k.Kind
			}
		}
		if c.BuiltinKinds != nil && !*c.BuiltinKinds {
			return source.KindBatch
		}
	}
	return kind.Classify(a.JobName, a.Pod)
}
