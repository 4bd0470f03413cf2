package web

import (
	"context"
	"errors"
	"html/template"
	"net/http"

	"github.com/gpuwatch/gpuwatch/analyzer/plan"
)

// PlanSource gives the latest capacity plan (for the daemon and the demo:
// a plan.Refresher).
type PlanSource interface {
	Plan(ctx context.Context) (*plan.Plan, error)
}

type plannerPool struct {
	plan.Pool
	// HeatSVG and ForecastSVG are drawn by package plan from numbers and
	// fixed words only, so they are safe to inline.
	HeatSVG, ForecastSVG template.HTML
}

type plannerPage struct {
	page
	Plan  *plan.Plan
	Pools []plannerPool
	// Headline is the same sentence the report and `gpuwatch plan` print.
	Headline string
}

func (s *site) planner(w http.ResponseWriter, r *http.Request) {
	p := plannerPage{page: s.page("planner", s.Planner != nil)}
	code := 0
	if s.Planner != nil {
		pl, err := s.Planner.Plan(r.Context())
		var short *plan.ShortHistoryError
		switch {
		case errors.Is(err, plan.ErrNoPlan), errors.As(err, &short):
			// Not a failure: the page says why there is no plan yet.
			p.Error = err.Error()
		case err != nil:
			s.Logger.Error("web: capacity plan", "err", err)
			p.Error, code = "could not compute the capacity plan; see the analyzer's log", http.StatusInternalServerError
		default:
			p.Plan, p.Headline = pl, pl.Headline()
			for _, pool := range pl.Pools {
				pp := plannerPool{Pool: pool}
				if pool.Heat != nil {
					pp.HeatSVG = template.HTML(plan.HeatMapSVG(pool.Heat))
					pp.ForecastSVG = template.HTML(plan.ForecastSVG(pool.Heat, pool.Forecast))
				}
				p.Pools = append(p.Pools, pp)
			}
		}
	}
	s.render(w, code, "planner.html", p)
}
