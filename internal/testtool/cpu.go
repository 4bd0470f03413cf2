package testtool

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPUTime is this process' user and system CPU time so far. Tests bound
// CPU time, not wall time, where they bound at all: the other tests sharing
// the machine stretch wall time, not the CPU a piece of work costs.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ChildrenCPUTime is the user and system CPU time of this process'
// children that have ended and been waited for: the programs a test ran.
func ChildrenCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ProcessCPU is the user and system CPU time of process pid so far, from
// /proc; 0 when it cannot be read.
func ProcessCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command's closing parenthesis (the command may
	// hold spaces); utime and stime are the 14th and 15th of the line, in
	// clock ticks of 100 a second.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 > len(b) {
		return 0
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(ut+st) * (time.Second / 100)
}
