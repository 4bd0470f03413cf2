package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/engine"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
)

// DefaultLeaseDuration is how long an analyzer's claim on its store lasts
// without renewal (renewed every third of it).
const DefaultLeaseDuration = 15 * time.Minute

// FileSource replays findings from a JSON file holding an array of findings,
// read afresh each cycle, and records them in the store as the engine does
// (the web page and the reports read them there). A missing or unreadable
// file is an error: unknown data, no action.
type FileSource struct {
	Path  string
	Store *store.Store
}

// Findings implements Source.
func (f FileSource) Findings(ctx context.Context, now time.Time) ([]finding.Finding, error) {
	data, err := os.ReadFile(f.Path)
	if err != nil {
		return nil, fmt.Errorf("read findings: %w", err)
	}
	var fs []finding.Finding
	if err := json.Unmarshal(data, &fs); err != nil {
		return nil, fmt.Errorf("decode findings %s: %w", f.Path, err)
	}
	if f.Store != nil {
		if err := f.Store.SaveFindings(ctx, now, fs); err != nil {
			return nil, err
		}
	}
	return fs, nil
}

// ErrNoNewStep is what a Source returns when no analysis step has completed
// since its last cycle (the daemon is scheduled more often than the step).
// It is no news, not an empty fleet: the daemon leaves every open finding's
// episode as it is, where an empty list would end them all and restart each
// ladder at its first step on the next cycle.
var ErrNoNewStep = errors.New("no analysis step completed since the last cycle")

// EngineSource runs an engine cycle and drops findings on allocations whose
// data was unknown in the newest step.
type EngineSource struct {
	Engine *engine.Engine
	// Metrics, when set, publishes what each cycle saw (GPUs, allocations,
	// coverage) and what it accounted.
	Metrics *engine.Metrics
}

// Findings implements Source.
func (s EngineSource) Findings(ctx context.Context, now time.Time) ([]finding.Finding, error) {
	res, err := s.Engine.Cycle(ctx, now)
	if err != nil {
		return nil, err
	}
	if res.To.IsZero() {
		return nil, ErrNoNewStep
	}
	if s.Metrics != nil {
		s.Metrics.ObserveCoverage(res.Coverage)
		s.Metrics.ObserveAccounting(res)
	}
	unknown := map[string]bool{}
	for _, u := range res.Unknown {
		unknown[u] = true
	}
	out := res.Findings[:0:0]
	for _, f := range res.Findings {
		if !unknown[f.Hostname+"|"+f.Job] {
			out = append(out, f)
		}
	}
	return out, nil
}
