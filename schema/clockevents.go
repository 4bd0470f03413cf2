package schema

// ClockEventReason is one bit of DCGM_FI_DEV_CLOCKS_EVENT_REASONS (NVML's
// nvmlClocksEventReason* constants) and the `reason` label value of its
// gpuwatch_clock_event_reason_active series. The NVML source, the simulator,
// the dashboards and the alert rules all take names and bits from here.
type ClockEventReason struct {
	Name string
	Bit  uint64
}

// ClockEventReasons in bit order.
var ClockEventReasons = []ClockEventReason{
	{"gpu_idle", 0x1},
	{"applications_clocks_setting", 0x2},
	{"sw_power_cap", 0x4},
	{"hw_slowdown", 0x8},
	{"sync_boost", 0x10},
	{"sw_thermal_slowdown", 0x20},
	{"hw_thermal_slowdown", 0x40},
	{"hw_power_brake_slowdown", 0x80},
	{"display_clock_setting", 0x100},
}
