package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/plan"
)

// plannedSpan serves the capacity plan of the simulated span, computed
// while the telemetry store was open, to the reports and the Planner tab.
type plannedSpan struct {
	p *plan.Plan
	// err is why there is no plan (a span shorter than its minimum history).
	err error
}

// Plan implements web.PlanSource.
func (s plannedSpan) Plan(context.Context) (*plan.Plan, error) {
	if s.p == nil {
		return nil, s.noPlan()
	}
	return s.p, nil
}

func (s plannedSpan) noPlan() error {
	if s.err != nil {
		return s.err
	}
	return plan.ErrNoPlan
}

// PlanBetween implements report.Planner for the simulated span only.
func (s plannedSpan) PlanBetween(_ context.Context, from, to time.Time) (*plan.Plan, error) {
	if s.p == nil {
		return nil, s.noPlan()
	}
	if !from.Equal(s.p.From) || !to.Equal(s.p.To) {
		return nil, fmt.Errorf("the demo planned %s to %s only", s.p.From.Format(time.RFC3339), s.p.To.Format(time.RFC3339))
	}
	return s.p, nil
}

// writePlanSummary is the summary's capacity-plan section.
func writePlanSummary(w io.Writer, p *plan.Plan, why error) {
	if p == nil {
		if why != nil {
			fmt.Fprintf(w, "\nCAPACITY PLAN none: %s\n", why)
		}
		return
	}
	fmt.Fprintf(w, "\nCAPACITY PLAN %s\n", p.Headline())
	for _, pl := range p.Pools {
		fmt.Fprintf(w, "  %s: %d held, %d needed (%s), %d could be freed\n", pl.Name, pl.Held, pl.Needed, pl.Strategy, pl.Freeable)
		if pl.Heat != nil {
			for _, win := range pl.Heat.Windows {
				fmt.Fprintf(w, "    batch window %s\n", win)
			}
		}
	}
}

// planJSON writes plan.json: the plan, or {"error": why} where the span
// was too short for one.
func planJSON(w io.Writer, res *Result) error {
	if res.Plan == nil && res.PlanErr != nil {
		b, err := json.Marshal(map[string]string{"error": res.PlanErr.Error()})
		if err != nil {
			return fmt.Errorf("write plan json: %w", err)
		}
		_, err = w.Write(append(b, '\n'))
		return err
	}
	return plan.JSON(w, res.Plan)
}
