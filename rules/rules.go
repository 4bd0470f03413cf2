// Package rules builds gpuwatch's Prometheus alerting and recording rules in
// Go, like a monitoring mixin: every metric name comes from the catalogue,
// clock-event bits from its reason table, and each alert's condition is
// written once. The generated files beside this one (and the Alertmanager
// example) are embedded so that a binary or a test can read them; a test
// keeps them current.
package rules

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"
)

// Files are the rule files and the Alertmanager example, as shipped.
//
//go:embed gpuwatch-alerts.yml gpuwatch-recording.yml alertmanager.example.yml
var Files embed.FS

// Names of the shipped files inside Files.
const (
	AlertsFile       = "gpuwatch-alerts.yml"
	RecordingFile    = "gpuwatch-recording.yml"
	AlertmanagerFile = "alertmanager.example.yml"
)

// File is a Prometheus rule file.
type File struct {
	Groups []Group `yaml:"groups"`
}

// Group is one rule group.
type Group struct {
	Name     string `yaml:"name"`
	Interval string `yaml:"interval,omitempty"`
	Rules    []Rule `yaml:"rules"`
}

// Rule is an alerting rule (Alert set) or a recording rule (Record set).
type Rule struct {
	Record      string            `yaml:"record,omitempty"`
	Alert       string            `yaml:"alert,omitempty"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
	// Comment is written above the rule in the generated file.
	Comment string `yaml:"-"`
}

// Parse decodes a rule file strictly: unknown keys are errors, with the line
// that holds them. name is used in error messages.
func Parse(name string, data []byte) (*File, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f File
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty rule file", name)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for gi, g := range f.Groups {
		if g.Name == "" {
			return nil, fmt.Errorf("%s: group %d has no name", name, gi+1)
		}
		for ri, r := range g.Rules {
			if (r.Alert == "") == (r.Record == "") {
				return nil, fmt.Errorf("%s: group %s rule %d: exactly one of alert and record must be set", name, g.Name, ri+1)
			}
			if r.Expr == "" {
				return nil, fmt.Errorf("%s: group %s rule %d: empty expr", name, g.Name, ri+1)
			}
		}
	}
	return &f, nil
}

// Load parses one of the shipped rule files.
func Load(name string) (*File, error) {
	data, err := Files.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("read rule file %s: %w", name, err)
	}
	return Parse(name, data)
}

// Recorded returns the names of the recording rules of the shipped recording file.
func Recorded() ([]string, error) {
	f, err := Load(RecordingFile)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				out = append(out, r.Record)
			}
		}
	}
	return out, nil
}
