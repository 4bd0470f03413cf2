package schema

// Names of the fields a telemetry source reads from a device: the `field`
// label of gpuwatch_exporter_collect_errors_total, the NVML source's
// FieldError, and the field a simulated field_error fault fails.
const (
	FieldMemory              = "memory"
	FieldUtilization         = "utilization"
	FieldEncoderUtilization  = "encoder_utilization"
	FieldDecoderUtilization  = "decoder_utilization"
	FieldTemperature         = "temperature"
	FieldFieldValues         = "field_values"
	FieldMemoryTemperature   = "memory_temperature"
	FieldPowerUsage          = "power_usage"
	FieldPowerLimit          = "power_limit"
	FieldEnergy              = "energy"
	FieldSMClock             = "sm_clock"
	FieldMemClock            = "mem_clock"
	FieldClockEventReasons   = "clock_event_reasons"
	FieldPowerViolation      = "power_violation"
	FieldThermalViolation    = "thermal_violation"
	FieldECCSBEVolatile      = "ecc_sbe_volatile"
	FieldECCDBEVolatile      = "ecc_dbe_volatile"
	FieldECCSBEAggregate     = "ecc_sbe_aggregate"
	FieldECCDBEAggregate     = "ecc_dbe_aggregate"
	FieldRetiredPagesSBE     = "retired_pages_sbe"
	FieldRetiredPagesDBE     = "retired_pages_dbe"
	FieldRetiredPagesPending = "retired_pages_pending"
	FieldRemappedRows        = "remapped_rows"
	FieldPCIeReplay          = "pcie_replay"
	FieldNVLinkCRCFlit       = "nvlink_crc_flit"
	FieldNVLinkCRCData       = "nvlink_crc_data"
	FieldNVLinkReplay        = "nvlink_replay"
	FieldNVLinkRecovery      = "nvlink_recovery"
	FieldNVLinkBandwidth     = "nvlink_bandwidth"
	FieldComputeProcesses    = "compute_processes"
	FieldGraphicsProcesses   = "graphics_processes"
	FieldGPM                 = "gpm"
)
