package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/dashboards"
)

func TestDashboardsCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	var stderr bytes.Buffer
	if got := run([]string{"dashboards", "--out", dir}, &stderr); got != 0 {
		t.Fatalf("exit %d; stderr: %s", got, stderr.String())
	}
	for _, s := range dashboards.All() {
		got, err := os.ReadFile(filepath.Join(dir, s.File))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("..", "..", "dashboards", "generated", s.File))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from dashboards/generated/%s", s.File, s.File)
		}
	}

	stderr.Reset()
	if got := run([]string{"dashboards"}, &stderr); got != 2 || !strings.Contains(stderr.String(), "--out") {
		t.Errorf("without --out: exit %d, stderr %q; want 2 naming --out", got, stderr.String())
	}
	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	if got := run([]string{"dashboards", "--out", blocked}, &stderr); got != 1 || !strings.Contains(stderr.String(), "dashboards") {
		t.Errorf("--out a regular file: exit %d, stderr %q; want 1 with a message", got, stderr.String())
	}
}

// TestDashboardsCommandPrices: the report configuration's prices become the
// team dashboard's price variables; a bad file exits 2.
func TestDashboardsCommandPrices(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "report.yaml")
	if err := os.WriteFile(cfg, []byte("default_price: 2\nprices:\n  H100: 4.5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	out := filepath.Join(dir, "out")
	if got := run([]string{"dashboards", "--out", out, "--report.config", cfg}, &stderr); got != 0 {
		t.Fatalf("exit %d; stderr: %s", got, stderr.String())
	}
	data, err := os.ReadFile(filepath.Join(out, "gpuwatch-team.json"))
	if err != nil {
		t.Fatal(err)
	}
	vs, err := dashboards.Variables(data)
	if err != nil {
		t.Fatal(err)
	}
	prices := map[string]string{}
	for _, v := range vs {
		if v.Type == "textbox" {
			prices[v.Name] = v.Query
		}
	}
	if prices["price"] != "2" || prices["price_1"] != "4.5" || len(prices) != 2 {
		t.Errorf("price variables %v, want price=2 and price_1=4.5", prices)
	}
	if err := os.WriteFile(cfg, []byte("default_price: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	if got := run([]string{"dashboards", "--out", out, "--report.config", cfg}, &stderr); got != 2 {
		t.Errorf("bad report config: exit %d, want 2; stderr %q", got, stderr.String())
	}
}
