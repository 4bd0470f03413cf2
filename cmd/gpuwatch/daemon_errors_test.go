package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// TestDaemonUnreachablePrometheusOneLine: with nothing listening at
// --prometheus.url, the daemon's cycle and its capacity plan each fail in
// one line that names the flag, the URL and the cause, as `analyze` does;
// before, the cycle logged the raw transport error of its first query and
// the plan five of them joined.
func TestDaemonUnreachablePrometheusOneLine(t *testing.T) {
	closed := "http://" + testtool.FreeAddr(t)
	policy := filepath.Join("..", "..", "deploy", "examples", "policy.yaml")
	d := startDaemon(t, nil, "capacity plan failed", "analyzer", "--policy.file", policy, "--slurm.squeue=/nonexistent/squeue",
		"--storage.path", filepath.Join(t.TempDir(), "s.db"), "--prometheus.url="+closed, "--web.listen-address=127.0.0.1:0", "--schedule=@every 1h")
	testtool.Eventually(t, 30*time.Second, "the first cycle's error", func() (bool, error) {
		return strings.Contains(d.log.String(), "escalation cycle failed"), nil
	})
	want := `--prometheus.url: cannot reach ` + closed + `: connection refused`
	for _, l := range strings.Split(d.log.String(), "\n") {
		if !strings.Contains(l, "failed") {
			continue
		}
		if !strings.Contains(l, want) || strings.Contains(l, `\n`) || strings.Contains(l, "query") {
			t.Errorf("want one line naming %q and no query, got:\n%s", want, l)
		}
	}
	if n := strings.Count(d.log.String(), "connection refused"); n != 2 {
		t.Errorf("%d lines say connection refused, want 2 (the cycle and the plan):\n%s", n, d.log.String())
	}
}
