package action

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuwatch/gpuwatch/exporter/attribution/procfs"
)

// GPUProcesses tells which processes hold memory on a GPU now, by UUID: the
// node's NVML (package nvmlcheck), never a time series.
type GPUProcesses interface {
	// Holders maps the PIDs on the GPU to the bytes of memory each holds.
	Holders(uuid string) (map[int]uint64, error)
}

// ErrNoNVML: without NVML this host cannot confirm that a process holds GPU
// memory, and a Prometheus series alone never gets a process killed.
var ErrNoNVML = errors.New("NVML is not available on this host: no process is killed on telemetry alone")

// confirm checks pid on this host right before any signal: NVML lists it
// with GPU memory on one of the finding's GPUs now; its command is the one
// the evidence named; and no live allocation owns it (a job named by its
// cgroup or environment must be gone by the scheduler's word). It returns
// why the PID is refused, or "".
func (p *Processes) confirm(ctx context.Context, req *Request, pid int) (string, error) {
	holds, err := p.holdsMemory(req.Finding.GPUs, pid)
	if err != nil {
		return "", err
	}
	if holds == "" {
		return fmt.Sprintf("pid %d holds no memory on GPU %s now (NVML)", pid, strings.Join(req.Finding.GPUs, ",")), nil
	}
	if want := req.Finding.Commands[pid]; want != "" {
		comm, err := os.ReadFile(filepath.Join(p.root(), fmt.Sprint(pid), "comm"))
		if err != nil {
			return fmt.Sprintf("pid %d: command unreadable (%v)", pid, err), nil
		}
		if got := strings.TrimRight(string(comm), "\n"); got != want {
			return fmt.Sprintf("pid %d runs %q, the evidence named %q", pid, got, want), nil
		}
	}
	info, err := procfs.New(p.root(), func(int) (string, error) { return "", nil }).Process(pid)
	if err != nil && info.Command == "" {
		return fmt.Sprintf("pid %d: %v", pid, err), nil
	}
	job := info.Owner.SlurmJob
	if job == "" {
		job = info.EnvJob
	}
	switch {
	case info.Owner.PodUID != "":
		// A pod's process: the pod may still be alive; a node-local
		// analyzer cannot ask the API server, so it leaves it.
		return fmt.Sprintf("pid %d belongs to pod %s", pid, info.Owner.PodUID), nil
	case job != "":
		if p.JobActive == nil {
			return fmt.Sprintf("pid %d belongs to job %s and no scheduler can say whether it still runs", pid, job), nil
		}
		live, err := p.JobActive(ctx, job)
		if err != nil {
			return fmt.Sprintf("pid %d belongs to job %s, whose state is unknown (%v)", pid, job, err), nil
		}
		if live {
			return fmt.Sprintf("pid %d belongs to job %s, which still runs", pid, job), nil
		}
	}
	return "", nil
}

// holdsMemory returns the GPU on which NVML lists pid with memory, or "".
func (p *Processes) holdsMemory(gpus []string, pid int) (string, error) {
	if p.GPUs == nil {
		return "", ErrNoNVML
	}
	for _, uuid := range gpus {
		holders, err := p.GPUs.Holders(uuid)
		if err != nil {
			return "", err
		}
		if holders[pid] > 0 {
			return uuid, nil
		}
	}
	return "", nil
}
