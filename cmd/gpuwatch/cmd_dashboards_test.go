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
