package slurm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// squeueDoc is the part of `squeue --json` gpuwatch reads. Several fields
// changed shape across releases (a plain number in 22.05, an object
// {set, infinite, number} from 23.02; a string or a list of strings for
// the state), so they are decoded leniently.
type squeueDoc struct {
	Jobs []struct {
		JobID        json.Number     `json:"job_id"`
		ArrayJobID   number          `json:"array_job_id"`
		ArrayTaskID  number          `json:"array_task_id"`
		Name         string          `json:"name"`
		Partition    string          `json:"partition"`
		QoS          string          `json:"qos"`
		Account      string          `json:"account"`
		UserName     string          `json:"user_name"`
		UserID       number          `json:"user_id"`
		CPUs         number          `json:"cpus"`
		TimeLimit    number          `json:"time_limit"` // minutes
		StartTime    number          `json:"start_time"` // Unix seconds
		EndTime      number          `json:"end_time"`
		Nodes        string          `json:"nodes"`
		Cluster      string          `json:"cluster"`
		JobState     json.RawMessage `json:"job_state"`
		AdminComment string          `json:"admin_comment"`
		// BatchFlag is false for an allocation made by salloc or srun
		// (an interactive session), true for an sbatch script. Slurm
		// sets it; no user text reaches it.
		BatchFlag *bool `json:"batch_flag"`
	} `json:"jobs"`
	Errors []json.RawMessage `json:"errors"`
}

// sacctDoc is the part of `sacct --json` gpuwatch reads.
type sacctDoc struct {
	Jobs []struct {
		JobID json.Number `json:"job_id"`
		Name  string      `json:"name"`
		User  string      `json:"user"`
		// Account, partition and QoS as accounting recorded them.
		Account   string `json:"account"`
		Partition string `json:"partition"`
		QoS       string `json:"qos"`
		Nodes     string `json:"nodes"`
		Cluster   string `json:"cluster"`
		Array     struct {
			JobID  number `json:"job_id"`
			TaskID number `json:"task_id"`
		} `json:"array"`
		State struct {
			Current json.RawMessage `json:"current"`
		} `json:"state"`
		Time struct {
			Start number `json:"start"`
			End   number `json:"end"`
			Limit number `json:"limit"` // minutes
		} `json:"time"`
		Required struct {
			CPUs number `json:"CPUs"`
		} `json:"required"`
		Comment struct {
			Administrator string `json:"administrator"`
		} `json:"comment"`
	} `json:"jobs"`
	Errors []json.RawMessage `json:"errors"`
}

// maxDoc bounds a document gpuwatch decodes (execrun bounds the output
// already; this guards callers with other runners).
const maxDoc = 64 << 20

func decodeSqueue(out []byte) ([]Job, error) {
	if len(out) > maxDoc {
		return nil, fmt.Errorf("squeue --json: %d bytes, more than %d", len(out), maxDoc)
	}
	var doc squeueDoc
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("squeue --json: decode: %w", err)
	}
	if len(doc.Errors) > 0 {
		return nil, fmt.Errorf("squeue --json: %s", errorText(doc.Errors[0]))
	}
	jobs := make([]Job, 0, len(doc.Jobs))
	for _, d := range doc.Jobs {
		j := Job{ID: d.JobID.String(), Name: d.Name, User: d.UserName, UserID: d.UserID.N, Account: d.Account,
			Partition: d.Partition, QoS: d.QoS, State: state(d.JobState), CPUs: int(d.CPUs.N), Nodes: d.Nodes,
			Cluster: d.Cluster, AdminComment: d.AdminComment, Batch: d.BatchFlag}
		if d.ArrayJobID.Set && d.ArrayJobID.N > 0 && d.ArrayTaskID.Set {
			j.Alias, j.ID = j.ID, strconv.FormatInt(d.ArrayJobID.N, 10)+"_"+strconv.FormatInt(d.ArrayTaskID.N, 10)
		}
		j.TimeLimit = minutes(d.TimeLimit)
		j.Start, j.End = unix(d.StartTime), unix(d.EndTime)
		if j.End.Before(j.Start) || !Finished(j.State) {
			// A running job's end_time is its limit's deadline, not an end.
			j.End = time.Time{}
		}
		if !ValidJobID(j.ID) || !stateWord.MatchString(j.State) {
			return nil, fmt.Errorf("squeue --json: job %q in state %q: not a job id and state", j.ID, j.State)
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

func decodeSacct(out []byte) ([]Job, error) {
	if len(out) > maxDoc {
		return nil, fmt.Errorf("sacct --json: %d bytes, more than %d", len(out), maxDoc)
	}
	var doc sacctDoc
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("sacct --json: decode: %w", err)
	}
	// "Nothing found" is an error entry with no jobs: not a failure.
	jobs := make([]Job, 0, len(doc.Jobs))
	for _, d := range doc.Jobs {
		j := Job{ID: d.JobID.String(), Name: d.Name, User: d.User, Account: d.Account, Partition: d.Partition,
			QoS: d.QoS, State: state(d.State.Current), CPUs: int(d.Required.CPUs.N), Nodes: d.Nodes,
			Cluster: d.Cluster, AdminComment: d.Comment.Administrator}
		if d.Array.JobID.Set && d.Array.JobID.N > 0 && d.Array.TaskID.Set {
			j.Alias, j.ID = j.ID, strconv.FormatInt(d.Array.JobID.N, 10)+"_"+strconv.FormatInt(d.Array.TaskID.N, 10)
		}
		j.TimeLimit = minutes(d.Time.Limit)
		j.Start, j.End = unix(d.Time.Start), unix(d.Time.End)
		if !ValidJobID(j.ID) || !stateWord.MatchString(j.State) {
			return nil, fmt.Errorf("sacct --json: job %q in state %q: not a job id and state", j.ID, j.State)
		}
		jobs = append(jobs, j)
	}
	if len(jobs) == 0 && len(doc.Errors) > 0 && !nothingFound(doc.Errors[0]) {
		return nil, fmt.Errorf("sacct --json: %s", errorText(doc.Errors[0]))
	}
	return jobs, nil
}

func minutes(n number) time.Duration {
	if !n.Set || n.Infinite || n.N <= 0 {
		return 0
	}
	return time.Duration(n.N) * time.Minute
}

func unix(n number) time.Time {
	if !n.Set || n.Infinite || n.N <= 0 {
		return time.Time{}
	}
	return time.Unix(n.N, 0).UTC()
}

// number is a JSON number, null, or Slurm 23.02+'s {set, infinite, number}.
type number struct {
	N        int64
	Set      bool
	Infinite bool
}

func (f *number) UnmarshalJSON(b []byte) error {
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
		*f = number{N: n, Set: o.Set, Infinite: o.Infinite}
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
	*f = number{N: v, Set: true}
	return nil
}

// state reads a job state: a string (22.05) or a list of strings, base
// state first (23.02+).
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

// slurmError is one entry of a JSON document's "errors".
type slurmError struct {
	Error       string `json:"error"`
	Description string `json:"description"`
	Number      int    `json:"error_number"`
}

func decodeError(raw json.RawMessage) slurmError {
	var e slurmError
	if json.Unmarshal(raw, &e) != nil {
		e.Error = string(bytes.TrimSpace(raw))
	}
	return e
}

func errorText(raw json.RawMessage) string {
	e := decodeError(raw)
	s := e.Error
	if e.Description != "" && e.Description != e.Error {
		s += ": " + e.Description
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// nothingFound tells sacct's "Nothing found with query" (9003).
func nothingFound(raw json.RawMessage) bool {
	e := decodeError(raw)
	return e.Number == 9003 || e.Description == "Nothing found"
}
