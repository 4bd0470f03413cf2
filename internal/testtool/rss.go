package testtool

import (
	"os"
	"strconv"
	"strings"
)

// PeakRSS reads the process's peak resident set (VmHWM) in bytes, or -1
// where /proc has none. Scale tests hold it to their memory targets.
func PeakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return -1
}
