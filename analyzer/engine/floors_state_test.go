package engine

import (
	"context"
	"testing"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/detect"
)

// TestStateKeepsIdleFloors: the daemon's state keeps each model's learnt
// idle floor between cycles, and a state saved before the floors existed
// (per-GPU baselines under "power") still loads, its baselines dropped:
// they were learnt only from steps already judged idle.
func TestStateKeepsIdleFloors(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	e, err := New(Options{Querier: openSynth(t), Store: s, Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	old := `{"cursor":"2026-03-02T00:00:00Z","origin":"2026-03-01T00:00:00Z","orphans":{},"power":{"h|GPU-1":{"idle_w":48,"peak_w":300,"limit_w":400}}}`
	if _, err := s.DB().ExecContext(ctx, `INSERT INTO analyzer_meta VALUES ('state', ?)`, old); err != nil {
		t.Fatal(err)
	}
	st, cursor, err := e.load(ctx)
	if err != nil {
		t.Fatalf("a state from before the floors: %v", err)
	}
	if len(st.Floors) != 0 || cursor.IsZero() {
		t.Errorf("old state: floors %v, cursor %s; want none and the saved cursor", st.Floors, cursor)
	}
	st.Floors["NVIDIA L4"] = &detect.ModelFloor{Watts: map[int]int{34: 20, 36: 20}, GPUs: map[string]int{"h|GPU-1": 40}, Samples: 40}
	if err := e.save(ctx, st, cursor); err != nil {
		t.Fatal(err)
	}
	back, _, err := e.load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fl := back.Floors.Floors(config.Default().Idle)
	if len(fl) != 1 || !fl[0].Learned || fl[0].Watts != 34 || fl[0].GPUs != 1 || fl[0].Samples != 40 {
		t.Errorf("floors after a save and load: %+v, want the L4's learnt 34 W (the median) from 40 steps of 1 GPU", fl)
	}
}
