package plan

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"

	"github.com/gpuwatch/gpuwatch/analyzer/plan/hourly"
	"github.com/gpuwatch/gpuwatch/analyzer/query/promapi"
	"github.com/gpuwatch/gpuwatch/schema"
)

// recordedFigures are the recorded figures writeRecordedBlocks stores, in
// the order of hourFigures' values.
var recordedFigures = []hourly.Figure{hourly.Mean, hourly.P95, hourly.Peak, hourly.Count, hourly.MemPeak, hourly.Total}

// fleetRecorded says whether writeFleetBlocks also writes the planner's
// recorded figures.
type fleetRecorded bool

const (
	rawOnly      fleetRecorded = false
	withRecorded fleetRecorded = true
)

// recorder appends, for n GPUs of writeFleetBlocks' fleet over
// [from, from+span) at step, the points the planner's recording rules
// (package hourly) store at an hour boundary H: the figures of each
// holder's raw samples in [H-1h, H), stored at H as promtool's backfill of
// the rules stores them. PromQL's arithmetic is repeated here (the mean,
// quantile_over_time's linear interpolation, the device total from each
// series' latest sample in the five-minute lookback at H);
// TestRecordedBlocksMatchRules holds the points equal to promtool's on a
// small fleet. Backfilling 10,000 GPUs with promtool outlasts CI's step on
// two cores; this takes seconds, and puts the recorded points in the raw
// series' blocks, where a server that evaluates the rules as the data
// arrives has them after compaction.
type recorder struct {
	w          *tsdb.BlockWriter
	n          int
	from       time.Time
	span, step time.Duration
	// A holder's series is its GPU's and, when held, the job of the day
	// the hour belongs to; the refs are kept by series and figure.
	refs map[string]storage.SeriesRef
	b    labels.ScratchBuilder
}

func newRecorder(w *tsdb.BlockWriter, n int, from time.Time, span, step time.Duration) *recorder {
	return &recorder{w: w, n: n, from: from, span: span, step: step, refs: map[string]storage.SeriesRef{}, b: labels.NewScratchBuilder(8)}
}

// boundary appends the points stored at the boundary h (an offset from
// from) and commits them.
func (r *recorder) boundary(ctx context.Context, h time.Duration) error {
	app := r.w.Appender(ctx)
	ts := r.from.Add(h).UnixMilli()
	for g := 0; g < r.n; g++ {
		for held, vals := range hourFigures(g, h, r.span, r.step) {
			job := ""
			if held {
				// The hour's job, or for the total at a day's first
				// boundary alone, the day before's.
				job, _, _, _ = fleetSample(g, h-time.Minute)
			}
			for _, f := range recordedFigures {
				x, ok := vals[f]
				if !ok {
					continue
				}
				key := fmt.Sprint(g, "|", job, "|", f)
				ref, known := r.refs[key]
				l := labels.EmptyLabels() // the head finds a known series by its ref
				if !known {
					host, idx := fmt.Sprintf("node-%04d", g/8), g%8
					r.b.Reset()
					r.b.Add(model.MetricNameLabel, hourly.Record(f))
					r.b.Add(schema.LabelUUID, fmt.Sprintf("GPU-%s-%d", host, idx))
					r.b.Add(schema.LabelGPU, fmt.Sprint(idx))
					r.b.Add(schema.LabelHostname, host)
					r.b.Add(schema.LabelModelName, "NVIDIA H100 80GB HBM3")
					if job != "" {
						r.b.Add(schema.LabelHPCJob, job)
					}
					r.b.Sort()
					l = r.b.Labels()
				}
				ref, err := app.Append(ref, l, ts, x)
				if err != nil {
					return err
				}
				r.refs[key] = ref
			}
		}
	}
	return app.Commit()
}

// writeLastRecorded writes the recorded points of the fleet's last hour,
// stored at its end (outside every day block), into a block of their own.
func writeLastRecorded(dir string, n int, from time.Time, span, step time.Duration) error {
	ctx := context.Background()
	w, err := tsdb.NewBlockWriter(slog.New(slog.NewTextHandler(io.Discard, nil)), dir, time.Hour.Milliseconds())
	if err != nil {
		return err
	}
	defer w.Close()
	if err := newRecorder(w, n, from, span, step).boundary(ctx, span); err != nil {
		return err
	}
	_, err = w.Flush(ctx)
	return err
}

// hourFigures are GPU g's recorded figures at the hour boundary h (an
// offset from the fleet's start), per holder (held or not): those of its
// samples in [h-1h, h), and the device total at h.
func hourFigures(g int, h, span, step time.Duration) map[bool]map[hourly.Figure]float64 {
	type acc struct{ sm, fb []float64 }
	hold := map[bool]*acc{}
	for off := h - time.Hour; off < h; off += step {
		held, v := fleetValues(g, int(off/step), off)
		a := hold[held]
		if a == nil {
			a = &acc{}
			hold[held] = a
		}
		a.sm = append(a.sm, v[0])
		a.fb = append(a.fb, v[2])
	}
	out := map[bool]map[hourly.Figure]float64{}
	for held, a := range hold {
		out[held] = map[hourly.Figure]float64{hourly.Mean: mean(a.sm), hourly.P95: promQuantile(0.95, a.sm),
			hourly.Peak: slices.Max(a.sm), hourly.Count: float64(len(a.fb)), hourly.MemPeak: slices.Max(a.fb)}
	}
	// The total is used + free of each series' latest sample in the
	// lookback [h-5m, h] (raw samples exist before span only).
	latest := map[bool]float64{}
	for off := h - 5*time.Minute; off <= h && off < span; off += step {
		held, v := fleetValues(g, int(off/step), off)
		latest[held] = v[2] + v[3]
	}
	for held, x := range latest {
		if out[held] == nil {
			out[held] = map[hourly.Figure]float64{}
		}
		out[held][hourly.Total] = x
	}
	return out
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// promQuantile is PromQL's quantile: linear interpolation between the
// nearest ranks of the sorted values.
func promQuantile(q float64, xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := float64(len(s))
	rank := q * (n - 1)
	lo := math.Max(0, math.Floor(rank))
	hi := math.Min(n-1, lo+1)
	w := rank - math.Floor(rank)
	return s[int(lo)]*(1-w) + s[int(hi)]*w
}

// TestRecordedBlocksMatchRules: writeRecordedBlocks stores the points that
// promtool's backfill of the planner's recording rules stores, evaluated by
// the real Prometheus over the same raw samples: the same series, times and
// values, figure by figure, on 16 GPUs over two days.
func TestRecordedBlocksMatchRules(t *testing.T) {
	t.Parallel()
	const n = 16
	from := time.Date(2026, 2, 2, 0, 0, 0, 0, time.UTC)
	span := 48 * time.Hour
	rules := filepath.Join(t.TempDir(), "data")
	writeFleetBlocks(t, rules, n, from, span, time.Minute, rawOnly)
	ps := recordRules(t, startPrometheus(t, rules), rules, from.Add(time.Hour), from.Add(span))
	direct := filepath.Join(t.TempDir(), "data")
	writeFleetBlocks(t, direct, n, from, span, time.Minute, withRecorded)
	pd := startPrometheus(t, direct)
	at := from.Add(span + 2*time.Hour)
	for _, f := range recordedFigures {
		expr := fmt.Sprintf("%s[%dh]", hourly.Record(f), int((span+3*time.Hour)/time.Hour))
		want, got := points(t, ps, expr, at), points(t, pd, expr, at)
		if len(want) == 0 {
			t.Fatalf("%s: promtool stored nothing", expr)
		}
		for k, w := range want {
			g, ok := got[k]
			if !ok {
				t.Errorf("%s: no point %s (promtool stored %g)", expr, k, w)
			} else if math.Abs(g-w) > 1e-9*math.Max(1, math.Abs(w)) {
				t.Errorf("%s: point %s is %g, promtool stored %g", expr, k, g, w)
			}
		}
		for k, g := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("%s: point %s (%g) that promtool did not store", expr, k, g)
			}
		}
		t.Logf("%s: %d points alike (%d here)", hourly.Record(f), len(want), len(got))
	}
}

// points are the samples an instant query of a range selector returns,
// keyed by series and clock hour: a rule stores the figure of the hour
// before H at whatever time in [H, H+1h) its group runs.
func points(t *testing.T, ps *prometheusServer, expr string, at time.Time) map[string]float64 {
	t.Helper()
	c, err := promapi.New(ps.URL, promapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.Query(context.Background(), expr, at)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := v.(model.Matrix)
	if !ok {
		t.Fatalf("%s returned %s", expr, v.Type())
	}
	out := map[string]float64{}
	for _, ss := range m {
		for _, p := range ss.Values {
			out[ss.Metric.String()+"@"+p.Timestamp.Time().UTC().Truncate(time.Hour).Format(time.RFC3339)] = float64(p.Value)
		}
	}
	return out
}
