// Package calibrate measures, in the same run as a scale test's figure,
// what one simple pass over the test's raw samples costs on the machine at
// hand, so that the test bounds its figure as a multiple of that cost
// instead of in seconds: a slower or busier machine makes both slower
// alike, and the ratio is what a test can hold on any machine of the kind.
// Only tests use it.
package calibrate

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Calibration is the cost of the simple pass: the hourly sample count of
// SM activity over the whole fleet, one range query with a one-hour step
// (a series per holder, a point per hour), with the cheapest function
// there is. Wall and CPU: the CPU time of this process and, when another
// process answers the query, of that one.
type Calibration struct {
	Wall, CPU time.Duration
	Series    int
}

// Measure times the simple pass through q over [from, to): the median of
// passes runs (at least one). The first pass over a store also loads its
// index, so one pass is the dearer, cold figure; the median of three is
// the warm one, steadier where one pass takes a few hundred milliseconds
// and a neighbour's burst or /proc's clock ticks would move it. serverCPU
// is the CPU time of the process that answers q when it is not this one
// (nil otherwise).
func Measure(t testing.TB, q query.Querier, serverCPU func() time.Duration, from, to time.Time, passes int) Calibration {
	t.Helper()
	step := time.Hour
	if to.Sub(from) < 2*step {
		step = to.Sub(from) / 4
	}
	expr := fmt.Sprintf("count_over_time(%s[%dms])", schema.ProfSMActive.Name, step.Milliseconds()-1)
	scpu := func() time.Duration {
		if serverCPU == nil {
			return 0
		}
		return serverCPU()
	}
	var walls, cpus []time.Duration
	var m model.Matrix
	for range max(passes, 1) {
		cpu0, scpu0 := testtool.CPUTime(), scpu()
		start := time.Now()
		v, err := q.QueryRange(context.Background(), expr, query.Range{Start: from.Add(step), End: to, Step: step})
		if err != nil {
			t.Fatal(err)
		}
		walls = append(walls, time.Since(start))
		cpus = append(cpus, testtool.CPUTime()-cpu0+scpu()-scpu0)
		var ok bool
		if m, ok = v.(model.Matrix); !ok || len(m) == 0 {
			t.Fatalf("calibration %s returned %v", expr, v.Type())
		}
	}
	slices.Sort(walls)
	slices.Sort(cpus)
	c := Calibration{Wall: walls[len(walls)/2], CPU: cpus[len(cpus)/2], Series: len(m)}
	t.Logf("CALIBRATION %s over %s: %s wall, %s CPU, %d series", expr, to.Sub(from),
		c.Wall.Round(time.Millisecond), c.CPU.Round(time.Millisecond), c.Series)
	return c
}

// Within fails t when got exceeds k times the calibration's figure cal,
// and logs the ratio either way.
func Within(t testing.TB, what string, got, cal time.Duration, k float64) {
	t.Helper()
	r := float64(got) / float64(max(cal, time.Millisecond))
	t.Logf("RATIO %s: %s = %.2f× the calibration's %s (bound %.1f×)", what, got.Round(time.Millisecond), r,
		cal.Round(time.Millisecond), k)
	if r > k {
		t.Errorf("%s took %s, %.2f× the calibration's %s: bound %.1f×", what, got.Round(time.Millisecond), r,
			cal.Round(time.Millisecond), k)
	}
}
