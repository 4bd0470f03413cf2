// Package dashboards builds gpuwatch's Grafana dashboards with the Grafana
// Foundation SDK, one file per dashboard, taking every metric name from
// the schema package. `gpuwatch dashboards --out DIR` writes them as JSON; the
// copies committed under dashboards/generated/ are checked by a test.
package dashboards

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// Spec is one dashboard: the file it is written to and its builder.
type Spec struct {
	File  string
	Build func(Options) (dashboard.Dashboard, error)
}

// Options are what a site sets in its dashboards: the price of a GPU-hour,
// the same figures as the report configuration's (default_price, prices).
// They become editable dashboard variables.
type Options struct {
	// DefaultPrice applies to GPU models not in Prices.
	DefaultPrice float64
	// Prices per GPU-hour by model: an exact modelName or a part of it, the
	// longest match winning.
	Prices map[string]float64
}

// DefaultOptions are those of the committed dashboards: one price for
// every model, to be edited in Grafana.
var DefaultOptions = Options{DefaultPrice: 1}

// All lists every dashboard gpuwatch ships, in a stable order.
func All() []Spec {
	return []Spec{
		{File: "gpuwatch-fleet.json", Build: func(Options) (dashboard.Dashboard, error) { return Fleet() }},
		{File: "gpuwatch-node.json", Build: func(Options) (dashboard.Dashboard, error) { return Node() }},
		{File: "gpuwatch-waste.json", Build: func(Options) (dashboard.Dashboard, error) { return Waste() }},
		{File: "gpuwatch-team.json", Build: Team},
		{File: "gpuwatch-planner.json", Build: func(Options) (dashboard.Dashboard, error) { return Planner() }},
	}
}

// Marshal renders a dashboard as indented JSON. HTML escaping is off so that
// PromQL's <, > and & stay readable in the committed files (Grafana reads both).
func Marshal(d dashboard.Dashboard) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		uid := ""
		if d.Uid != nil {
			uid = *d.Uid
		}
		return nil, fmt.Errorf("marshal dashboard %s: %w", uid, err)
	}
	return unescapeHTML(buf.Bytes()), nil
}

// unescapeHTML undoes the \u003c, \u003e and \u0026 escapes that the SDK's
// own MarshalJSON methods produce inside the output (they call json.Marshal,
// which escapes HTML whatever the outer encoder says). It walks escape pairs,
// so an escaped backslash followed by "u003e" is left alone.
func unescapeHTML(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out = append(out, b[i])
			continue
		}
		if b[i+1] == 'u' && i+6 <= len(b) {
			switch string(b[i+2 : i+6]) {
			case "003c":
				out = append(out, '<')
				i += 5
				continue
			case "003e":
				out = append(out, '>')
				i += 5
				continue
			case "0026":
				out = append(out, '&')
				i += 5
				continue
			}
		}
		out = append(out, b[i], b[i+1])
		i++
	}
	return out
}

// Render builds and marshals every dashboard with DefaultOptions, keyed by
// file name.
func Render() (map[string][]byte, error) { return RenderWith(DefaultOptions) }

// RenderWith builds and marshals every dashboard with opts.
func RenderWith(opts Options) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, s := range All() {
		d, err := s.Build(opts)
		if err != nil {
			return nil, fmt.Errorf("build %s: %w", s.File, err)
		}
		data, err := Marshal(d)
		if err != nil {
			return nil, err
		}
		out[s.File] = data
	}
	return out, nil
}

// Write renders every dashboard with DefaultOptions into dir, creating it
// if needed, and returns the paths written.
func Write(dir string) ([]string, error) { return WriteWith(dir, DefaultOptions) }

// WriteWith renders every dashboard with opts into dir.
func WriteWith(dir string, opts Options) ([]string, error) {
	files, err := RenderWith(opts)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create dashboards directory: %w", err)
	}
	var paths []string
	for _, s := range All() {
		p := filepath.Join(dir, s.File)
		if err := os.WriteFile(p, files[s.File], 0o644); err != nil {
			return nil, fmt.Errorf("write dashboard: %w", err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}
