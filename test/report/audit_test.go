package report_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/report"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
)

// TestFleetReportListsAuditedActions reads the actions engineer's real
// audit log: settled steps in the week appear, intended-only ones and
// steps of other weeks do not.
func TestFleetReportListsAuditedActions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "state.db")
	fill(t, db)
	st, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	log, err := audit.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		key, step, team string
		at              time.Time
		finish          audit.State // "" leaves it intended
		dry             bool
	}{
		{"k1", "warn", "vision", weekStart.Add(30 * time.Hour), audit.Done, false},
		{"k2", "reclaim", "nlp", weekStart.Add(50 * time.Hour), audit.DryRun, true},
		{"k3", "checkpoint", "nlp", weekStart.Add(60 * time.Hour), "", false},
		{"k4", "reclaim", "vision", weekStart.Add(-30 * time.Hour), audit.Done, false},
	}
	for _, s := range steps {
		r := audit.Record{Key: s.key, FindingKey: "h|" + s.key + "|idle_session", Episode: s.at, Step: s.step, Actuator: "slurm",
			Hostname: "gpu-n0001", Job: s.key, User: "u", Team: s.team, Pattern: "idle_session", Tier: "default", DryRun: s.dry}
		if _, _, err := log.Intend(ctx, r, s.at); err != nil {
			t.Fatal(err)
		}
		if s.finish != "" {
			if err := log.Finish(ctx, s.key, s.finish, "", s.at.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
	}
	cfg := writeConfig(t, smtpOpts{port: 25, password: "x"})
	b := report.NewBuilder(st, cfg)
	r, err := b.Build(ctx, report.WeekOf(weekStart, berlin), "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range r.Actions {
		got = append(got, a.Action+"/"+a.Team+"/"+a.Outcome)
	}
	if strings.Join(got, ",") != "warn/vision/done,reclaim/nlp/dry_run" || !r.Actions[1].DryRun || r.Actions[0].DryRun {
		t.Errorf("actions = %q (%+v), note %q", got, r.Actions, r.ActionsNote)
	}
}
