// Package nvmlcheck answers the process actuator's question "which
// processes hold memory on this GPU now" from the node's NVML. It is a
// package of its own so that only binaries that kill processes link NVML.
package nvmlcheck

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVML is an initialised NVML library (Open, or a go-nvml mock in tests).
type NVML struct{ Lib nvml.Interface }

// Open initialises the driver's NVML. Every later call is gated on it: a
// call after a failed Init kills the process.
func Open() (*NVML, error) {
	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML init: %s", ret.Error())
	}
	return &NVML{Lib: lib}, nil
}

// Close shuts NVML down.
func (n *NVML) Close() error {
	if ret := n.Lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("NVML shutdown: %s", ret.Error())
	}
	return nil
}

// Holders implements action.GPUProcesses with the compute processes of the
// GPU (graphics contexts hold no job's memory on a compute node).
func (n *NVML) Holders(uuid string) (map[int]uint64, error) {
	dev, ret := n.Lib.DeviceGetHandleByUUID(uuid)
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML: GPU %s: %s", uuid, ret.Error())
	}
	procs, ret := dev.GetComputeRunningProcesses()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML: processes on GPU %s: %s", uuid, ret.Error())
	}
	out := make(map[int]uint64, len(procs))
	for _, p := range procs {
		out[int(p.Pid)] += p.UsedGpuMemory
	}
	return out, nil
}
