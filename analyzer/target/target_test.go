package target_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/slurm"
	"github.com/gpuwatch/gpuwatch/analyzer/target"
	"github.com/gpuwatch/gpuwatch/schema"
)

var t0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

// slurmJob is what squeue says of a job on gpu[01-04] of cluster "a" that
// started an hour before the evidence.
func slurmJob(mut func(j *slurm.Job)) *facts.Facts {
	j := &slurm.Job{ID: "4242", State: "RUNNING", Nodes: "gpu[01-04]", Cluster: "a", Start: t0.Add(-time.Hour)}
	if mut != nil {
		mut(j)
	}
	fa := facts.SlurmJob("debug", "normal", "acct", "bob", "train")
	fa.State, fa.Start, fa.Identity = j.State, j.Start, facts.SlurmIdentity(j)
	return fa
}

// pod is what the API server says of a pod on gpu-node-0 created an hour
// before the evidence.
func pod(mut func(id *facts.Identity)) *facts.Facts {
	fa := facts.Pod("ml", "", nil, nil, nil)
	fa.Identity = facts.Identity{Nodes: []string{"gpu-node-0"}, Since: t0.Add(-time.Hour), UID: "6f1c-uid"}
	if mut != nil {
		mut(&fa.Identity)
	}
	return fa
}

func slurmFinding(host, cluster string) *finding.Finding {
	return &finding.Finding{Pattern: schema.CPUOnly, Job: "4242", Hostname: host, Cluster: cluster, Scheduler: schema.SchedulerSlurm,
		Start: t0, End: t0.Add(2 * time.Hour)}
}

func podFinding(host string) *finding.Finding {
	return &finding.Finding{Pattern: schema.IdleSession, Job: "ml/train-0", Namespace: "ml", Pod: "train-0", Hostname: host,
		Scheduler: schema.SchedulerKubernetes, Start: t0, End: t0.Add(2 * time.Hour)}
}

// TestProve is the proof's table: every comparison that must hold, each
// way it fails, and hostile values in the evidence or the owner's answer.
// A case is either proven with the comparison in Checked, or a mismatch or
// unknown whose Why says what failed.
func TestProve(t *testing.T) {
	withMissing := func(fa *facts.Facts) *facts.Facts {
		fa.Missing = map[schema.Attr]string{schema.AttrNamespaceLabels: "not listed"}
		return fa
	}
	big := slurmJob(func(j *slurm.Job) { j.Nodes = "gpu[00000-65535]" })
	for _, c := range []struct {
		name    string
		f       *finding.Finding
		fa      *facts.Facts
		cluster string
		verdict string
		want    string // in Why (not proven) or Checked (proven)
	}{
		// Slurm: what must hold.
		{"slurm proven, no cluster anywhere", slurmFinding("gpu03", ""), slurmJob(nil), "", target.Proven, "cluster: not compared"},
		{"slurm proven, series and flag agree", slurmFinding("gpu03", "a"), slurmJob(nil), "a", target.Proven, `the series say "a", the local cluster is "a"`},
		{"slurm proven, series and squeue agree", slurmFinding("gpu03", "a"), slurmJob(nil), "", target.Proven, `the local cluster is "a"`},
		{"slurm proven, flag and squeue agree", slurmFinding("gpu03", ""), slurmJob(nil), "a", target.Proven, `--slurm.cluster "a", squeue "a"`},
		{"slurm proven, host last of a range", slurmFinding("gpu04", ""), slurmJob(nil), "", target.Proven, `host "gpu04" in job 4242's nodes [gpu01 gpu02 gpu03 gpu04]`},
		{"slurm proven, host listed alone", slurmFinding("login1", ""), slurmJob(func(j *slurm.Job) { j.Nodes = "gpu[01-04,07],login1" }), "", target.Proven, "login1"},
		{"slurm proven, squeue without cluster", slurmFinding("gpu01", ""), slurmJob(func(j *slurm.Job) { j.Cluster = "" }), "a", target.Proven, `squeue ""`},
		{"slurm proven, started within the slack", slurmFinding("gpu01", ""), slurmJob(func(j *slurm.Job) { j.Start = t0.Add(30 * time.Second) }), "", target.Proven, "slack 1m0s"},
		{"slurm proven, started at the slack's edge", slurmFinding("gpu01", ""), slurmJob(func(j *slurm.Job) { j.Start = t0.Add(target.StartSlack) }), "", target.Proven, "started"},
		{"slurm proven, 65536 nodes", slurmFinding("gpu65535", ""), big, "", target.Proven, "65536 nodes"},
		// Slurm: each way it fails.
		{"cluster b, flag a", slurmFinding("gpu03", "b"), slurmJob(nil), "a", target.Mismatch, `the series say "b", the local cluster is "a"`},
		{"cluster b, squeue a", slurmFinding("gpu03", "b"), slurmJob(nil), "", target.Mismatch, `the series say "b", the local cluster is "a"`},
		{"flag and squeue disagree", slurmFinding("gpu03", "a"), slurmJob(func(j *slurm.Job) { j.Cluster = "b" }), "a", target.Mismatch, `squeue reports "b", --slurm.cluster names "a"`},
		{"flag and squeue disagree, no label", slurmFinding("gpu03", ""), slurmJob(func(j *slurm.Job) { j.Cluster = "b" }), "a", target.Mismatch, "--slurm.cluster names"},
		{"series cluster, local unknown", slurmFinding("gpu03", "b"), slurmJob(func(j *slurm.Job) { j.Cluster = "" }), "", target.Mismatch, "neither --slurm.cluster nor squeue"},
		{"host of another node", slurmFinding("gpu07", ""), slurmJob(nil), "", target.Mismatch, `host "gpu07" in job 4242's nodes`},
		{"no host in the evidence", slurmFinding("", ""), slurmJob(nil), "", target.Mismatch, "names no host"},
		{"job runs nowhere (pending)", slurmFinding("gpu01", ""), slurmJob(func(j *slurm.Job) { j.Nodes, j.State, j.Start = "", "PENDING", time.Time{} }), "", target.Mismatch, "runs nowhere"},
		{"job started after the evidence", slurmFinding("gpu01", ""), slurmJob(func(j *slurm.Job) { j.Start = t0.Add(2 * time.Minute) }), "", target.Mismatch, "job 4242 started"},
		{"job started a second past the slack", slurmFinding("gpu01", ""), slurmJob(func(j *slurm.Job) { j.Start = t0.Add(target.StartSlack + time.Second) }), "", target.Mismatch, "started"},
		{"job id reused after a rebuild, days later", slurmFinding("gpu01", ""), slurmJob(func(j *slurm.Job) { j.Start = t0.Add(72 * time.Hour) }), "", target.Mismatch, "started"},
		{"job without a start", slurmFinding("gpu01", ""), slurmJob(func(j *slurm.Job) { j.Start = time.Time{} }), "", target.Mismatch, "no time reported"},
		{"evidence without a start", &finding.Finding{Job: "4242", Hostname: "gpu01", Scheduler: "slurm"}, slurmJob(nil), "", target.Mismatch, "evidence has no start"},
		{"owner answered without identity", slurmFinding("gpu01", ""), facts.SlurmJob("debug", "normal", "a", "bob", "j"), "", target.Mismatch, "runs nowhere"},
		// Hostile or foreign values: never matched loosely.
		{"host in capitals", slurmFinding("GPU03", ""), slurmJob(nil), "", target.Mismatch, "GPU03"},
		{"host as FQDN", slurmFinding("gpu03.cluster-b.example", ""), slurmJob(nil), "", target.Mismatch, "gpu03.cluster-b.example"},
		{"host as instance with port", slurmFinding("gpu03:9400", ""), slurmJob(nil), "", target.Mismatch, "gpu03:9400"},
		{"host with a space", slurmFinding("gpu03 ", ""), slurmJob(nil), "", target.Mismatch, "host"},
		{"host naming two nodes", slurmFinding("gpu03,gpu04", ""), slurmJob(nil), "", target.Mismatch, "host"},
		{"host as a host list", slurmFinding("gpu[01-04]", ""), slurmJob(nil), "", target.Mismatch, "host"},
		{"host with a newline", slurmFinding("gpu03\ngpu04", ""), slurmJob(nil), "", target.Mismatch, `\n`},
		{"host prefix of a node", slurmFinding("gpu0", ""), slurmJob(nil), "", target.Mismatch, "host"},
		{"cluster in capitals", slurmFinding("gpu03", "A"), slurmJob(nil), "a", target.Mismatch, "cluster"},
		{"cluster with a space", slurmFinding("gpu03", "a "), slurmJob(nil), "a", target.Mismatch, "cluster"},
		{"cluster as a regexp", slurmFinding("gpu03", ".*"), slurmJob(nil), "a", target.Mismatch, "cluster"},
		{"hostile host list from squeue", slurmFinding("n1", ""), slurmJob(func(j *slurm.Job) { j.Nodes = "n[0-99999999]" }), "", target.Mismatch, "unreadable"},
		{"malformed host list from squeue", slurmFinding("n1", ""), slurmJob(func(j *slurm.Job) { j.Nodes = "n[1-2" }), "", target.Mismatch, "unreadable"},
		{"host list with a shell word", slurmFinding("n1", ""), slurmJob(func(j *slurm.Job) { j.Nodes = "n1;reboot" }), "", target.Mismatch, "unreadable"},
		// Nothing to compare: the missing-facts rule holds.
		{"job gone", slurmFinding("gpu01", ""), func() *facts.Facts {
			fa := &facts.Facts{Scheduler: "slurm", Gone: true}
			fa.MarkMissing("gone")
			return fa
		}(), "", target.Unknown, "gave no facts"},
		{"squeue down", slurmFinding("gpu01", ""), func() *facts.Facts {
			fa := &facts.Facts{Scheduler: "slurm"}
			fa.MarkMissing("squeue --json: exit status 1")
			return fa
		}(), "a", target.Unknown, "gave no facts"},
		// Kubernetes.
		{"pod proven", podFinding("gpu-node-0"), pod(nil), "", target.Proven, "pod uid 6f1c-uid"},
		{"pod proven, namespace labels missing", podFinding("gpu-node-0"), withMissing(pod(nil)), "", target.Proven, `host "gpu-node-0" in pod ml/train-0's node [gpu-node-0]`},
		{"pod proven, created within the slack", podFinding("gpu-node-0"), pod(func(id *facts.Identity) { id.Since = t0.Add(59 * time.Second) }), "", target.Proven, "created"},
		{"pod on another node", podFinding("gpu-node-1"), pod(nil), "", target.Mismatch, `host "gpu-node-1" in pod ml/train-0's node [gpu-node-0]`},
		{"pod recreated after the evidence", podFinding("gpu-node-0"), pod(func(id *facts.Identity) { id.Since = t0.Add(10 * time.Minute) }), "", target.Mismatch, "pod ml/train-0 created"},
		{"pod not scheduled", podFinding("gpu-node-0"), pod(func(id *facts.Identity) { id.Nodes = nil }), "", target.Mismatch, "runs nowhere"},
		{"pod without uid", podFinding("gpu-node-0"), pod(func(id *facts.Identity) { id.UID = "" }), "", target.Mismatch, "pod uid (none reported)"},
		{"pod without creation time", podFinding("gpu-node-0"), pod(func(id *facts.Identity) { id.Since = time.Time{} }), "", target.Mismatch, "no time reported"},
		{"pod host in capitals", podFinding("GPU-NODE-0"), pod(nil), "", target.Mismatch, "host"},
		{"pod answered without identity", podFinding("gpu-node-0"), facts.Pod("ml", "", nil, nil, nil), "", target.Mismatch, "runs nowhere"},
		{"pod gone", podFinding("gpu-node-0"), &facts.Facts{Scheduler: "kubernetes", Gone: true, Missing: map[schema.Attr]string{schema.AttrOwner: "gone"}}, "", target.Unknown, "gave no facts"},
		// Other owners.
		{"orphaned process", &finding.Finding{Pattern: schema.OrphanProcess, Hostname: "gpu01", Job: "pid:1"}, &facts.Facts{}, "", target.Proven, "no scheduler owns it"},
		{"unknown scheduler", slurmFinding("gpu01", ""), &facts.Facts{Scheduler: "pbs", Identity: facts.Identity{Nodes: []string{"gpu01"}, Since: t0}}, "", target.Mismatch, "no way to prove"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := target.Prove(c.f, c.fa, c.cluster)
			if p.Verdict != c.verdict || p.OK() != (c.verdict == target.Proven) {
				t.Fatalf("verdict %s, want %s: %s", p.Verdict, c.verdict, p.String())
			}
			where := p.Why
			if c.verdict == target.Proven {
				where = strings.Join(p.Checked, "; ")
				if p.Why != "" {
					t.Errorf("proven with a why: %q", p.Why)
				}
			}
			if !strings.Contains(where, c.want) {
				t.Errorf("%q does not say %q (%s)", where, c.want, p.String())
			}
			if c.verdict == target.Mismatch && !strings.Contains(p.String(), "MISMATCH") {
				t.Errorf("audit text %q does not mark the mismatch", p.String())
			}
		})
	}
}

// recorded answers squeue from a file Slurm 22.05's squeue --json wrote.
type recorded string

func (r recorded) Run(_ context.Context, name string, _ ...string) ([]byte, error) {
	if name != "squeue" {
		return nil, errors.New(name + ": not recorded")
	}
	return os.ReadFile(string(r))
}

// TestProveFromRecordedSqueue starts from the upstream part's real output:
// the facts the Slurm source reads from a recorded squeue --json (job 2 on
// node vm of cluster gpuwatch, started 2026-12-01T11:03:22Z).
func TestProveFromRecordedSqueue(t *testing.T) {
	src := &facts.SlurmSource{Runner: recorded("../slurm/testdata/squeue-22.05-forged-name.json")}
	got, err := src.Lookup(context.Background(), []string{"2"})
	if err != nil || got["2"] == nil {
		t.Fatalf("lookup: %v %v", got, err)
	}
	fa := got["2"]
	started := fa.Identity.Since
	for _, c := range []struct {
		host, cluster, flag string
		start               time.Time
		ok                  bool
	}{
		{"vm", "", "", started.Add(time.Hour), true},
		{"vm", "gpuwatch", "gpuwatch", started, true},
		{"vm", "gpuwatch", "", started.Add(-target.StartSlack), true},
		{"vm", "other", "", started.Add(time.Hour), false},
		{"vm", "", "other", started.Add(time.Hour), false},
		{"node-b", "", "", started.Add(time.Hour), false},
		{"vm", "", "", started.Add(-2 * time.Minute), false},
	} {
		f := &finding.Finding{Pattern: schema.CPUOnly, Job: "2", Hostname: c.host, Cluster: c.cluster, Scheduler: "slurm", Start: c.start}
		p := target.Prove(f, fa, c.flag)
		if p.OK() != c.ok {
			t.Errorf("%s: %s", fmt.Sprint(c.host, " ", c.cluster, " ", c.flag, " ", c.start.Sub(started)), p.String())
		}
	}
}
