package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/analyzer/engine"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/schema"
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
	// Ready, when set, is asked after a cycle failed (a ping of
	// Prometheus): when it fails too, its one-line error is the cycle's,
	// instead of the first query's raw transport error. A cycle that works
	// costs no extra request.
	Ready func(context.Context) error
	// Series, when set, is the engine's querier listing series: a cycle
	// that saw no GPU asks it whether GPU series begin after its window (the
	// first cycle on a fresh Prometheus) before calling it "no data".
	Series query.SeriesLister
	// Where names what the engine queries (the Prometheus URL) in a
	// "no data" reason.
	Where string
}

// Findings implements Source.
func (s EngineSource) Findings(ctx context.Context, now time.Time) ([]finding.Finding, error) {
	res, err := s.Engine.Cycle(ctx, now)
	if err != nil {
		if s.Ready != nil {
			if why := s.Ready(ctx); why != nil {
				return nil, why
			}
		}
		return nil, err
	}
	if res.To.IsZero() {
		return nil, ErrNoNewStep
	}
	if s.Metrics != nil {
		if res.Coverage.GPUs == 0 {
			res.Coverage.Reason = s.noGPUReason(ctx, res.Coverage, now)
		}
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

// gpuSeries is the series by which the engine counts a GPU: the one every
// exporter publishes (see engine's coverage).
var gpuSeries = schema.FBUsed.Name

// noGPUReason says why a cycle saw no GPU, naming what it asked. A cycle
// reads the steps that ended by its start's step boundary; on a Prometheus
// that began scraping after that boundary, the GPUs are there, only after
// the window: that is no fault, and the next cycle reads them.
func (s EngineSource) noGPUReason(ctx context.Context, c engine.Coverage, now time.Time) string {
	window := fmt.Sprintf("%s to %s UTC", c.From.UTC().Format("15:04"), c.To.UTC().Format("15:04"))
	where := ""
	if s.Where != "" {
		where = " at " + s.Where
	}
	if s.Series != nil && now.After(c.To) {
		ls, err := s.Series.Series(ctx, gpuSeries, c.To, now)
		gpus := map[model.LabelValue]bool{}
		for _, l := range ls {
			gpus[l[schema.LabelUUID]] = true
		}
		if err == nil && len(ls) > 0 {
			return fmt.Sprintf("no data yet: %d GPUs%s have series only after this cycle's window (%s), which ended before the first scrape; the next cycle reads them", len(gpus), where, window)
		}
	}
	return fmt.Sprintf("no data: no GPU series (%s with a UUID label)%s from %s; check the address, and that dcgm-exporter or gpuwatch is scraped", gpuSeries, where, window)
}
