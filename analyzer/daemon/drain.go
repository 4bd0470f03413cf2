package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/drain"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/leader"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/schema"
)

// FaultHistory yields the findings recorded in a window (the store), from
// which the drainer picks the hardware faults.
type FaultHistory interface {
	FindingsBetween(ctx context.Context, from, to time.Time) ([]finding.Finding, error)
}

// Drainer takes nodes out of service under the policy's out_of_service
// section: it reads the window's faults and each node's last drain once,
// plans (analyzer/drain), and writes every step to the audit log as
// intended before it runs and with its outcome after. A crash between the
// two writes is settled by the escalator's Reconcile, which finds the
// actuators under their names.
type Drainer struct {
	Policy  *policy.Policy
	Log     *audit.Log
	History FaultHistory
	// Actuators by scheduler (slurm: action.SlurmDrain, kubernetes:
	// kube.Cordon); a scheduler without one is noted, never acted on.
	Actuators map[string]action.Actuator
	Logger    *slog.Logger
	Metrics   *Metrics
	// Guard checks leadership right before each drain (nil: a sole
	// analyzer); Daemon sets it to its own.
	Guard *leader.Guard
}

func (d *Drainer) logger() *slog.Logger {
	if d.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return d.Logger
}

// Cycle takes out the nodes the policy says should be, and returns how
// many steps it wrote.
func (d *Drainer) Cycle(ctx context.Context, now time.Time) (int, error) {
	o := d.Policy.OutOfService
	if !o.Enabled {
		return 0, nil
	}
	fs, err := d.History.FindingsBetween(ctx, now.Add(-o.Window), now.Add(time.Millisecond))
	if err != nil {
		return 0, fmt.Errorf("faults: %w", err)
	}
	in := drain.Input{Policy: o, Retry: d.Policy.Retry, Now: now, Last: map[string]audit.Record{},
		Wired: func(s string) bool { return d.Actuators[s] != nil }}
	for i := range fs {
		f, ok := drain.Hardware(&fs[i])
		if !ok {
			continue
		}
		in.Faults = append(in.Faults, f)
		k := drain.FindingKey(f.Scheduler, f.Node)
		if _, seen := in.Last[k]; seen {
			continue
		}
		rec, ok, err := d.Log.Latest(ctx, k, action.StepDrain, o.DryRun)
		if err != nil {
			return 0, err
		}
		if ok {
			in.Last[k] = rec
		} else {
			in.Last[k] = audit.Record{}
		}
	}
	steps := 0
	for _, dec := range drain.Plan(in) {
		wrote, err := d.carry(ctx, now, &dec)
		if err != nil {
			return steps, err
		}
		if wrote {
			steps++
		}
	}
	return steps, nil
}

// carry writes one decision: a note once per trigger, or an act between
// its intent and its outcome.
func (d *Drainer) carry(ctx context.Context, now time.Time, dec *drain.Decision) (bool, error) {
	if dec.Kind == drain.Hold {
		return false, nil
	}
	t := &dec.Trigger.Finding
	step := action.StepDrain
	if dec.Kind == drain.Note && dec.Reason == drain.ReasonGaveUp {
		step = "drain_gave_up"
	}
	act := d.Actuators[dec.Scheduler]
	name := "policy"
	if dec.Kind == drain.Act {
		name = act.Name()
	}
	req := action.Request{Step: action.StepDrain, Finding: *t, DryRun: dec.DryRun}
	req.Finding.Evidence = map[string]float64{}
	for k, v := range t.Evidence {
		req.Finding.Evidence[k] = v
	}
	req.Finding.Evidence["faults"] = float64(dec.Faults)
	// The trigger's GPU may be shared: its holders' findings are one fault.
	req.Finding.Evidence["gpu_holders"] = float64(max(dec.Trigger.Holders, 1))
	payload, err := json.Marshal(&req)
	if err != nil {
		return false, err
	}
	fk := drain.FindingKey(dec.Scheduler, dec.Node)
	key := audit.Key(fk, dec.Trigger.At, step)
	if dec.DryRun {
		// A dry run settles its own key: the same faults still drain the
		// node once the policy goes live.
		key += "|dry_run"
	}
	rec := audit.Record{Key: key, FindingKey: fk, Episode: dec.Trigger.At, Step: step,
		Actuator: name, Scheduler: dec.Scheduler, Hostname: dec.Node, Job: t.Job, User: t.User, Team: t.Team,
		Pattern: string(schema.GPUFault), DryRun: dec.DryRun, Payload: string(payload)}
	if dec.Kind == drain.Note {
		rec.Detail = dec.Reason
	}
	if err := d.Guard.Check(); err != nil {
		return false, fmt.Errorf("%s: %w", key, err)
	}
	rec, ok, err := d.Log.Intend(ctx, rec, now)
	if err != nil || !ok {
		return false, err
	}
	req.Attempt = rec.Attempts
	var state audit.State
	var detail string
	switch {
	case dec.Kind == drain.Note:
		state, detail = audit.Skipped, dec.Reason
	case dec.DryRun:
		state, detail = audit.DryRun, fmt.Sprintf("dry-run: would take node %s out of service via %s: %s; %s",
			dec.Node, name, dec.Reason, action.OutOfServiceReason(&req, "an operator puts it back"))
	default:
		// Right before the act: a leader paused past its lease stops here.
		if err := d.Guard.Check(); err != nil {
			ferr := d.Log.Finish(ctx, rec.Key, audit.Failed, "not run: "+err.Error(), now)
			return false, errors.Join(fmt.Errorf("%s: %w", key, err), ferr)
		}
		state, detail = d.run(ctx, act, &req)
		detail = dec.Reason + ": " + detail
	}
	if err := d.Log.Finish(ctx, rec.Key, state, detail, now); err != nil {
		return false, err
	}
	if d.Metrics != nil {
		d.Metrics.Actions.WithLabelValues(dec.Node, step, string(state)).Inc()
	}
	d.logger().Warn("node out of service", "node", dec.Node, "scheduler", dec.Scheduler, "state", state,
		"dry_run", dec.DryRun, "detail", detail)
	return true, nil
}

func (d *Drainer) run(ctx context.Context, act action.Actuator, req *action.Request) (audit.State, string) {
	detail, err := act.Act(ctx, req)
	switch {
	case err == nil:
		return audit.Done, detail
	case action.Moot(err):
		return audit.Skipped, err.Error()
	}
	// Failed, a refusal for now included: retried after the backoff.
	return audit.Failed, err.Error()
}
