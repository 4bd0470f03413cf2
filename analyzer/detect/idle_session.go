package detect

import (
	"fmt"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

// idle_session: an interactive session with no GPU activity for long.
func init() {
	register(schema.IdleSession, Spec{judge: judgeIdleSession,
		Advise: func(*finding.Finding) string {
			return "An interactive session sat idle: close notebooks when done, and use a shorter session time limit; idle sessions are reclaimed by policy."
		}})
}

func judgeIdleSession(j *judge) *verdict {
	a, c := j.a, j.cfg.Patterns.IdleSession
	if !j.interactive || a.IdleSince.IsZero() || j.since(a.IdleSince) < c.MinDuration.D() {
		return nil
	}
	idle := j.since(a.IdleSince)
	return &verdict{from: a.IdleSince, wasted: j.heldSince(a.IdleSince, a.Held.Idle),
		evidence: map[string]float64{"idle_minutes": idle.Minutes(), "gpus": j.n, "fb_max_mib": j.fbMax,
			"threshold_minutes": c.MinDuration.D().Minutes()},
		advice: fmt.Sprintf("Interactive session idle for %s: save your work and end it, or it will be reclaimed.", dur(idle))}
}
