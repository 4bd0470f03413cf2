package schema

// ClockEventReason is one bit of DCGM_FI_DEV_CLOCKS_EVENT_REASONS (NVML's
// nvmlClocksEventReason* constants) and the `reason` label value of its
// gpuwatch_clock_event_reason_active series. The NVML source, the simulator,
// the dashboards and the alert rules all take names and bits from here.
type ClockEventReason struct {
	Name string
	Bit  uint64
}

// The clock-event reasons' names.
const (
	ReasonGPUIdle              = "gpu_idle"
	ReasonApplicationsClocks   = "applications_clocks_setting"
	ReasonSWPowerCap           = "sw_power_cap"
	ReasonHWSlowdown           = "hw_slowdown"
	ReasonSyncBoost            = "sync_boost"
	ReasonSWThermalSlowdown    = "sw_thermal_slowdown"
	ReasonHWThermalSlowdown    = "hw_thermal_slowdown"
	ReasonHWPowerBrakeSlowdown = "hw_power_brake_slowdown"
	ReasonDisplayClockSetting  = "display_clock_setting"
)

// ClockEventReasons in bit order.
var ClockEventReasons = []ClockEventReason{
	{ReasonGPUIdle, 0x1},
	{ReasonApplicationsClocks, 0x2},
	{ReasonSWPowerCap, 0x4},
	{ReasonHWSlowdown, 0x8},
	{ReasonSyncBoost, 0x10},
	{ReasonSWThermalSlowdown, 0x20},
	{ReasonHWThermalSlowdown, 0x40},
	{ReasonHWPowerBrakeSlowdown, 0x80},
	{ReasonDisplayClockSetting, 0x100},
}
