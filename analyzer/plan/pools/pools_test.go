package pools

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/slurm"
	"github.com/gpuwatch/gpuwatch/internal/execrun"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

func TestNodeGroup(t *testing.T) {
	for host, want := range map[string]string{
		"gpu-a-012":        "gpu-a",
		"gpu-a-012.dc1.io": "gpu-a",
		"dgx07":            "dgx",
		"node_3":           "node",
		"inference":        "inference",
		"1234":             "1234",
		"10.0.0.7:9400":    "",
		"10.0.0.7":         "",
	} {
		if got := NodeGroup(host); got != want {
			t.Errorf("NodeGroup(%q) = %q, want %q", host, got, want)
		}
	}
}

func TestParseMap(t *testing.T) {
	m, err := ParseMap("m.yml", []byte("- host: gpu-a-*\n  pool: inference\n- host: dgx07\n  pool: training\n"))
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]string{"gpu-a-001": "inference", "dgx07": "training", "dgx08": ""} {
		if got, _ := m.Pool(host); got != want {
			t.Errorf("%s: pool %q, want %q", host, got, want)
		}
	}
	for in, wantErr := range map[string]string{
		"- host: a\n":               "host and pool must both be set",
		"- host: a\n  pol: b\n":     "line 2",
		"- host: '[a'\n  pool: b\n": "pattern",
		"host: a\n":                 "cannot unmarshal",
	} {
		if _, err := ParseMap("m.yml", []byte(in)); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%q: error %v, want %q", in, err, wantErr)
		}
	}
}

type failing struct{}

func (failing) Pools(context.Context, []string) (map[string]string, error) {
	return nil, errors.New("squeue: not found")
}
func (failing) Describe() string { return "Slurm partitions" }

// TestNamerOrder: a label wins, then the host map, then facts, then the
// node group; each plan says how its pools were named, and facts that
// cannot be read fall back to the node group, saying why.
func TestNamerOrder(t *testing.T) {
	m := Map{{Host: "gpu-a-*", Pool: "inference"}}
	n := New(context.Background(), Options{Label: "pool", Map: m}, []string{"gpu-a-1", "gpu-b-1"})
	for _, c := range []struct{ host, label, want, by string }{
		{"gpu-a-1", "ml", "H100 80GB HBM3/ml", ByLabel + " pool"},
		{"gpu-a-1", "", "H100 80GB HBM3/inference", ByMap},
		{"gpu-b-1", "", "H100 80GB HBM3/gpu-b", ByNodeGroup},
	} {
		if got, by := n.Pool("NVIDIA H100 80GB HBM3", c.host, c.label); got != c.want || by != c.by {
			t.Errorf("%s %q: %s by %s, want %s by %s", c.host, c.label, got, by, c.want, c.by)
		}
	}
	n = New(context.Background(), Options{Hosts: failing{}}, []string{"gpu-b-1"})
	if got, _ := n.Pool("A100", "gpu-b-1", ""); got != "A100/gpu-b" {
		t.Errorf("facts unreadable: pool %s, want the node group", got)
	}
	if notes := strings.Join(n.Notes(), "; "); !strings.Contains(notes, "Slurm partitions unreadable (squeue: not found)") || !strings.Contains(notes, ByNodeGroup) {
		t.Errorf("notes %q", notes)
	}
}

// fileRunner answers every command with a file's bytes: what Slurm 22.05's
// sinfo --json printed, recorded (analyzer/slurm/testdata).
type fileRunner string

func (f fileRunner) Run(context.Context, string, ...string) ([]byte, error) {
	return os.ReadFile(string(f))
}

// TestSlurmPartitions: hosts get the partition their node is in, as sinfo
// --json says (recorded from a real Slurm 22.05 and on the real Slurm of
// test/slurm/start.sh), and a host Slurm does not know gets none.
func TestSlurmPartitions(t *testing.T) {
	s := &SlurmPartitions{Slurm: &slurm.Client{Runner: fileRunner("../../slurm/testdata/sinfo-22.05-idle.json")}}
	got, err := s.Pools(context.Background(), []string{"vm", "gpu-other"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["vm"] != "debug" {
		t.Errorf("pools %v, want vm in debug and gpu-other in none", got)
	}
	t.Run("real Slurm", func(t *testing.T) {
		conf := os.Getenv("GPUWATCH_SLURM_CONF")
		if conf == "" {
			testtool.Missing(t, "GPUWATCH_SLURM_CONF not set: run eval \"$(test/slurm/start.sh)\" first, as .ci/run does")
		}
		t.Setenv("SLURM_CONF", conf)
		host, err := os.Hostname()
		if err != nil {
			t.Fatal(err)
		}
		s := &SlurmPartitions{Slurm: &slurm.Client{Runner: execrun.Exec{Timeout: 10 * time.Second}}}
		got, err := s.Pools(context.Background(), []string{host, "not-a-node"})
		if err != nil {
			t.Fatal(err)
		}
		// Other tests may add partitions over the same node: its pool
		// names every one it is in, debug among them.
		if len(got) != 1 || !slices.Contains(strings.Split(got[host], "+"), "debug") {
			t.Errorf("pools %v, want %s in a pool that names test/slurm's debug partition", got, host)
		}
	})
}
