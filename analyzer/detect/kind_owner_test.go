package detect

import (
	"testing"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/schema"
)

// TestKindFromOwnerOutranksName: what the owners said (st.OwnerKinds, from
// facts.HubKinds here) decides, not the pod's name. jupyter-mallory, which
// the Hub does not record, idles with memory held after working: batch,
// so stuck, not an idle_session. jupyter-bob and jupyter-eve, whose Hub
// could not be asked, are of unknown kind: not interactive by their name,
// and no pattern that only one kind has opens (no idle_session, no
// stuck), so nothing that reclaims a kind follows from the outage; alice's
// server, which the Hub records, is an idle_session.
func TestKindFromOwnerOutranksName(t *testing.T) {
	h := 12
	cfg := config.Default()
	notInHub := OwnerKind{Kind: schema.KindBatch, Source: facts.KindNotInHub}
	down := OwnerKind{Source: facts.KindHubUnreachable}
	st := NewState()
	st.OwnerKinds = map[string]OwnerKind{"ns/jupyter-mallory": notInHub, "ns/jupyter-bob": down, "ns/jupyter-eve": down,
		"ns/jupyter-alice": {Kind: schema.KindInteractive, Source: facts.KindFromHub}}
	jobs := []job{
		{pod: "jupyter-mallory", start: 2, end: 6 * h, gpus: []gpuFn{phases(busy, h, idle(40000))}},
		{pod: "jupyter-bob", start: 2, end: 6 * h, gpus: []gpuFn{phases(busy, h, idle(40000))}},
		{pod: "jupyter-eve", start: 2, end: 6 * h, gpus: []gpuFn{phases(busy, 3, idle(3000))}},
		{pod: "jupyter-alice", start: 2, end: 6 * h, gpus: []gpuFn{phases(busy, 3, idle(3000))}},
	}
	fs, _ := feedState(t, cfg, st, 6*h, jobs...)
	got := patterns(fs)
	has := func(job string, p schema.Pattern) bool {
		for _, q := range got[job] {
			if q == p {
				return true
			}
		}
		return false
	}
	if !has("ns/jupyter-mallory", schema.Stuck) || has("ns/jupyter-mallory", schema.IdleSession) {
		t.Errorf("jupyter-mallory, not in the Hub's record: %v, want stuck (batch), no idle_session", got["ns/jupyter-mallory"])
	}
	for _, job := range []string{"ns/jupyter-bob", "ns/jupyter-eve"} {
		if has(job, schema.Stuck) || has(job, schema.IdleSession) || has(job, schema.StartupOverhead) {
			t.Errorf("%s, Hub unreachable: %v, want no pattern of one kind", job, got[job])
		}
	}
	if !has("ns/jupyter-alice", schema.IdleSession) {
		t.Errorf("jupyter-alice, in the Hub's record: %v, want idle_session", got["ns/jupyter-alice"])
	}
	for _, f := range fs {
		want := map[string][2]string{"ns/jupyter-mallory": {schema.KindBatch, facts.KindNotInHub},
			"ns/jupyter-bob": {"", facts.KindHubUnreachable}, "ns/jupyter-eve": {"", facts.KindHubUnreachable},
			"ns/jupyter-alice": {schema.KindInteractive, facts.KindFromHub}}[f.Job]
		if f.Kind != want[0] || f.KindSource != want[1] {
			t.Errorf("%s %s: kind %q from %q, want %q from %q", f.Job, f.Pattern, f.Kind, f.KindSource, want[0], want[1])
		}
	}
}

// TestKindLastDecidedWhileOwnerUnknown: while the Hub cannot be asked, a
// pod whose kind an owner decided before keeps it; one whose kind only a
// name gave becomes unknown.
func TestKindLastDecidedWhileOwnerUnknown(t *testing.T) {
	st := &State{OwnerKinds: map[string]OwnerKind{"ns/jupyter-alice": {Source: facts.KindHubUnreachable},
		"ns/jupyter-bob": {Source: facts.KindHubUnreachable}}}
	alice := &Alloc{Scheduler: schema.SchedulerKubernetes, Namespace: "ns", Pod: "jupyter-alice",
		Kind: schema.KindInteractive, KindSource: facts.KindFromHub}
	bob := &Alloc{Scheduler: schema.SchedulerKubernetes, Namespace: "ns", Pod: "jupyter-bob",
		Kind: schema.KindInteractive, KindSource: "name"}
	ownerKind(st, alice)
	ownerKind(st, bob)
	if alice.Kind != schema.KindInteractive || alice.KindSource != facts.KindFromHub {
		t.Errorf("alice, recorded before: %q from %q, want interactive from %q", alice.Kind, alice.KindSource, facts.KindFromHub)
	}
	if bob.Kind != "" || bob.KindSource != facts.KindHubUnreachable {
		t.Errorf("bob, named only: %q from %q, want unknown from %q", bob.Kind, bob.KindSource, facts.KindHubUnreachable)
	}
}
