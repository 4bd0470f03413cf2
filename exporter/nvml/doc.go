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
//	GetMemoryInfo_v2 (else GetMemoryInfo)       DCGM_FI_DEV_FB_USED, _FB_FREE, _FB_RESERVED (v2 only); bytes / 2^20, MiB
//	GetUtilizationRates                         DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_MEM_COPY_UTIL (%)
//	GetEncoderUtilization                       DCGM_FI_DEV_ENC_UTIL (%)
//	GetDecoderUtilization                       DCGM_FI_DEV_DEC_UTIL (%)
//	GetTemperature(TEMPERATURE_GPU)             DCGM_FI_DEV_GPU_TEMP (C)
//	GetFieldValues(FI_DEV_MEMORY_TEMP)          DCGM_FI_DEV_MEMORY_TEMP (C)
//	GetPowerUsage                               DCGM_FI_DEV_POWER_USAGE (mW / 1000, W)
//	GetPowerManagementLimit                     DCGM_FI_DEV_POWER_MGMT_LIMIT (mW / 1000, W)
//	GetTotalEnergyConsumption                   DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (mJ, counter)
//	GetClockInfo(CLOCK_SM, CLOCK_MEM)           DCGM_FI_DEV_SM_CLOCK, DCGM_FI_DEV_MEM_CLOCK (MHz)
//	GetCurrentClocksEventReasons                DCGM_FI_DEV_CLOCKS_EVENT_REASONS (bitmask) and
//	  (else GetCurrentClocksThrottleReasons)    gpuwatch_clock_event_reason_active{reason} (0/1 per bit:
//	                                            gpu_idle, applications_clocks_setting, sw_power_cap,
//	                                            hw_slowdown, sync_boost, sw_thermal_slowdown,
//	                                            hw_thermal_slowdown, hw_power_brake_slowdown,
//	                                            display_clock_setting)
//	GetViolationStatus(PERF_POLICY_POWER)       DCGM_FI_DEV_POWER_VIOLATION (ns, counter)
//	GetViolationStatus(PERF_POLICY_THERMAL)     DCGM_FI_DEV_THERMAL_VIOLATION (ns, counter)
//	GetTotalEccErrors(CORRECTED|UNCORRECTED,    DCGM_FI_DEV_ECC_SBE_VOL_TOTAL, _DBE_VOL_TOTAL,
//	  VOLATILE_ECC|AGGREGATE_ECC)               _SBE_AGG_TOTAL, _DBE_AGG_TOTAL
//	GetRetiredPages(cause), length              DCGM_FI_DEV_RETIRED_SBE, DCGM_FI_DEV_RETIRED_DBE
//	GetRetiredPagesPendingStatus                DCGM_FI_DEV_RETIRED_PENDING (0/1)
//	GetRemappedRows                             DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS, _UNCORRECTABLE_REMAPPED_ROWS,
//	                                            DCGM_FI_DEV_ROW_REMAP_PENDING, DCGM_FI_DEV_ROW_REMAP_FAILURE (0/1)
//	GetPcieReplayCounter                        DCGM_FI_DEV_PCIE_REPLAY_COUNTER
//	GetNvLinkErrorCounter(link, DL_CRC_FLIT,    DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, _CRC_DATA_ERROR_COUNT_TOTAL,
//	  DL_CRC_DATA, DL_REPLAY, DL_RECOVERY)      _REPLAY_ERROR_COUNT_TOTAL, _RECOVERY_ERROR_COUNT_TOTAL (sum over enabled links)
//	GetFieldValues(FI_DEV_NVLINK_THROUGHPUT_    DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL (KiB of data, TX + RX, sum over links)
//	  DATA_TX/_RX, scope = link)
//	GetComputeRunningProcesses,                 gpuwatch_process_gpu_memory_bytes{pid,type} (bytes; on a MIG GPU the
//	  GetGraphicsRunningProcesses               process belongs to its GPU instance); attribution adds the rest
//	EventSetWait (XID critical error events)    DCGM_FI_DEV_XID_ERRORS (last XID, 0 before any),
//	                                            gpuwatch_xid_errors_total{xid}
//	GPM: GpmSampleGet / GpmMigSampleGet,        DCGM_FI_PROF_GR_ENGINE_ACTIVE (GRAPHICS_UTIL), _SM_ACTIVE (SM_UTIL),
//	  GpmMetricsGet over the previous and       _SM_OCCUPANCY (SM_OCCUPANCY), _PIPE_TENSOR_ACTIVE (ANY_TENSOR_UTIL),
//	  the current sample                        _DRAM_ACTIVE (DRAM_BW_UTIL), _PIPE_FP64/FP32/FP16_ACTIVE (FPxx_UTIL):
//	                                            percent / 100, ratio 0-1;
//	                                            _PCIE_TX/RX_BYTES (PCIE_TX/RX_PER_SEC),
//	                                            _NVLINK_TX/RX_BYTES (NVLINK_TOTAL_TX/RX_PER_SEC): MiB/s x 2^20, bytes/s
//	(every collection)                          gpuwatch_gpu_up, gpuwatch_exporter_capabilities{source="nvml"|"gpm"}
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
