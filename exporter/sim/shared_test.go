package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/exporter/collector"
	"github.com/gpuwatch/gpuwatch/schema"
)

// TestSharedGPUPublishesEachHoldersUse: the built-in time-sliced scenario
// gives GPU 0 four holders at once; the device's use is their sum, and each
// holder has its own series, the idle notebook at 0 SM with its memory held.
func TestSharedGPUPublishesEachHoldersUse(t *testing.T) {
	sc, err := Builtin("shared-timeslice")
	if err != nil {
		t.Fatal(err)
	}
	src, clk := newSimFrom(t, sc, 1)
	snap := at(t, src, clk, 2*time.Hour)["share-01"]
	gpu0, gpu1 := &snap.Devices[0], &snap.Devices[1]
	if !gpu0.ProcessUse || gpu1.ProcessUse {
		t.Fatalf("ProcessUse: shared GPU %v, unshared GPU %v; want true, false", gpu0.ProcessUse, gpu1.ProcessUse)
	}
	util, _ := value(gpu0, schema.GPUUtil)
	if util < 60 || util > 90 {
		t.Errorf("shared GPU util %v, want the three servers' ~75", util)
	}
	sm := map[string]float64{}
	mem := map[string]float64{}
	for _, mf := range collector.Render(snap) {
		for _, m := range mf.GetMetric() {
			var job string
			for _, l := range m.GetLabel() {
				if l.GetName() == schema.LabelJob {
					job = l.GetValue()
				}
			}
			switch mf.GetName() {
			case schema.HolderSMUtil.Name:
				sm[job] = m.GetGauge().GetValue()
			case schema.HolderMemory.Name:
				mem[job] = m.GetGauge().GetValue()
			}
		}
	}
	if len(sm) != 4 {
		t.Fatalf("holder SM series for %v, want the four holders of GPU 0 only", sm)
	}
	for _, pod := range []string{"serve-a", "serve-b", "serve-c"} {
		if v := sm["infer/"+pod]; v < 0.15 || v > 0.35 {
			t.Errorf("%s SM %v, want ~0.25", pod, v)
		}
	}
	if v := sm["infer/nb-idle"]; v != 0 {
		t.Errorf("idle notebook SM %v, want 0", v)
	}
	if v := mem["infer/nb-idle"]; v < 3<<30 {
		t.Errorf("idle notebook memory %v bytes, want its 4 GiB held", v)
	}
	for job := range sm {
		if !strings.HasPrefix(job, "infer/") {
			t.Errorf("holder %q is not a pod of GPU 0", job)
		}
	}
}
