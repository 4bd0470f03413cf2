package sim

import (
	"context"
	"testing"
	"time"
)

func TestReplicate(t *testing.T) {
	sc := DefaultScenario()
	big, err := sc.Replicate(3)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(big.Nodes), 3*len(sc.Nodes); got != want {
		t.Fatalf("%d nodes, want %d", got, want)
	}
	if got, want := len(big.Expectations()), 3*len(sc.Expectations()); got != want {
		t.Errorf("%d expectations, want %d", got, want)
	}
	if len(sc.Nodes) != 4 || len(sc.Workloads)*3 != len(big.Workloads) {
		t.Errorf("the original scenario changed or workloads were not copied")
	}
	src, err := New(big, Options{Seed: 1, Clock: &fakeClock{t: testOrigin.Add(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := src.CollectAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	hosts := map[string]bool{}
	jobs := map[string]bool{}
	for _, s := range snaps {
		hosts[s.Hostname] = true
		for _, a := range s.Allocations {
			jobs[s.Hostname+"/"+a.JobID()] = true
		}
	}
	if len(hosts) != 12 || !hosts["a100-01-c3"] {
		t.Errorf("hosts: %v", hosts)
	}
	if len(jobs) == 0 {
		t.Error("no allocations in the copies")
	}
	if _, err := sc.Replicate(0); err == nil {
		t.Error("zero copies accepted")
	}
	if _, err := sc.Replicate(1000); err == nil {
		t.Error("a fleet over the simulator's limit accepted")
	}
}
