package promqltest

import (
	"reflect"
	"testing"
)

func TestMetricNames(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{`up`, []string{"up"}},
		{`rate(DCGM_FI_DEV_THERMAL_VIOLATION{hostname=~"$hostname", gpu="0"}[$__rate_interval]) / 1e9`, []string{"DCGM_FI_DEV_THERMAL_VIOLATION"}},
		{`floor(DCGM_FI_DEV_CLOCKS_EVENT_REASONS / 32) % 2 == 1`, []string{"DCGM_FI_DEV_CLOCKS_EVENT_REASONS"}},
		{`avg by (hostname, team) (gpuwatch_allocation_info * on (hostname, UUID) group_left (team) DCGM_FI_DEV_GPU_UTIL)`,
			[]string{"DCGM_FI_DEV_GPU_UTIL", "gpuwatch_allocation_info"}},
		{`x unless x offset 10m or sum without (xid) (y{a="}{[by"}) and on() vector(0)`, []string{"x", "y"}},
		{`topk(10, a:b:c) > bool 0.5 or time() - z > 60`, []string{"a:b:c", "z"}},
		{`count by (hostname) (max_over_time(m{team=~"${team}"}[5m:1m])) or vector(0)`, []string{"m"}},
		{`sum(x) * $price + {__name__="w"}`, []string{"w", "x"}},
		{`label_replace(a, "host", "$1", "Hostname", "(.*)")`, []string{"a"}},
	}
	for _, tc := range tests {
		got, err := MetricNames(tc.expr)
		if err != nil {
			t.Fatalf("%q: %v", tc.expr, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("MetricNames(%q) = %v, want %v", tc.expr, got, tc.want)
		}
	}
	for _, bad := range []string{`x{a="b"`, `rate(x[5m)`, `x{a="b}`, `sum by (x`} {
		if _, err := MetricNames(bad); err == nil {
			t.Errorf("MetricNames(%q): no error", bad)
		}
	}
}

func TestOutsideRange(t *testing.T) {
	isCounter := func(n string) bool { return n == "c" }
	tests := []struct {
		expr string
		want []string
	}{
		{`rate(c[5m])`, nil},
		{`sum(increase(c{a="1"}[$__range])) / 3600`, nil},
		{`c + rate(c[5m])`, []string{"c"}},
		{`g * 2`, nil},
		{`label_replace(c, "a", "$1", "b", "(.+)")`, []string{"c"}},
	}
	for _, tc := range tests {
		got, err := OutsideRange(tc.expr, isCounter)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("OutsideRange(%q) = %v, want %v", tc.expr, got, tc.want)
		}
	}
}
