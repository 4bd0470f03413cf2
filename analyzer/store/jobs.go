package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
)

// JobRef names one allocation in the usage table.
type JobRef struct {
	Hostname, Job string
	// LastEnd is the end of its newest usage interval.
	LastEnd time.Time
}

// JobsEndedBetween lists the allocations whose newest usage interval ends
// in [from, to): none has been seen since, so they ended (or their
// telemetry did) by to. Intervals starting before since are not read.
func (s *Store) JobsEndedBetween(ctx context.Context, since, from, to time.Time) ([]JobRef, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT hostname, job, MAX(end_ms) AS last FROM usage WHERE start_ms >= ?
		GROUP BY hostname, job HAVING MAX(end_ms) >= ? AND MAX(end_ms) < ? ORDER BY last, hostname, job`,
		since.UnixMilli(), from.UnixMilli(), to.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("read ended jobs: %w", err)
	}
	defer rows.Close()
	var out []JobRef
	for rows.Next() {
		var j JobRef
		var last int64
		if err := rows.Scan(&j.Hostname, &j.Job, &last); err != nil {
			return nil, fmt.Errorf("read ended jobs: %w", err)
		}
		j.LastEnd = time.UnixMilli(last).UTC()
		out = append(out, j)
	}
	return out, rows.Err()
}

// JobTotals is one allocation's usage summed over its whole life.
type JobTotals struct {
	Start, End                        time.Time
	User, Team, Kind, Model           string
	GPUs                              int
	AllocatedGPUHours, ActiveGPUHours float64
}

// JobUsage sums the usage of one allocation (the table's primary key
// leads with hostname and job); ok is false when it has none.
func (s *Store) JobUsage(ctx context.Context, hostname, job string) (t JobTotals, ok bool, err error) {
	var n int
	var s0, e0 int64
	err = s.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(MIN(start_ms), 0), COALESCE(MAX(end_ms), 0),
		COALESCE(MAX(user), ''), COALESCE(MAX(team), ''), COALESCE(MAX(kind), ''), COALESCE(MAX(model), ''), COALESCE(MAX(gpus), 0),
		COALESCE(SUM(allocated_gpu_hours), 0), COALESCE(SUM(active_gpu_hours), 0) FROM usage WHERE hostname = ? AND job = ?`,
		hostname, job).Scan(&n, &s0, &e0, &t.User, &t.Team, &t.Kind, &t.Model, &t.GPUs, &t.AllocatedGPUHours, &t.ActiveGPUHours)
	if err != nil || n == 0 {
		if err != nil {
			err = fmt.Errorf("read usage of %s/%s: %w", hostname, job, err)
		}
		return JobTotals{}, false, err
	}
	t.Start, t.End = time.UnixMilli(s0).UTC(), time.UnixMilli(e0).UTC()
	return t, true, nil
}

// JobFindings returns the newest record of each finding of one allocation
// (finding keys start with hostname|job|), most wasteful first.
func (s *Store) JobFindings(ctx context.Context, hostname, job string) ([]finding.Finding, error) {
	// Pattern names are lower-case words: '~' sorts after all of them.
	lo := hostname + "|" + job + "|"
	rows, err := s.db.QueryContext(ctx, `SELECT body FROM findings f WHERE fkey >= ? AND fkey < ?
		AND cycle_ms = (SELECT MAX(cycle_ms) FROM findings g WHERE g.fkey = f.fkey)
		ORDER BY wasted_gpu_hours DESC, fkey`, lo, lo+"~")
	if err != nil {
		return nil, fmt.Errorf("read findings of %s/%s: %w", hostname, job, err)
	}
	defer rows.Close()
	var out []finding.Finding
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return nil, fmt.Errorf("read findings of %s/%s: %w", hostname, job, err)
		}
		var f finding.Finding
		if err := json.Unmarshal([]byte(body), &f); err != nil {
			return nil, fmt.Errorf("decode finding: %w", err)
		}
		out = append(out, f)
	}
	return out, rows.Err()
}
