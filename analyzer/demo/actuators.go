package demo

import (
	"context"
	"fmt"
	"sync"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/schema"
)

// recorder stands in for every actuator: the demo's cluster and its
// people are simulated, so notifications are recorded (the audit log shows
// them as delivered, which lets the ladder go on to its dry-run reclaims)
// and nothing is ever done to a job.
type recorder struct {
	mu sync.Mutex
	n  int
}

func (r *recorder) actuators() map[string]action.Actuator {
	m := map[string]action.Actuator{}
	for _, name := range []string{schema.SchedulerSlurm, schema.SchedulerKubernetes, "process",
		policy.ChannelWebhook, policy.ChannelAlertmanager, policy.ChannelEmail} {
		m[name] = demoActuator{name: name, rec: r}
	}
	return m
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

type demoActuator struct {
	name string
	rec  *recorder
}

func (a demoActuator) Name() string { return a.name }

// Act records notify and warn steps. Anything else is refused: the demo
// forces dry-run, so a disruptive step reaching here is a bug, and it must
// not look as if it was done.
func (a demoActuator) Act(_ context.Context, req *action.Request) (string, error) {
	switch req.Step {
	case action.StepNotify, action.StepWarn:
		a.rec.mu.Lock()
		a.rec.n++
		a.rec.mu.Unlock()
		return fmt.Sprintf("%s recorded, not delivered: %s", a.name, action.Summary(req)), nil
	}
	return "", fmt.Errorf("demo %s %s: %w", a.name, req.Step, action.ErrUnsupported)
}
