package query

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// gate is a Querier whose queries fail when their expression says so, and
// otherwise wait to be cancelled when it says "hang"; it counts the
// queries in flight at once.
type gate struct {
	inFlight, most atomic.Int32
	ranged         atomic.Int32
}

func (g *gate) answer(ctx context.Context, expr string) (model.Value, error) {
	n := g.inFlight.Add(1)
	defer g.inFlight.Add(-1)
	for {
		m := g.most.Load()
		if n <= m || g.most.CompareAndSwap(m, n) {
			break
		}
	}
	switch {
	case strings.HasPrefix(expr, "fail"):
		return nil, errors.New(expr)
	case expr == "hang":
		<-ctx.Done()
		return nil, ctx.Err()
	}
	time.Sleep(time.Millisecond)
	return model.Vector{{Value: model.SampleValue(len(expr))}}, nil
}

func (g *gate) Query(ctx context.Context, expr string, _ time.Time) (model.Value, error) {
	return g.answer(ctx, expr)
}

func (g *gate) QueryRange(ctx context.Context, expr string, _ Range) (model.Value, error) {
	g.ranged.Add(1)
	return g.answer(ctx, expr)
}

func TestFanBoundsAndAppliesEveryAnswer(t *testing.T) {
	var g gate
	now := time.Unix(1e9, 0)
	calls := []Call{Instant("a", now), Ranged("bb", Range{Start: now, End: now, Step: time.Minute})}
	for range 10 {
		calls = append(calls, Instant("ccc", now))
	}
	got := make([]float64, len(calls))
	var applying atomic.Int32
	err := Fan(context.Background(), &g, calls, 3, func(i int, v model.Value) error {
		if applying.Add(1) > 1 {
			t.Error("apply called for two answers at once")
		}
		defer applying.Add(-1)
		got[i] = float64(v.(model.Vector)[0].Value)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != 1 || got[1] != 2 || got[11] != 3 {
		t.Fatalf("answers not applied to their calls: %v", got)
	}
	if m := g.most.Load(); m > 3 {
		t.Fatalf("%d queries in flight, bound 3", m)
	}
	if g.ranged.Load() != 1 {
		t.Fatalf("%d range queries, want the one call with a step", g.ranged.Load())
	}
}

// One failure ends a fan that needs every answer: the query still running
// is cancelled, and the failure is what comes back.
func TestFanFailsFast(t *testing.T) {
	var g gate
	now := time.Unix(1e9, 0)
	done := make(chan error, 1)
	go func() {
		done <- Fan(context.Background(), &g, []Call{Instant("hang", now), Instant("fail: no such metric", now)}, 2,
			func(int, model.Value) error { return nil })
	}()
	select {
	case err := <-done:
		if err == nil || err.Error() != "fail: no such metric" {
			t.Fatalf("Fan = %v, want the failed query's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a failed query did not cancel the one still running")
	}
	// An apply error ends it the same way.
	boom := errors.New("bad answer")
	if err := Fan(context.Background(), &g, []Call{Instant("a", now)}, 1, func(int, model.Value) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Fan = %v, want apply's error", err)
	}
}

// FanEach runs every call whatever fails, applies the answers it has, and
// names every failure.
func TestFanEachJoinsFailures(t *testing.T) {
	var g gate
	now := time.Unix(1e9, 0)
	calls := []Call{Instant("fail one", now), Instant("ok", now), Instant("fail two", now)}
	var applied []int
	err := FanEach(context.Background(), &g, calls, 1, func(i int, _ model.Value) { applied = append(applied, i) })
	if err == nil || !strings.Contains(err.Error(), "fail one") || !strings.Contains(err.Error(), "fail two") {
		t.Fatalf("FanEach = %v, want both failures named", err)
	}
	if len(applied) != 1 || applied[0] != 1 {
		t.Fatalf("applied %v, want the one answer (call 1)", applied)
	}
}

// storedOnly answers remote reads as told and records the PromQL it is asked.
type storedOnly struct {
	readErr error
	asked   []string
}

func (s *storedOnly) Query(_ context.Context, expr string, ts time.Time) (model.Value, error) {
	s.asked = append(s.asked, expr+" @ "+ts.UTC().Format(time.RFC3339Nano))
	return model.Matrix{}, nil
}

func (s *storedOnly) QueryRange(context.Context, string, Range) (model.Value, error) {
	return nil, errors.New("no range queries")
}

func (s *storedOnly) ReadSamples(_ context.Context, metric string, start, end time.Time, each func(model.Metric, []model.SamplePair) error) error {
	if s.readErr != nil {
		return s.readErr
	}
	s.asked = append(s.asked, "read "+metric+" "+start.UTC().Format(time.RFC3339Nano)+" "+end.UTC().Format(time.RFC3339Nano))
	return each(model.Metric{"__name__": model.LabelValue(metric)}, []model.SamplePair{{Timestamp: model.TimeFromUnixNano(end.UnixNano()), Value: 1}})
}

// TestStoredFallsBack: a Stored call is a remote read of the left-open
// window where the backend has one, and the range selector of the same
// window where the read is unsupported; any other error of the read is
// the call's.
func TestStoredFallsBack(t *testing.T) {
	end := time.Date(2026, 2, 9, 0, 59, 59, 999e6, time.UTC)
	call := []Call{Stored("m", time.Hour, end)}
	for _, tc := range []struct {
		err    error
		want   string
		series int
	}{
		{nil, "read m 2026-02-09T00:00:00Z 2026-02-09T00:59:59.999Z", 1},
		{fmt.Errorf("no remote read: %w", errors.ErrUnsupported), "m[3600000ms] @ 2026-02-09T00:59:59.999Z", 0},
	} {
		q := &storedOnly{readErr: tc.err}
		var got model.Matrix
		if err := Fan(context.Background(), q, call, 1, func(_ int, v model.Value) error { got = v.(model.Matrix); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(q.asked) != 1 || q.asked[0] != tc.want || len(got) != tc.series {
			t.Errorf("read error %v: asked %q and got %d series, want %q and %d", tc.err, q.asked, len(got), tc.want, tc.series)
		}
	}
	q := &storedOnly{readErr: errors.New("connection reset")}
	if err := Fan(context.Background(), q, call, 1, func(int, model.Value) error { return nil }); err == nil || len(q.asked) != 0 {
		t.Errorf("a failed read: err %v, then asked %q", err, q.asked)
	}
}

// manySeries is a SampleReader of n series of one sample each.
type manySeries struct {
	storedOnly
	n int
}

func (s *manySeries) ReadSamples(_ context.Context, metric string, _, end time.Time, each func(model.Metric, []model.SamplePair) error) error {
	for k := 0; k < s.n; k++ {
		m := model.Metric{"__name__": model.LabelValue(metric), "k": model.LabelValue(fmt.Sprint(k))}
		if err := each(m, []model.SamplePair{{Timestamp: model.TimeFromUnixNano(end.UnixNano()), Value: model.SampleValue(k)}}); err != nil {
			return err
		}
	}
	return nil
}

// TestStoredStreamsSeries: a Stored call read through a SampleReader
// reaches apply a series at a time, in the order read, so that no answer
// is held whole; an error of apply ends the read there.
func TestStoredStreamsSeries(t *testing.T) {
	end := time.Date(2026, 2, 9, 0, 59, 59, 999e6, time.UTC)
	q := &manySeries{n: 5}
	var got []string
	err := Fan(context.Background(), q, []Call{Stored("m", time.Hour, end)}, 1, func(_ int, v model.Value) error {
		m := v.(model.Matrix)
		if len(m) != 1 {
			t.Errorf("an apply of %d series, want 1", len(m))
		}
		for _, ss := range m {
			got = append(got, string(ss.Metric["k"]))
		}
		return nil
	})
	if err != nil || fmt.Sprint(got) != "[0 1 2 3 4]" {
		t.Errorf("applied %v (%v), want the 5 series one at a time in order", got, err)
	}
	stop := errors.New("enough")
	got = nil
	err = Fan(context.Background(), q, []Call{Stored("m", time.Hour, end)}, 1, func(_ int, v model.Value) error {
		got = append(got, string(v.(model.Matrix)[0].Metric["k"]))
		if len(got) == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || len(got) != 2 {
		t.Errorf("apply failed at the 2nd series: got %v, err %v; want the read to stop there with its error", got, err)
	}
}
