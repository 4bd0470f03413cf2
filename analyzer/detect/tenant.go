package detect

import "github.com/gpuwatch/gpuwatch/analyzer/features"

// A holder of a shared GPU (time-slicing, MPS: features.GPU.Holders above
// one) is judged on its own use where the exporter read it, never on the
// device's counters, which sum every holder's: an idle tenant of a busy
// GPU is idle, a busy one of a GPU whose power is high is not the cause.
// Without its own use the device's counters bound it from above: a device
// that idles (or is used lightly) idled (or was used lightly) for each
// holder, but of a busy device nothing can be told of any one holder:
// its activity is undetermined, never idle, never used, never spinning,
// and reclaims nothing (stepActivity.undetermined), while the device's
// faults and the holder's run time are still its own.

// ownView is what the detectors judge of a row: a shared device's holder
// with its own use seen through that use alone (its SM share as its util,
// its memory as the framebuffer it holds; no device activity ratio and no
// power, which are every holder's), any other row as it is. The device's
// size (FBTotalMiB) and health stay the device's.
func ownView(g features.GPU) features.GPU {
	if g.Holders <= 1 || !g.HasOwn || !g.Own.HasSM {
		return g
	}
	v := g
	v.HasUtil, v.UtilAvg, v.UtilMax = true, 100*g.Own.SM, 100*g.Own.SM
	v.HasSM, v.HasGR, v.HasDRAM, v.HasTensor, v.HasMemCopy = false, false, false, false, false
	v.HasPowerW, v.HasLimit = false, false
	if g.Own.HasMemory {
		v.FBMaxMiB, v.HasFB = g.Own.MemoryMiB, true
	}
	return v
}

// sharedBusy reports whether a row is a holder of a shared device without
// its own use, and the device's counters are above what low utilization
// allows: busy by some holder, none of them known to be the one. The
// counters of dcgm-exporter's per-vgpu copies are such a device's totals.
func (d *Detector) sharedBusy(g features.GPU) bool {
	if g.Holders <= 1 || (g.HasOwn && g.Own.HasSM) {
		return false
	}
	c := d.cfg.Patterns.LowUtilization
	switch {
	case g.HasSM:
		return g.SMAvg >= float64(c.MaxMeanSMActive)
	case g.HasUtil:
		return g.UtilAvg >= float64(c.MaxMeanUtilPercent)
	case g.HasGR:
		return g.GRAvg >= float64(c.MaxMeanSMActive)
	}
	return false
}

// lightBound reports whether a busy shared device's step is still light
// enough for low utilization (no step above its max_peak_ratio): its use
// then bounds each holder's from above, so a holder of a device used
// lightly all along is lightly used, for its share, though its activity
// in the step is undetermined. sharedBusy's line is low utilization's
// mean, which steps of a lightly used device cross and recross.
func (d *Detector) lightBound(g features.GPU) bool {
	peak := float64(d.cfg.Patterns.LowUtilization.MaxPeakRatio)
	switch {
	case g.HasSM:
		return g.SMAvg <= peak
	case g.HasUtil:
		return g.UtilAvg/100 <= peak
	case g.HasGR:
		return g.GRAvg <= peak
	}
	return false
}
