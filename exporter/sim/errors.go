package sim

import (
	"errors"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ScenarioError is a problem in a scenario file, with its position.
type ScenarioError struct {
	File string
	Line int    // 0 when unknown
	Key  string // path of the key, e.g. workloads[3].behaviour
	Msg  string
}

func (e *ScenarioError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

var (
	yamlLineRe    = regexp.MustCompile(`line (\d+): (.*)`)
	yamlUnknownRe = regexp.MustCompile(`field (\S+) not found in type`)
)

// yamlError turns a yaml error into a ScenarioError naming line and key.
func yamlError(file string, root *yaml.Node, err error) error {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	se := &ScenarioError{File: file, Msg: msg}
	if m := yamlLineRe.FindStringSubmatch(msg); m != nil {
		se.Line, _ = strconv.Atoi(m[1])
		se.Msg = m[2]
		if u := yamlUnknownRe.FindStringSubmatch(m[2]); u != nil {
			se.Msg = "unknown key"
			se.Key = keyAtLine(root, se.Line, u[1])
		} else {
			se.Key = keyAtLine(root, se.Line, "")
		}
		se.Msg = strings.ReplaceAll(se.Msg, "sim.raw", "")
	}
	return se
}

// keyAtLine finds the path of the mapping key on a line (named want when set).
func keyAtLine(root *yaml.Node, line int, want string) string {
	if root == nil {
		return want
	}
	var found string
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		if found != "" {
			return
		}
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, val := n.Content[i], n.Content[i+1]
				p := joinKey(path, k.Value)
				if k.Line == line && (want == "" || k.Value == want) {
					found = p
					return
				}
				walk(val, p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := path + "[" + strconv.Itoa(i) + "]"
				if c.Line == line && c.Kind == yaml.ScalarNode && want == "" {
					found = p
					return
				}
				walk(c, p)
			}
		}
	}
	walk(root, "")
	if found == "" {
		return want
	}
	return found
}

func joinKey(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}
