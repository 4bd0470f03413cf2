package daemon

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
)

// BenchmarkCycle1000 is one escalation cycle over 1,000 open findings in a
// file-backed store, in steady state (their notify step settled, the next
// one not yet due): the fixed cost of escalation per cycle.
func BenchmarkCycle1000(b *testing.B) {
	st, err := store.Open(b.TempDir() + "/state.db")
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	r := newRig(b, testPolicy, st)
	var fs []finding.Finding
	for i := 0; i < 1000; i++ {
		fs = append(fs, idle(fmt.Sprint(10000+i), "bob", "dev", r.start))
	}
	ctx := context.Background()
	now := r.start
	if _, err := r.esc.Cycle(ctx, now, fs); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now = now.Add(time.Second)
		for j := range fs {
			fs[j].End = now
		}
		if _, err := r.esc.Cycle(ctx, now, fs); err != nil {
			b.Fatal(err)
		}
	}
}
