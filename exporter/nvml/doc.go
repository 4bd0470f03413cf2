// Package nvml is the real telemetry source: NVML through go-nvml
// (github.com/NVIDIA/go-nvml), loaded at run time, so the binary starts on a
// machine without a driver and says so (ErrNoDriver).
//
// # Lifecycle
//
// New calls Init first and nothing else when it fails: any other NVML call
// after a failed Init kills the process. It then enumerates the GPUs once
// (DeviceGetCount, DeviceGetHandleByIndex, GetUUID, GetName, GetPciInfo),
// their NVLink links (GetNvLinkState), MIG GPU instances (GetMigMode,
// GetGpuInstanceProfileInfo, GetGpuInstances, GpuInstance.GetInfo, and
// GetMaxMigDeviceCount, GetMigDeviceHandleByIndex, GetGpuInstanceId for the
// MIG device handles), GPM support (GpmQueryDeviceSupport, two
// GpmSampleAlloc per GPU and per GPU instance) and registers for XID events
// (EventSetCreate, RegisterEvents). A MIG reconfiguration needs a restart.
//
// # Which NVML call feeds which metric
//
// Generated from the reads table in reads.go and the code of the other
// calls (UPDATE_DOCS=1 go test ./exporter/nvml rewrites it).
//
//	GetMemoryInfo_v2 (else GetMemoryInfo)
//	    DCGM_FI_DEV_FB_USED, DCGM_FI_DEV_FB_FREE, DCGM_FI_DEV_FB_RESERVED (bytes / 2^20, MiB;
//	    reserved from v2 only)
//	GetUtilizationRates
//	    DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_MEM_COPY_UTIL (%)
//	GetEncoderUtilization
//	    DCGM_FI_DEV_ENC_UTIL (%)
//	GetDecoderUtilization
//	    DCGM_FI_DEV_DEC_UTIL (%)
//	GetTemperature(TEMPERATURE_GPU)
//	    DCGM_FI_DEV_GPU_TEMP (C)
//	GetPowerUsage
//	    DCGM_FI_DEV_POWER_USAGE (mW / 1000, W)
//	GetPowerManagementLimit
//	    DCGM_FI_DEV_POWER_MGMT_LIMIT (mW / 1000, W)
//	GetTotalEnergyConsumption
//	    DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (mJ, counter)
//	GetClockInfo(CLOCK_SM)
//	    DCGM_FI_DEV_SM_CLOCK (MHz)
//	GetClockInfo(CLOCK_MEM)
//	    DCGM_FI_DEV_MEM_CLOCK (MHz)
//	GetViolationStatus(PERF_POLICY_POWER)
//	    DCGM_FI_DEV_POWER_VIOLATION (ns, counter)
//	GetViolationStatus(PERF_POLICY_THERMAL)
//	    DCGM_FI_DEV_THERMAL_VIOLATION (ns, counter)
//	GetTotalEccErrors(CORRECTED, VOLATILE_ECC)
//	    DCGM_FI_DEV_ECC_SBE_VOL_TOTAL (errors)
//	GetTotalEccErrors(UNCORRECTED, VOLATILE_ECC)
//	    DCGM_FI_DEV_ECC_DBE_VOL_TOTAL (errors)
//	GetTotalEccErrors(CORRECTED, AGGREGATE_ECC)
//	    DCGM_FI_DEV_ECC_SBE_AGG_TOTAL (errors)
//	GetTotalEccErrors(UNCORRECTED, AGGREGATE_ECC)
//	    DCGM_FI_DEV_ECC_DBE_AGG_TOTAL (errors)
//	GetRetiredPages(MULTIPLE_SINGLE_BIT_ECC_ERRORS)
//	    DCGM_FI_DEV_RETIRED_SBE (number of pages)
//	GetRetiredPages(DOUBLE_BIT_ECC_ERROR)
//	    DCGM_FI_DEV_RETIRED_DBE (number of pages)
//	GetRetiredPagesPendingStatus
//	    DCGM_FI_DEV_RETIRED_PENDING (0/1)
//	GetRemappedRows
//	    DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS, DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS,
//	    DCGM_FI_DEV_ROW_REMAP_PENDING, DCGM_FI_DEV_ROW_REMAP_FAILURE (rows; pending and failure 0/1)
//	GetPcieReplayCounter
//	    DCGM_FI_DEV_PCIE_REPLAY_COUNTER (counter)
//	GetFieldValues(FI_DEV_MEMORY_TEMP)
//	    DCGM_FI_DEV_MEMORY_TEMP (C)
//	GetCurrentClocksEventReasons (else GetCurrentClocksThrottleReasons)
//	    DCGM_FI_DEV_CLOCKS_EVENT_REASONS, gpuwatch_clock_event_reason_active (the bitmask, and 0/1
//	    per reason: gpu_idle, applications_clocks_setting, sw_power_cap, hw_slowdown, sync_boost,
//	    sw_thermal_slowdown, hw_thermal_slowdown, hw_power_brake_slowdown, display_clock_setting)
//	GetNvLinkErrorCounter(link, DL_CRC_FLIT, DL_CRC_DATA, DL_REPLAY, DL_RECOVERY)
//	    DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL,
//	    DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL, DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL
//	    (sum over enabled links)
//	GetFieldValues(FI_DEV_NVLINK_THROUGHPUT_DATA_TX/_RX, scope = link)
//	    DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL (KiB of data, TX + RX, sum over links)
//	GetComputeRunningProcesses, GetGraphicsRunningProcesses
//	    gpuwatch_process_gpu_memory_bytes (bytes, with pid and type; on a MIG GPU the process belongs
//	    to its GPU instance; attribution adds the rest)
//	GetProcessUtilization(last sample's timestamp)
//	    gpuwatch_holder_sm_utilization_ratio, gpuwatch_holder_memory_utilization_ratio,
//	    gpuwatch_holder_encoder_utilization_ratio, gpuwatch_holder_decoder_utilization_ratio,
//	    gpuwatch_holder_gpu_memory_bytes (each process's samples since the last cycle averaged,
//	    percent / 100, summed per holder once attribution named the processes' jobs; ERROR_NOT_FOUND
//	    is every process idle; never called on a GPU in MIG mode, where NVML cannot)
//	EventSetWait (XID critical error events)
//	    DCGM_FI_DEV_XID_ERRORS, gpuwatch_xid_errors_total (last XID, 0 before any; count per XID)
//	GPM: GpmSampleGet / GpmMigSampleGet, GpmMetricsGet over the previous and the current sample
//	    DCGM_FI_PROF_GR_ENGINE_ACTIVE, DCGM_FI_PROF_SM_ACTIVE, DCGM_FI_PROF_SM_OCCUPANCY,
//	    DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, DCGM_FI_PROF_DRAM_ACTIVE, DCGM_FI_PROF_PIPE_FP64_ACTIVE,
//	    DCGM_FI_PROF_PIPE_FP32_ACTIVE, DCGM_FI_PROF_PIPE_FP16_ACTIVE, DCGM_FI_PROF_PCIE_TX_BYTES,
//	    DCGM_FI_PROF_PCIE_RX_BYTES, DCGM_FI_PROF_NVLINK_TX_BYTES, DCGM_FI_PROF_NVLINK_RX_BYTES
//	    (utilisations: percent / 100, ratio 0-1; PCIe and NVLink: MiB/s x 2^20, bytes/s)
//	(every collection)
//	    gpuwatch_gpu_up, gpuwatch_exporter_capabilities (capabilities: source="nvml", "gpm", and
//	    "process_utilization" for a cycle that read every process's own use)
//
// On a MIG GPU the physical GPU keeps its series and each GPU instance gets
// its own (labels GPU_I_PROFILE, GPU_I_ID): framebuffer used and free from
// the MIG device handle's GetMemoryInfo, and the DCGM_FI_PROF_* metrics from
// GpmMigSampleGet — the utilisation that dcgm-exporter cannot give per
// instance.
//
// # Faults
//
// A field the device does not support (ERROR_NOT_SUPPORTED or
// ERROR_FUNCTION_NOT_FOUND) is left out, logged once and not asked again.
// Any other error on a field is a source.FieldError (counted in
// gpuwatch_exporter_collect_errors_total{field}) and the rest of the device
// is still published. ERROR_GPU_IS_LOST on any call, or any error reading
// the framebuffer (the one must-have call), reports the GPU, and its GPU
// instances, with gpuwatch_gpu_up 0; other GPUs are untouched. GPM needs two
// samples: the first cycle after start publishes no DCGM_FI_PROF_* values,
// and a device without GPM never does.
package nvml
