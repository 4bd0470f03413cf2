package report

import (
	"context"
	"errors"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/plan"
)

// Planner plans a window (plan.Source).
type Planner interface {
	PlanBetween(ctx context.Context, from, to time.Time) (*plan.Plan, error)
}

// PlannerSection is the capacity planner's headline over the report's
// period: for the fleet the totals, for a team its own pooling view. Every
// figure is over From..To with the stated coverage.
type PlannerSection struct {
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	Coverage float64   `json:"coverage"`
	Held     int       `json:"gpus_held"`
	Needed   int       `json:"gpus_needed"`
	Freeable int       `json:"gpus_freeable"`
	Unknown  int       `json:"gpus_unknown,omitempty"`
	// Headline is the fleet sentence (the same on the web page and in
	// `gpuwatch plan`).
	Headline string   `json:"headline"`
	Windows  []string `json:"batch_windows,omitempty"`
	Reserve  []string `json:"reserve,omitempty"`
	// Note says why there is no plan (the planner failed).
	Note string `json:"note,omitempty"`
}

// planFor plans the period once for all of a build's reports; nil when no
// planner is configured.
func (b *Builder) planFor(ctx context.Context, p Period) (*plan.Plan, error) {
	if b.Planner == nil {
		return nil, nil
	}
	return b.Planner.PlanBetween(ctx, p.Start, p.End)
}

// plannerSection is the section of one report ("" team: the fleet).
func plannerSection(pl *plan.Plan, err error, team string) *PlannerSection {
	if pl == nil && err == nil {
		return nil
	}
	var short *plan.ShortHistoryError
	switch {
	case errors.As(err, &short):
		return &PlannerSection{Note: "No capacity plan: " + err.Error()}
	case err != nil:
		return &PlannerSection{Note: "The capacity plan could not be computed: " + err.Error()}
	}
	s := &PlannerSection{From: pl.From, To: pl.To, Coverage: pl.Coverage, Headline: pl.Headline()}
	if team == "" {
		s.Held, s.Needed, s.Freeable, s.Unknown = pl.Held, pl.Needed, pl.Freeable, pl.Unknown
		for _, pool := range pl.Pools {
			if pool.Heat != nil {
				for _, w := range pool.Heat.Windows {
					s.Windows = append(s.Windows, pool.Name+" "+w.String())
				}
			}
			if pool.Forecast != nil {
				for _, r := range pool.Forecast.Reserve {
					s.Reserve = append(s.Reserve, pool.Name+": "+r.String())
				}
			}
		}
		return s
	}
	for _, t := range pl.Teams {
		if t.Team == team {
			s.Held, s.Needed, s.Freeable = t.Held, t.Needed, t.Freeable
		}
	}
	return s
}
