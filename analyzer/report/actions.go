package report

import (
	"context"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/store"
)

// ActionEntry is one action taken (or dry-run) by the policy engine, as the
// administrators' report lists it.
type ActionEntry struct {
	Time    time.Time `json:"time"`
	Action  string    `json:"action"`
	Pattern string    `json:"pattern,omitempty"`
	Team    string    `json:"team,omitempty"`
	User    string    `json:"user,omitempty"`
	Job     string    `json:"job,omitempty"`
	Outcome string    `json:"outcome,omitempty"`
	DryRun  bool      `json:"dry_run"`
}

// ActionLog reads the actions of a time span.
type ActionLog interface {
	ActionsBetween(ctx context.Context, from, to time.Time) ([]ActionEntry, error)
}

// StoreActions is the action log the store keeps (the audit log's settled
// steps).
type StoreActions struct{ Store *store.Store }

// ActionsBetween implements ActionLog.
func (s StoreActions) ActionsBetween(ctx context.Context, from, to time.Time) ([]ActionEntry, error) {
	as, err := s.Store.ActionsBetween(ctx, from, to)
	if err != nil {
		return nil, err
	}
	out := make([]ActionEntry, len(as))
	for i, a := range as {
		out[i] = ActionEntry{Time: a.Time, Action: a.Step, Pattern: a.Pattern, Team: a.Team, User: a.User,
			Job: a.Job, Outcome: a.State, DryRun: a.DryRun}
	}
	return out, nil
}

// NewBuilder is the report builder over a store: its usage, findings and
// action log.
func NewBuilder(st *store.Store, cfg *Config) *Builder {
	return &Builder{Data: st, Config: cfg, Actions: StoreActions{Store: st}}
}
