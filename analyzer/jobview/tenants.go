package jobview

import (
	"sort"

	"github.com/gpuwatch/gpuwatch/analyzer/accounting"
)

// Tenant is one holder of a GPU the job shared (time-slicing, MPS, a
// HAMi share), as the accounting of the job's window books it: its part
// of the devices' hours and what it made of them, judged on its own use
// where the exporter publishes it (gpuwatch_holder_*).
type Tenant struct {
	Job  string `json:"job"`
	User string `json:"user,omitempty"`
	Team string `json:"team,omitempty"`
	// Self marks the job the view is about.
	Self bool `json:"self,omitempty"`
	// Share is the part of its GPUs' time the holder held (a quarter as
	// one of four holders of a time-sliced GPU).
	Share          float64 `json:"share"`
	GPUHours       float64 `json:"gpu_hours"`
	UsedGPUHours   float64 `json:"used_gpu_hours"`
	WastedGPUHours float64 `json:"wasted_gpu_hours"`
}

// holding is what the book of the job's analysis says the job held, and
// who held the same GPUs beside it.
type holding struct {
	// shared is the job's GPU-hours by its share of each GPU; whole the
	// same steps counted with whole GPUs.
	shared, whole float64
	tenants       []Tenant
}

// holdingOf reads the job's holding from a book of its devices' window:
// every allocation in it is a holder of one of the job's GPUs.
func holdingOf(b *accounting.Book, job string) holding {
	var h holding
	sharer := false
	for _, a := range b.Allocations {
		if a.Allocated <= 0 {
			continue
		}
		if a.Job == job {
			h.shared += a.Allocated
			h.whole += a.WholeGPUHours
			sharer = sharer || a.Shared()
		}
		h.tenants = append(h.tenants, Tenant{Job: a.Job, User: a.User, Team: a.Team, Self: a.Job == job, Share: a.Share(),
			GPUHours: a.Allocated, UsedGPUHours: a.Used, WastedGPUHours: a.Wasted})
	}
	if !sharer {
		// The job's GPUs were its own all along: no tenants to show.
		h.tenants = nil
	}
	sort.Slice(h.tenants, func(i, j int) bool { return h.tenants[i].Job < h.tenants[j].Job })
	return h
}

// fraction is the part of its GPUs' time the job held: 1 on GPUs of its
// own, a quarter as one of four holders of a time-sliced GPU; 1 when the
// book has no step of it.
func (h holding) fraction() float64 {
	if h.whole <= 0 {
		return 1
	}
	return min(1, h.shared/h.whole)
}

// SharePercent is Share in percent, as the text and the page print it.
func (t Tenant) SharePercent() float64 { return 100 * t.Share }
