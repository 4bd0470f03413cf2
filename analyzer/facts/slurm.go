package facts

import (
	"github.com/gpuwatch/gpuwatch/schema"

	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
)

// SlurmSource reads the facts of every job with one `squeue --json` per
// cycle. JSON is parsed rather than a column format because a job name or
// comment is user text: in JSON it cannot pose as another field or job.
// Slurm 22.05's squeue ignores job filters with --json, so the call lists
// every job the controller knows; that is still one call.
type SlurmSource struct {
	Runner action.Runner
	// Squeue is the squeue program (default "squeue").
	Squeue string
}

// Scheduler implements Source.
func (s *SlurmSource) Scheduler() string { return schema.SchedulerSlurm }

// squeueJSON is the part of squeue's JSON that facts use. Several fields
// changed shape across Slurm releases (a plain number in 22.05, an object
// {set, infinite, number} from 23.02; a string or a list of strings for the
// state), so they are decoded leniently.
type squeueJSON struct {
	Jobs []struct {
		JobID       json.Number     `json:"job_id"`
		ArrayJobID  flexNumber      `json:"array_job_id"`
		ArrayTaskID flexNumber      `json:"array_task_id"`
		Name        string          `json:"name"`
		Partition   string          `json:"partition"`
		QoS         string          `json:"qos"`
		Account     string          `json:"account"`
		UserName    string          `json:"user_name"`
		TimeLimit   flexNumber      `json:"time_limit"` // minutes
		StartTime   flexNumber      `json:"start_time"` // Unix seconds
		JobState    json.RawMessage `json:"job_state"`
	} `json:"jobs"`
	Errors []json.RawMessage `json:"errors"`
}

// flexNumber is a number, null, or Slurm 23.02+'s {set, infinite, number}.
type flexNumber struct {
	N        int64
	Set      bool
	Infinite bool
}

func (f *flexNumber) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	if len(b) > 0 && b[0] == '{' {
		var o struct {
			Set      bool        `json:"set"`
			Infinite bool        `json:"infinite"`
			Number   json.Number `json:"number"`
		}
		if err := json.Unmarshal(b, &o); err != nil {
			return err
		}
		n, _ := o.Number.Int64()
		*f = flexNumber{N: n, Set: o.Set, Infinite: o.Infinite}
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	v, err := n.Int64()
	if err != nil {
		return err
	}
	*f = flexNumber{N: v, Set: true}
	return nil
}

func state(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var l []string
	if json.Unmarshal(raw, &l) == nil && len(l) > 0 {
		return l[0]
	}
	return ""
}

// Lookup implements Source with one squeue call.
func (s *SlurmSource) Lookup(ctx context.Context, jobs []string) (map[string]*Facts, error) {
	out, err := s.Runner.Run(ctx, orDefault(s.Squeue, "squeue"), "--json")
	if err != nil {
		return nil, fmt.Errorf("squeue --json: %w", err)
	}
	var doc squeueJSON
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("squeue --json: decode: %w", err)
	}
	if len(doc.Errors) > 0 {
		return nil, fmt.Errorf("squeue --json: %s", bytes.TrimSpace(doc.Errors[0]))
	}
	want := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		want[j] = true
	}
	res := make(map[string]*Facts, len(jobs))
	for _, j := range doc.Jobs {
		ids := []string{j.JobID.String()}
		if j.ArrayJobID.Set && j.ArrayJobID.N > 0 && j.ArrayTaskID.Set {
			ids = append(ids, strconv.FormatInt(j.ArrayJobID.N, 10)+"_"+strconv.FormatInt(j.ArrayTaskID.N, 10))
		}
		for _, id := range ids {
			if !want[id] {
				continue
			}
			f := &Facts{Scheduler: schema.SchedulerSlurm, State: state(j.JobState)}
			f.Set(schema.AttrPartition, j.Partition)
			f.Set(schema.AttrQoS, j.QoS)
			f.Set(schema.AttrAccount, j.Account)
			f.Set(schema.AttrUser, j.UserName)
			f.Set(schema.AttrJobName, j.Name)
			if j.StartTime.Set && j.StartTime.N > 0 {
				f.Start = time.Unix(j.StartTime.N, 0).UTC()
			}
			if j.TimeLimit.Set && !j.TimeLimit.Infinite && j.TimeLimit.N > 0 {
				f.TimeLimit = time.Duration(j.TimeLimit.N) * time.Minute
			}
			res[id] = f
		}
	}
	return res, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
