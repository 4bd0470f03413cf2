// Package gpumodel knows the GPU models a fleet is made of: memory, MIG
// profiles, board power limit (TDP) and typical idle draw. The analyzer uses
// the power figures when the data carries no power limit (dcgm-exporter's
// default counter set has none) and before the fleet's own idle steps have
// taught it a model's idle floor; reports use the memory and MIG figures for right-sizing advice.
//
// Model names are matched by substring on dcgm-exporter's modelName label
// ("NVIDIA A100-SXM4-80GB"), most specific entry first.
package gpumodel

import (
	"math"
	"strings"
)

// MIGProfile is one MIG slice: its name, memory in GiB and the sevenths of
// the GPU's compute it takes.
type MIGProfile struct {
	Name   string
	MemGiB float64
	Slices int
}

// Model is what is known of one GPU model.
type Model struct {
	// Match parts must all occur in the model name.
	Match  []string
	MemGiB float64
	// TDPWatts is the board's default power limit; IdleWatts a typical draw
	// with no context and no work, as nvidia-smi shows it on a quiet node.
	TDPWatts, IdleWatts float64
	// ContextWatts is the draw of a board that holds CUDA contexts and runs
	// nothing, where it is known to sit well above IdleWatts: a context
	// keeps the board out of its deepest power state, which on small
	// inference parts is a large share of their TDP. 0 where the table has
	// no such figure (IdleWatts stands in). See IdleFloorWatts.
	ContextWatts float64
	// MaxSMClockMHz is the board's maximum (boost) SM clock, from the same
	// data sheets (A100 1410 MHz, H100/H200 SXM 1980, H100 PCIe 1755, H100
	// NVL 1785, L40S 2520, L4 2040, A10 1695, A30 1440, A40 1740, T4 1590,
	// V100 SXM2 1530); 0 where not known. Throttling is measured against it.
	MaxSMClockMHz float64
	MIG           []MIGProfile
}

// Power figures: TDP from NVIDIA's data sheets (A100: "NVIDIA A100 Tensor
// Core GPU Datasheet", 400 W SXM4 / 300 W PCIe; H100: "NVIDIA H100 Tensor
// Core GPU Datasheet", 700 W SXM5 / 350 W PCIe, H100 NVL 400 W; H200:
// "NVIDIA H200 Tensor Core GPU" product brief, 700 W SXM; L40S data sheet
// 350 W; L4 72 W; T4 70 W; A10 150 W; A30 165 W; A40 300 W; V100 SXM2 300 W,
// PCIe 250 W; B200 1000 W). Idle draws are the figures reported by
// nvidia-smi on idle, persistence-mode boards in public benchmarks and
// vendor forums (A100 SXM ≈ 50–60 W, H100 SXM ≈ 70 W, L40S ≈ 30–35 W, T4
// ≈ 10 W): they are only a starting point, since the analyzer learns each
// model's idle floor from what the fleet's GPUs of that model draw while
// their utilization is 0.
var models = []Model{
	{Match: []string{"A100", "80GB", "PCIE"}, MemGiB: 80, TDPWatts: 300, IdleWatts: 45, MaxSMClockMHz: 1410, MIG: a100x80},
	{Match: []string{"A100", "80GB"}, MemGiB: 80, TDPWatts: 400, IdleWatts: 55, MaxSMClockMHz: 1410, MIG: a100x80},
	{Match: []string{"A100", "PCIE"}, MemGiB: 40, TDPWatts: 250, IdleWatts: 40, MaxSMClockMHz: 1410, MIG: a100x40},
	{Match: []string{"A100"}, MemGiB: 40, TDPWatts: 400, IdleWatts: 55, MaxSMClockMHz: 1410, MIG: a100x40},
	{Match: []string{"H100", "NVL"}, MemGiB: 94, TDPWatts: 400, IdleWatts: 60, MaxSMClockMHz: 1785, MIG: h100x94},
	{Match: []string{"H100", "94GB"}, MemGiB: 94, TDPWatts: 700, IdleWatts: 70, MaxSMClockMHz: 1980, MIG: h100x94},
	{Match: []string{"H100", "PCIE"}, MemGiB: 80, TDPWatts: 350, IdleWatts: 50, MaxSMClockMHz: 1755, MIG: h100x80},
	{Match: []string{"H100"}, MemGiB: 80, TDPWatts: 700, IdleWatts: 70, MaxSMClockMHz: 1980, MIG: h100x80},
	{Match: []string{"H200"}, MemGiB: 141, TDPWatts: 700, IdleWatts: 75, MaxSMClockMHz: 1980, MIG: []MIGProfile{{"1g.18gb", 18, 1}, {"2g.35gb", 35, 2}, {"3g.71gb", 71, 3}, {"4g.71gb", 71, 4}, {"7g.141gb", 141, 7}}},
	{Match: []string{"B200"}, MemGiB: 180, TDPWatts: 1000, IdleWatts: 120, MIG: []MIGProfile{{"1g.23gb", 23, 1}, {"2g.45gb", 45, 2}, {"3g.90gb", 90, 3}, {"4g.90gb", 90, 4}, {"7g.180gb", 180, 7}}},
	{Match: []string{"A30"}, MemGiB: 24, TDPWatts: 165, IdleWatts: 30, MaxSMClockMHz: 1440, MIG: []MIGProfile{{"1g.6gb", 6, 1}, {"2g.12gb", 12, 2}, {"4g.24gb", 24, 4}}},
	{Match: []string{"L40"}, MemGiB: 48, TDPWatts: 350, IdleWatts: 35, MaxSMClockMHz: 2520},
	{Match: []string{"A40"}, MemGiB: 48, TDPWatts: 300, IdleWatts: 30, MaxSMClockMHz: 1740},
	// L4 idle with contexts: about 35 W (0.49 of its 72 W TDP), the draw
	// measured on a fleet's L4s holding idle notebooks' CUDA contexts
	// (gpuwatch issue #56, "Idle is judged by a fixed share of TDP").
	{Match: []string{"L4"}, MemGiB: 24, TDPWatts: 72, IdleWatts: 16, ContextWatts: 35, MaxSMClockMHz: 2040},
	{Match: []string{"A10"}, MemGiB: 24, TDPWatts: 150, IdleWatts: 20, MaxSMClockMHz: 1695},
	{Match: []string{"T4"}, MemGiB: 16, TDPWatts: 70, IdleWatts: 10, MaxSMClockMHz: 1590},
	{Match: []string{"V100", "32GB"}, MemGiB: 32, TDPWatts: 300, IdleWatts: 40, MaxSMClockMHz: 1530},
	{Match: []string{"V100"}, MemGiB: 16, TDPWatts: 300, IdleWatts: 40, MaxSMClockMHz: 1530},
}

var (
	a100x80 = []MIGProfile{{"1g.10gb", 10, 1}, {"2g.20gb", 20, 2}, {"3g.40gb", 40, 3}, {"4g.40gb", 40, 4}, {"7g.80gb", 80, 7}}
	a100x40 = []MIGProfile{{"1g.5gb", 5, 1}, {"2g.10gb", 10, 2}, {"3g.20gb", 20, 3}, {"4g.20gb", 20, 4}, {"7g.40gb", 40, 7}}
	h100x94 = []MIGProfile{{"1g.12gb", 12, 1}, {"2g.24gb", 24, 2}, {"3g.47gb", 47, 3}, {"4g.47gb", 47, 4}, {"7g.94gb", 94, 7}}
	h100x80 = []MIGProfile{{"1g.10gb", 10, 1}, {"2g.20gb", 20, 2}, {"3g.40gb", 40, 3}, {"4g.40gb", 40, 4}, {"7g.80gb", 80, 7}}
)

// Smaller whole GPUs to suggest when a model has no MIG.
var smaller = []struct {
	name   string
	memGiB float64
}{{"T4 (16 GB)", 16}, {"L4 (24 GB)", 24}, {"L40S (48 GB)", 48}}

// IdleFloorWatts is the published draw of an idle board of the model that
// may hold contexts: ContextWatts where the table has it, else IdleWatts.
// The analyzer uses it as a model's idle floor until the fleet's own idle
// steps have taught one (analyzer/detect's FloorBook).
func (m Model) IdleFloorWatts() float64 { return max(m.IdleWatts, m.ContextWatts) }

// Lookup returns the model's entry.
func Lookup(name string) (Model, bool) {
	u := strings.ToUpper(name)
	for _, m := range models {
		ok := true
		for _, p := range m.Match {
			ok = ok && strings.Contains(u, p)
		}
		if ok {
			return m, true
		}
	}
	return Model{}, false
}

// MemGiB is the model's memory, or +Inf when unknown (any smaller GPU may
// then be suggested).
func MemGiB(name string) float64 {
	if m, ok := Lookup(name); ok {
		return m.MemGiB
	}
	return math.Inf(1)
}

// Headroom keeps a recommendation from fitting the observed peak exactly.
const Headroom = 1.2

// FitMIG returns the smallest MIG profile of the model that holds peakGiB
// with headroom and is smaller than the whole GPU.
func FitMIG(name string, peakGiB float64) (MIGProfile, bool) {
	m, ok := Lookup(name)
	if !ok {
		return MIGProfile{}, false
	}
	for _, p := range m.MIG {
		if p.MemGiB >= peakGiB*Headroom && p.Slices < 7 {
			return p, true
		}
	}
	return MIGProfile{}, false
}

// SmallerGPU returns a whole GPU smaller than the model that holds peakGiB
// with headroom.
func SmallerGPU(name string, peakGiB float64) (string, bool) {
	for _, g := range smaller {
		if g.memGiB >= peakGiB*Headroom && g.memGiB < MemGiB(name) {
			return g.name, true
		}
	}
	return "", false
}
