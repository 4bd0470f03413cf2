// Package target proves, from the scheduler's own facts at decision time,
// that a finding's target is the workload its evidence came from. A job id
// is only an id within one cluster and one controller's life: one
// Prometheus often holds several clusters, ids collide, and they start
// again after a controller is rebuilt; a pod name is reused by the pod
// recreated under it. So the id names a candidate, and the candidate is
// the target only when the scheduler says it runs on the finding's host,
// began before the evidence did, and (Slurm) belongs to the finding's
// cluster. The proof is pure: the escalator runs it before any step and
// writes what it compared into the audit; the actuators run it again on
// what they read right before they act.
package target

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

// StartSlack is how much later than the evidence's start a workload may
// have begun and still be its source. The detector places an allocation's
// start within a step from the share of its samples, so the evidence's
// start is known to about one scrape interval, and foreign data is scraped
// every 15 to 60 s: one minute covers it. A workload that began later is
// another one that took the id or the name.
const StartSlack = time.Minute

// Verdicts of a proof.
const (
	// Proven: every comparison holds.
	Proven = "proven"
	// Mismatch: the owner answered for the id, and what it said is not the
	// evidence's workload (or not enough to tell): no step at all.
	Mismatch = "mismatch"
	// Unknown: the owner could not be asked or no longer knows the id, so
	// nothing was compared; the missing-facts rule (at most notify) holds.
	Unknown = "unknown"
)

// Proof is what was compared, and whether the target is the evidence's
// workload. It goes into the audit with every step it allows.
type Proof struct {
	Verdict string `json:"verdict"`
	// Checked lists every comparison made, for the audit.
	Checked []string `json:"checked"`
	// Why is the first comparison that failed (Mismatch, Unknown).
	Why string `json:"why,omitempty"`
	// UID is the pod's UID the proof saw: the eviction is conditional on it.
	UID string `json:"uid,omitempty"`
}

// OK reports whether the target is proven.
func (p *Proof) OK() bool { return p.Verdict == Proven }

// String is the proof in one line, for audit details and logs.
func (p *Proof) String() string {
	s := "target " + p.Verdict
	if p.Why != "" {
		s += ": " + p.Why
	}
	if len(p.Checked) > 0 {
		s += " (checked: " + strings.Join(p.Checked, "; ") + ")"
	}
	return s
}

// Prove compares the owner's facts fa of f's job with f's evidence.
// cluster is the local Slurm's name as the operator gave it
// (--slurm.cluster), "" when not given.
func Prove(f *finding.Finding, fa *facts.Facts, cluster string) Proof {
	switch {
	case fa.Scheduler == "":
		return Proof{Verdict: Proven, Checked: []string{"orphaned process: no scheduler owns it; the kill checks its pid and command on the host"}}
	case fa.Identity.Zero() && (fa.Gone || len(fa.Missing) > 0):
		return Proof{Verdict: Unknown, Why: fa.Scheduler + " gave no facts of job " + f.Job + ": nothing to compare"}
	}
	p := &prover{f: f, fa: fa, id: &fa.Identity}
	switch fa.Scheduler {
	case schema.SchedulerSlurm:
		p.cluster(cluster)
		p.host("job " + f.Job + "'s nodes")
		p.since("job " + f.Job + " started")
	case schema.SchedulerKubernetes:
		p.host("pod " + f.Job + "'s node")
		p.since("pod " + f.Job + " created")
		p.uid()
	default:
		p.fail("scheduler " + fa.Scheduler + ": no way to prove its workloads")
	}
	if p.out.Verdict == "" {
		p.out.Verdict = Proven
	}
	return p.out
}

// prover collects a proof's comparisons; the first failure is its Why.
type prover struct {
	f   *finding.Finding
	fa  *facts.Facts
	id  *facts.Identity
	out Proof
}

func (p *prover) check(ok bool, what string) {
	if ok {
		p.out.Checked = append(p.out.Checked, what)
		return
	}
	p.fail(what)
}

func (p *prover) fail(why string) {
	p.out.Checked = append(p.out.Checked, "MISMATCH "+why)
	if p.out.Verdict == "" {
		p.out.Verdict, p.out.Why = Mismatch, why
	}
}

// cluster: the series' cluster label, the operator's --slurm.cluster and
// the cluster squeue reports agree wherever they are given.
func (p *prover) cluster(local string) {
	series, owner := p.f.Cluster, p.id.Cluster
	switch {
	case local != "" && owner != "" && local != owner:
		p.fail(fmt.Sprintf("cluster: squeue reports %q, --slurm.cluster names %q", owner, local))
	case series == "" && local == "":
		p.check(true, "cluster: not compared (no cluster label on the series, no --slurm.cluster)")
	case series == "":
		p.check(true, fmt.Sprintf("cluster: --slurm.cluster %q, squeue %q (no cluster label on the series)", local, owner))
	case local == "" && owner == "":
		p.fail(fmt.Sprintf("cluster: the series say %q, and neither --slurm.cluster nor squeue names the local cluster", series))
	default:
		want := local
		if want == "" {
			want = owner
		}
		p.check(series == want, fmt.Sprintf("cluster: the series say %q, the local cluster is %q", series, want))
	}
}

// host: the finding's host is one of the workload's nodes.
func (p *prover) host(whose string) {
	switch {
	case p.id.NodesErr != "":
		p.fail(whose + " unreadable: " + p.id.NodesErr)
	case len(p.id.Nodes) == 0:
		p.fail(fmt.Sprintf("%s: none (state %q): it runs nowhere", whose, p.fa.State))
	case p.f.Hostname == "":
		p.fail("the evidence names no host")
	default:
		p.check(slices.Contains(p.id.Nodes, p.f.Hostname),
			fmt.Sprintf("host %q in %s %s", p.f.Hostname, whose, nodeList(p.id.Nodes)))
	}
}

// nodeList shows at most a few nodes of a long list.
func nodeList(nodes []string) string {
	const shown = 8
	if len(nodes) <= shown {
		return "[" + strings.Join(nodes, " ") + "]"
	}
	return fmt.Sprintf("[%s … %d nodes]", strings.Join(nodes[:shown], " "), len(nodes))
}

// since: the workload began before the evidence did, within StartSlack.
func (p *prover) since(what string) {
	ev, began := p.f.Start, p.id.Since
	switch {
	case ev.IsZero():
		p.fail("the evidence has no start")
	case began.IsZero():
		p.fail(what + ": no time reported (state " + p.fa.State + ")")
	default:
		p.check(!began.After(ev.Add(StartSlack)), fmt.Sprintf("%s %s, evidence from %s (slack %s)",
			what, began.UTC().Format(time.RFC3339), ev.UTC().Format(time.RFC3339), StartSlack))
	}
}

// uid: the pod's UID is recorded, so the act can be conditional on it.
func (p *prover) uid() {
	p.out.UID = p.id.UID
	p.check(p.id.UID != "", "pod uid "+orNone(p.id.UID))
}

func orNone(s string) string {
	if s == "" {
		return "(none reported)"
	}
	return s
}
