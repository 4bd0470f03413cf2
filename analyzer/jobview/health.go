package jobview

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/schema"
)

// Health is what the job view says of the health signals: which the
// job's series carry and which are missing (and so what cannot be judged),
// and, when the job ended of a GPU fault, the sentence that says so.
type Health struct {
	Present []string `json:"signals_present,omitempty"`
	Missing []Signal `json:"signals_missing,omitempty"`
	// EndedByFault is the gpu_fault finding's advice when the job ended
	// within minutes of it.
	EndedByFault string `json:"ended_by_fault,omitempty"`
}

// Signal is a missing health signal and what its absence costs.
type Signal struct {
	Name    string `json:"name"`
	Metrics string `json:"metrics"`
	Without string `json:"without"`
}

// healthSignalSet lists the signals, each with the metrics that carry it.
var healthSignalSet = []struct {
	name    string
	metrics []*schema.Metric
	without string
}{
	{"throttle_reasons", []*schema.Metric{schema.ClockEvents},
		"no throttling reason: a throttled job is not reported, a straggler only by its clock"},
	{schema.FieldSMClock, []*schema.Metric{schema.SMClock}, "no SM clock: no slowdown or time lost is estimated"},
	{"xid", []*schema.Metric{schema.XIDErrors, schema.XIDLast}, "no XIDs: GPU faults and application errors are not seen"},
}

// healthSignals asks, in one query, which health metrics the job's series
// carry at its last sample.
func healthSignals(ctx context.Context, o Options, ref Ref, at time.Time) (*Health, error) {
	sel := ref.Selector()
	var parts []string
	for _, s := range healthSignalSet {
		for _, m := range s.metrics {
			// An instant selector at the job's last sample (the default
			// five-minute lookback): reading the whole window would cost
			// as much as every other figure together.
			parts = append(parts, `label_replace(count(`+m.Name+sel+`), "metric", "`+m.Name+`", "", "")`)
		}
	}
	v, err := o.Querier.Query(ctx, strings.Join(parts, " or "), at)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	if vec, ok := v.(model.Vector); ok {
		for _, s := range vec {
			have[string(s.Metric["metric"])] = true
		}
	}
	h := &Health{}
	for _, s := range healthSignalSet {
		var names []string
		found := false
		for _, m := range s.metrics {
			names = append(names, m.Name)
			found = found || have[m.Name]
		}
		if found {
			h.Present = append(h.Present, s.name)
		} else {
			h.Missing = append(h.Missing, Signal{Name: s.name, Metrics: strings.Join(names, ", "), Without: s.without})
		}
	}
	return h, nil
}
