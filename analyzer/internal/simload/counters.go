package simload

import (
	"strings"

	"github.com/gpuwatch/gpuwatch/schema"
)

// dcgmDefaultFields is the field column of the rows dcgm-exporter
// 3.3.9-3.6.1 enables in etc/default-counters.csv (comment rows left out),
// in the file's order: no power limit and no DCGM_FI_PROF_* activity, only
// the PCIe byte counters.
const dcgmDefaultFields = `
DCGM_FI_DEV_SM_CLOCK
DCGM_FI_DEV_MEM_CLOCK
DCGM_FI_DEV_MEMORY_TEMP
DCGM_FI_DEV_GPU_TEMP
DCGM_FI_DEV_POWER_USAGE
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION
DCGM_FI_PROF_PCIE_TX_BYTES
DCGM_FI_PROF_PCIE_RX_BYTES
DCGM_FI_DEV_PCIE_REPLAY_COUNTER
DCGM_FI_DEV_GPU_UTIL
DCGM_FI_DEV_MEM_COPY_UTIL
DCGM_FI_DEV_ENC_UTIL
DCGM_FI_DEV_DEC_UTIL
DCGM_FI_DEV_XID_ERRORS
DCGM_FI_DEV_FB_FREE
DCGM_FI_DEV_FB_USED
DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL
DCGM_FI_DEV_VGPU_LICENSE_STATUS
DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS
DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS
DCGM_FI_DEV_ROW_REMAP_FAILURE
DCGM_FI_DRIVER_VERSION
`

// dcgmDCPFields is the field column of the rows dcgm-exporter 3.3.9-3.6.1
// enables in etc/dcp-metrics-included.csv, in the file's order. 4.x ships
// the same rows (plus DCGM_FI_DEV_FB_RESERVED) as its default-counters.csv:
// graphics-engine, tensor-pipe and DRAM activity, still no SM activity and
// no power limit.
const dcgmDCPFields = `
DCGM_FI_DEV_SM_CLOCK
DCGM_FI_DEV_MEM_CLOCK
DCGM_FI_DEV_MEMORY_TEMP
DCGM_FI_DEV_GPU_TEMP
DCGM_FI_DEV_POWER_USAGE
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION
DCGM_FI_DEV_PCIE_REPLAY_COUNTER
DCGM_FI_DEV_GPU_UTIL
DCGM_FI_DEV_MEM_COPY_UTIL
DCGM_FI_DEV_ENC_UTIL
DCGM_FI_DEV_DEC_UTIL
DCGM_FI_DEV_XID_ERRORS
DCGM_FI_DEV_FB_FREE
DCGM_FI_DEV_FB_USED
DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL
DCGM_FI_DEV_VGPU_LICENSE_STATUS
DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS
DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS
DCGM_FI_DEV_ROW_REMAP_FAILURE
DCGM_FI_DRIVER_VERSION
DCGM_FI_PROF_GR_ENGINE_ACTIVE
DCGM_FI_PROF_PIPE_TENSOR_ACTIVE
DCGM_FI_PROF_DRAM_ACTIVE
DCGM_FI_PROF_PCIE_TX_BYTES
DCGM_FI_PROF_PCIE_RX_BYTES
`

// Unpublished are the fields of those files that are no series of
// gpuwatch's catalogue: the vGPU licence state (no vGPU here) and the
// driver version, which dcgm-exporter turns into a label.
var Unpublished = []string{"DCGM_FI_DEV_VGPU_LICENSE_STATUS", "DCGM_FI_DRIVER_VERSION"}

// Counter sets as dcgm-exporter publishes them: every field of the file
// that the catalogue has.
var (
	DCGMDefault = counterSet(dcgmDefaultFields)
	DCGMDCP     = counterSet(dcgmDCPFields)
)

func counterSet(fields string) []*schema.Metric {
	var out []*schema.Metric
	for _, f := range strings.Fields(fields) {
		if m, ok := schema.Lookup(f); ok {
			out = append(out, m)
		}
	}
	return out
}
