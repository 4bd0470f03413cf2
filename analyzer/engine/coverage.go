package engine

import (
	"fmt"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/detect"
	"github.com/gpuwatch/gpuwatch/analyzer/features"
)

// Coverage says what an analysis saw, so that "no finding" can be told
// from "no data": the GPUs and allocations in the data, the share of
// GPU-steps with enough samples to judge, and, when nothing was found, why.
type Coverage struct {
	From  time.Time `json:"from"`
	To    time.Time `json:"to"`
	Steps int       `json:"steps"`
	// GPUs is the distinct GPUs and MIG instances with data; Allocations
	// the distinct holders (host and job) on them.
	GPUs        int `json:"gpus"`
	Allocations int `json:"allocations"`
	// Ratio is the share of GPU-steps (GPUs × steps) with enough samples to
	// be judged; missing data is unknown, never idle.
	Ratio float64 `json:"coverage"`
	// FirstData and LastData bound the steps that held any data.
	FirstData time.Time `json:"first_data,omitzero"`
	LastData  time.Time `json:"last_data,omitzero"`
	// Reason explains an empty result; empty when there are findings.
	Reason string `json:"reason,omitempty"`
	// Exporters lists the pods taken for GPU exporters' own (scrape
	// targets), with the evidence: never jobs, never findings.
	Exporters []features.Exporter `json:"exporters"`
	// IdleFloors is the idle floor of power each GPU model was judged by
	// (the power veto, the hang's spin signature): learnt from the fleet's
	// idle steps, or the published figure.
	IdleFloors []detect.IdleFloor `json:"idle_floors,omitempty"`
	// Shares are the HAMi containers' shares of GPUs seen in the window:
	// reserved against used, and the quota that would fit
	// (features.ReadHAMi); none without HAMi's series.
	Shares []features.ShareWaste `json:"hami_shares,omitempty"`
}

// coverageCounter accumulates Coverage over steps.
type coverageCounter struct {
	cfg               config.Config
	steps, knownSteps int
	gpus, allocs      map[string]bool
	first, last       time.Time
}

func newCoverageCounter(cfg config.Config) *coverageCounter {
	return &coverageCounter{cfg: cfg, gpus: map[string]bool{}, allocs: map[string]bool{}}
}

func (c *coverageCounter) add(s features.Step) {
	c.steps++
	if len(s.GPUs) == 0 {
		return
	}
	if c.first.IsZero() {
		c.first = s.Start
	}
	c.last = s.End
	for _, g := range s.GPUs {
		c.gpus[features.DeviceID(g.Host, g.Device)] = true
		if g.Job != "" {
			c.allocs[g.Host+"|"+g.Job] = true
		}
	}
	for d := range s.DeviceSamples {
		if s.Known(d, float64(c.cfg.MinCoverage)) {
			c.knownSteps++
		}
	}
}

// shortest is the least time any detector needs to see before it can fire.
func shortest(cfg config.Config) time.Duration {
	p := cfg.Patterns
	d := p.CPUOnly.MinDuration.D()
	for _, x := range []time.Duration{p.Stuck.SpinDuration.D(), p.Stuck.IdleDuration.D(), p.IdleSession.MinDuration.D()} {
		d = min(d, x)
	}
	return d
}

func (c *coverageCounter) result(from, to time.Time, findings int) Coverage {
	cv := Coverage{From: from, To: to, Steps: c.steps, GPUs: len(c.gpus), Allocations: len(c.allocs),
		FirstData: c.first, LastData: c.last}
	if cv.GPUs > 0 && c.steps > 0 {
		cv.Ratio = float64(c.knownSteps) / float64(cv.GPUs*c.steps)
	}
	if findings > 0 {
		return cv
	}
	need := shortest(c.cfg)
	switch {
	case cv.GPUs == 0:
		cv.Reason = "no data: no GPU series (DCGM_FI_DEV_FB_USED with a UUID label) in the window; check the address, the window and that dcgm-exporter or gpuwatch is scraped"
	case cv.Allocations == 0:
		cv.Reason = fmt.Sprintf("no allocation on %d GPUs: no series carries hpc_job, pod/namespace or exported_pod/exported_namespace, so the label convention is unknown or no GPU was allocated (see docs/data-sources.md)", cv.GPUs)
	case c.last.Sub(c.first) < need:
		cv.Reason = fmt.Sprintf("window too short: %s of data, shorter than the quickest detector's threshold (%s)", c.last.Sub(c.first), need)
	default:
		cv.Reason = fmt.Sprintf("no waste found on %d allocations", cv.Allocations)
	}
	return cv
}
