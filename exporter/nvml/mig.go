package nvml

import (
	"fmt"
	"math"
	"sort"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/exporter/source"
	"github.com/gpuwatch/gpuwatch/schema"
)

// enumerateMIG finds the GPU instances of a GPU in MIG mode, once. A MIG
// reconfiguration needs an exporter restart, as with dcgm-exporter.
func (s *Source) enumerateMIG(d *device) {
	d.mig = nil
	cur, _, ret := d.h.GetMigMode()
	if ret != gonvml.SUCCESS || cur != gonvml.DEVICE_MIG_ENABLE {
		return // not MIG capable, or MIG off
	}
	var total uint64
	if m, ret := d.h.GetMemoryInfo(); ret == gonvml.SUCCESS {
		total = m.Total
	}
	for p := 0; p < gonvml.GPU_INSTANCE_PROFILE_COUNT; p++ {
		info, ret := d.h.GetGpuInstanceProfileInfo(p)
		if ret != gonvml.SUCCESS {
			continue // profile not offered by this GPU
		}
		gis, ret := d.h.GetGpuInstances(&info)
		if ret != gonvml.SUCCESS {
			s.log.Warn("cannot list MIG GPU instances", "device", d.key, "profile", p, "err", ret.Error())
			continue
		}
		name := migProfileName(p, info, total)
		for _, gi := range gis {
			gii, ret := gi.GetInfo()
			if ret != gonvml.SUCCESS {
				s.log.Warn("cannot read MIG GPU instance", "device", d.key, "profile", name, "err", ret.Error())
				continue
			}
			m := &source.MIG{Profile: name, GIID: int(gii.Id), CIID: -1}
			d.mig = append(d.mig, &migInstance{giid: m.GIID, info: m, key: source.DeviceKey(d.uuid, m), caps: s.capsNVML})
		}
	}
	sort.Slice(d.mig, func(i, j int) bool { return d.mig[i].giid < d.mig[j].giid })
	s.findMIGHandles(d)
}

// findMIGHandles pairs each GPU instance with its MIG device handle, which
// answers the memory queries of the instance.
func (s *Source) findMIGHandles(d *device) {
	if len(d.mig) == 0 {
		return
	}
	n, ret := d.h.GetMaxMigDeviceCount()
	if ret != gonvml.SUCCESS {
		s.log.Info("no MIG device handles; MIG memory not published", "device", d.key, "nvml", ret.Error())
		return
	}
	for i := 0; i < n; i++ {
		mh, ret := d.h.GetMigDeviceHandleByIndex(i)
		if ret != gonvml.SUCCESS {
			continue // empty slot
		}
		giid, ret := mh.GetGpuInstanceId()
		if ret != gonvml.SUCCESS {
			continue
		}
		for _, gi := range d.mig {
			if gi.giid == giid && gi.h == nil {
				gi.h = mh
			}
		}
	}
}

// migProfileName names a GPU instance profile as nvidia-smi and
// dcgm-exporter do: "<slices>g.<memory>gb" plus the media-engine suffix.
func migProfileName(profile int, info gonvml.GpuInstanceProfileInfo, totalBytes uint64) string {
	name := fmt.Sprintf("%dg.%dgb", info.SliceCount, migMemoryGB(totalBytes, info.MemorySizeMB))
	switch profile {
	case gonvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, gonvml.GPU_INSTANCE_PROFILE_2_SLICE_REV1:
		name += "+me"
	case gonvml.GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME, gonvml.GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME:
		name += "+me.all"
	case gonvml.GPU_INSTANCE_PROFILE_1_SLICE_NO_ME, gonvml.GPU_INSTANCE_PROFILE_2_SLICE_NO_ME:
		name += "-me"
	case gonvml.GPU_INSTANCE_PROFILE_1_SLICE_GFX, gonvml.GPU_INSTANCE_PROFILE_2_SLICE_GFX,
		gonvml.GPU_INSTANCE_PROFILE_3_SLICE_GFX, gonvml.GPU_INSTANCE_PROFILE_4_SLICE_GFX:
		name += "+gfx"
	}
	return name
}

// migMemoryGB rounds an instance's memory the way NVIDIA names profiles:
// its share of the GPU, rounded up to eighths, times the GPU's size in GB.
// The instance's own size in MiB is a little under the name (9856 MiB is
// "10gb" on an 80 GB H100).
func migMemoryGB(totalBytes, instanceMiB uint64) uint64 {
	if totalBytes == 0 {
		return uint64(math.Round(float64(instanceMiB) / 1024))
	}
	frac := float64(instanceMiB) * mib / float64(totalBytes)
	frac = math.Ceil(frac*8) / 8
	totalGB := float64((totalBytes + (1<<30 - 1)) >> 30)
	return uint64(math.Round(frac * totalGB))
}

// collectMIG appends one GPU instance: memory from its MIG device handle,
// GPM activity for the instance, labelled with the parent's identity.
func (s *Source) collectMIG(d *device, gi *migInstance, parentUp bool, snap *source.Snapshot) {
	out := source.Device{Index: d.index, UUID: d.uuid, PCIBusID: d.busID, Model: d.model, MIG: gi.info,
		Up: parentUp, Capabilities: gi.caps}
	if !parentUp {
		snap.Devices = append(snap.Devices, out)
		return
	}
	r := reader{log: s.log, snap: snap, key: gi.key, unsupported: &gi.unsupported,
		samples: make([]source.Sample, 0, gi.nsamples)}
	if gi.h != nil && !r.skip(fMemory) {
		m, ret := gi.h.GetMemoryInfo()
		if r.ok(fMemory, ret) {
			r.add(schema.FBUsed, float64(m.Used/mib))
			r.add(schema.FBFree, float64(m.Free/mib))
		}
	}
	if s.gpm != nil && gi.gpm != nil && !r.lost {
		s.gpm.collect(&r, gi.gpm, d.h, gi.giid)
	}
	out.Up = !r.lost
	if !out.Up {
		r.samples = r.samples[:0]
	}
	out.Samples = r.samples
	if len(r.samples) > gi.nsamples {
		gi.nsamples = len(r.samples)
	}
	snap.Devices = append(snap.Devices, out)
}
