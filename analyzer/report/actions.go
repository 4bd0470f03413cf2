package report

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
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

// ActionLog reads the actions of a time span. The actions package owns
// the audit log; a caller can pass its own reader here.
type ActionLog interface {
	ActionsBetween(ctx context.Context, from, to time.Time) ([]ActionEntry, error)
}

// ErrNoActionLog is returned when the store holds no audit table (actions
// never ran against it); reports say so instead of failing.
var ErrNoActionLog = fmt.Errorf("no audit log in the store")

// SQLActionLog reads an audit table from the shared store without
// depending on the actions package: it looks the table and its columns up
// at query time, so a missing or older table degrades to fewer columns.
type SQLActionLog struct{ DB *sql.DB }

var (
	auditTables  = []string{"audit", "audit_log", "actions"}
	timeColumns  = []string{"at_ms", "time_ms", "ts_ms", "decided_ms", "created_ms", "cycle_ms", "ts", "at"}
	textColumns  = map[string][]string{"action": {"action", "actuator", "step"}, "pattern": {"pattern"}, "team": {"team", "account"}, "user": {"user", "username"}, "job": {"job", "fkey", "finding_key"}, "outcome": {"outcome", "status", "result", "phase", "state"}, "dry_run": {"dry_run", "dryrun"}}
	textColOrder = []string{"action", "pattern", "team", "user", "job", "outcome", "dry_run"}
)

// ActionsBetween implements ActionLog.
func (l SQLActionLog) ActionsBetween(ctx context.Context, from, to time.Time) ([]ActionEntry, error) {
	table, cols, err := l.probe(ctx)
	if err != nil {
		return nil, err
	}
	tcol := ""
	for _, c := range timeColumns {
		if cols[c] {
			tcol = c
			break
		}
	}
	if tcol == "" {
		return nil, fmt.Errorf("audit table %s: no time column", table)
	}
	sel := []string{tcol}
	for _, k := range textColOrder {
		expr := "''"
		for _, c := range textColumns[k] {
			if cols[c] {
				expr = "CAST(" + quoteIdent(c) + " AS TEXT)"
				break
			}
		}
		sel = append(sel, expr)
	}
	q := "SELECT " + strings.Join(sel, ", ") + " FROM " + quoteIdent(table) + " WHERE " + quoteIdent(tcol) + " >= ? AND " +
		quoteIdent(tcol) + " < ? ORDER BY " + quoteIdent(tcol) + " LIMIT 10000"
	rows, err := l.DB.QueryContext(ctx, q, from.UnixMilli(), to.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("read audit table %s: %w", table, err)
	}
	defer rows.Close()
	var out []ActionEntry
	for rows.Next() {
		var ms int64
		var a ActionEntry
		var action, pattern, team, user, job, outcome, dry sql.NullString
		if err := rows.Scan(&ms, &action, &pattern, &team, &user, &job, &outcome, &dry); err != nil {
			return nil, fmt.Errorf("read audit table %s: %w", table, err)
		}
		a.Time = time.UnixMilli(ms).UTC()
		a.Action, a.Pattern, a.Team, a.User, a.Job, a.Outcome = action.String, pattern.String, team.String, user.String, job.String, outcome.String
		a.DryRun = dry.String == "1" || strings.EqualFold(dry.String, "true")
		out = append(out, a)
	}
	return out, rows.Err()
}

func (l SQLActionLog) probe(ctx context.Context) (string, map[string]bool, error) {
	for _, t := range auditTables {
		rows, err := l.DB.QueryContext(ctx, "SELECT name FROM pragma_table_info(?)", t)
		if err != nil {
			return "", nil, fmt.Errorf("probe audit table: %w", err)
		}
		cols := map[string]bool{}
		for rows.Next() {
			var c string
			if err := rows.Scan(&c); err == nil {
				cols[strings.ToLower(c)] = true
			}
		}
		rows.Close()
		if len(cols) > 0 {
			return t, cols, nil
		}
	}
	return "", nil, ErrNoActionLog
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
