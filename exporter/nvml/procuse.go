package nvml

import (
	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/exporter/source"
)

// readProcessUse reads each process's own use of the device since the last
// cycle, so that a shared GPU (time-slicing, MPS) can be split by holder.
// procs are the processes of this device listed this cycle; complete says the
// listing succeeded, without which a sample could not be matched to its
// process. It reports whether every process's use is known (Device.ProcessUse).
//
// go-nvml v0.13.4-1's GetProcessesUtilizationInfo (the newer call) passes no
// sample buffer to the driver, so it can only count samples; the older
// GetProcessUtilization carries the same four engines and is what this reads.
func (s *Source) readProcessUse(d *device, r *reader, procs []source.Process, complete bool) bool {
	if len(d.mig) > 0 {
		// NVML answers NOT_SUPPORTED in MIG mode: a process's share belongs
		// to its GPU instance, which NVML cannot sample per process.
		return false
	}
	if !complete || r.skip(fProcessUtil) {
		return false
	}
	samples, ret := d.h.GetProcessUtilization(d.lastUseTS)
	if ret == gonvml.ERROR_NOT_FOUND {
		return true // no sample since the last cycle: every process was idle
	}
	if !r.ok(fProcessUtil, ret) {
		return false
	}
	d.attachUse(samples, procs)
	return true
}

// attachUse averages each PID's samples (the driver keeps several per
// process between two reads) and hangs the result on the process. A PID with
// no listed process (it exited since) is dropped: it cannot be attributed.
func (d *device) attachUse(samples []gonvml.ProcessUtilizationSample, procs []source.Process) {
	if cap(d.useCount) < len(procs) {
		d.useCount = make([]int, len(procs))
	}
	counts := d.useCount[:len(procs)]
	clear(counts)
	// One slice per cycle: the snapshot keeps pointers into it.
	uses := make([]source.ProcessUse, len(procs))
	last := d.lastUseTS
	for i := range samples {
		sm := &samples[i]
		if sm.TimeStamp <= d.lastUseTS {
			continue // already counted last cycle
		}
		if sm.TimeStamp > last {
			last = sm.TimeStamp
		}
		j := processIndex(procs, sm.Pid)
		if j < 0 {
			continue
		}
		u := &uses[j]
		u.SM += float64(sm.SmUtil)
		u.Memory += float64(sm.MemUtil)
		u.Encoder += float64(sm.EncUtil)
		u.Decoder += float64(sm.DecUtil)
		counts[j]++
	}
	d.lastUseTS = last
	for j, n := range counts {
		if n == 0 {
			continue
		}
		u := &uses[j]
		f := float64(n)
		u.SM, u.Memory, u.Encoder, u.Decoder = u.SM/f, u.Memory/f, u.Encoder/f, u.Decoder/f
		procs[j].Use = u
	}
}

// processIndex finds the first process listed with pid. A process may be
// listed twice (compute and graphics); its use is counted once.
func processIndex(procs []source.Process, pid uint32) int {
	for j := range procs {
		if procs[j].PID == int(pid) {
			return j
		}
	}
	return -1
}

// capsWithUse is the device's capability list with process_utilization
// added: one of two shared, read-only slices.
func (s *Source) capsWithUse(caps []string) []string {
	for _, c := range caps {
		if c == capGPM {
			return s.capsGPMUse
		}
	}
	return s.capsNVMLUse
}
