// Package chartfiles keeps the Helm chart's copies of the alert rules and
// dashboards (deploy/helm/gpuwatch/files) equal to their sources: rules/ and
// the dashboards package. Helm can only read files inside the chart, so the
// chart carries copies; Diff is what the test checks, Write is what
// `(cd deploy && go generate ./helm/...)` runs.
package chartfiles

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/gpuwatch/gpuwatch/dashboards"
	"github.com/gpuwatch/gpuwatch/rules"
)

//go:generate go run ./gen -chart ../gpuwatch

// Folders of the chart that hold copies, and nothing else.
const (
	RulesDir      = "files/rules"
	DashboardsDir = "files/dashboards"
)

// Want returns each copied file's content, keyed by its path in the chart.
func Want() (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, name := range []string{rules.AlertsFile, rules.RecordingFile} {
		data, err := fs.ReadFile(rules.Files, name)
		if err != nil {
			return nil, fmt.Errorf("read rules %s: %w", name, err)
		}
		out[RulesDir+"/"+name] = data
	}
	ds, err := dashboards.Render()
	if err != nil {
		return nil, fmt.Errorf("render dashboards: %w", err)
	}
	for name, data := range ds {
		out[DashboardsDir+"/"+name] = data
	}
	return out, nil
}

// Diff lists the copies in chartDir that are missing, differ from their
// source, or have no source any more.
func Diff(chartDir string) ([]string, error) {
	want, err := Want()
	if err != nil {
		return nil, err
	}
	var out []string
	have, err := present(chartDir)
	if err != nil {
		return nil, err
	}
	for p := range have {
		if _, ok := want[p]; !ok {
			out = append(out, p+": no source any more")
		}
	}
	for p, data := range want {
		got, err := os.ReadFile(filepath.Join(chartDir, p))
		switch {
		case err != nil:
			out = append(out, p+": missing")
		case !bytes.Equal(got, data):
			out = append(out, p+": differs from its source")
		}
	}
	sort.Strings(out)
	return out, nil
}

// Write brings the copies in chartDir up to date and removes stale ones.
func Write(chartDir string) error {
	want, err := Want()
	if err != nil {
		return err
	}
	have, err := present(chartDir)
	if err != nil {
		return err
	}
	for p := range have {
		if _, ok := want[p]; !ok {
			if err := os.Remove(filepath.Join(chartDir, p)); err != nil {
				return fmt.Errorf("remove stale copy: %w", err)
			}
		}
	}
	for p, data := range want {
		dst := filepath.Join(chartDir, p)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("create chart folder: %w", err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return fmt.Errorf("write chart copy: %w", err)
		}
	}
	return nil
}

// present lists the files in the copy folders, by chart path.
func present(chartDir string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, dir := range []string{RulesDir, DashboardsDir} {
		entries, err := os.ReadDir(filepath.Join(chartDir, dir))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list chart copies: %w", err)
		}
		for _, e := range entries {
			out[dir+"/"+e.Name()] = true
		}
	}
	return out, nil
}
