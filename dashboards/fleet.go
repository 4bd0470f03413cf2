package dashboards

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"

	c "github.com/gpuwatch/gpuwatch/exporter/catalogue"
	"github.com/gpuwatch/gpuwatch/rules"
)

// Fleet is the fleet overview: how busy the GPUs are per node and team, power
// and temperature, a health table and allocated against used GPUs.
func Fleet() (dashboard.Dashboard, error) {
	allocated := fmt.Sprintf("group by (hostname, UUID, GPU_I_ID) (%s)", holders())
	busy := fmt.Sprintf("(%s > 5)", sel(c.GPUUtil, hw))
	clock := sel(c.ClockEvents, hw)
	return numbered(newDashboard("gpuwatch-fleet", "gpuwatch / Fleet overview",
		"Utilization, memory, power, temperature and health of every GPU, by node and team.", false).
		WithRow(row("Fleet")).
		WithPanel(singleStat("GPUs", "GPUs publishing telemetry.", "short",
			query(fmt.Sprintf("count(%s)", sel(c.GPUTemp, hw)), "{{hostname}}"))).
		WithPanel(singleStat("GPUs down", fmt.Sprintf("GPUs the driver reports lost (%s == 0).", c.GPUUp.Name), "short",
			query(fmt.Sprintf("count(%s == 0) or vector(0)", sel(c.GPUUp, hw)), "{{hostname}}"))).
		WithPanel(singleStat("Allocated GPUs", fmt.Sprintf("GPUs held by a job (%s).", c.AllocationInfo.Name), "short",
			query(fmt.Sprintf("count(%s) or vector(0)", allocated), "{{hostname}}"))).
		WithPanel(singleStat("Mean utilization", "Mean GPU utilization over the selected GPUs.", "percent",
			query(fmt.Sprintf("avg(%s)", sel(c.GPUUtil, hw)), "{{hostname}}"))).
		WithPanel(singleStat("Power", "Total power draw of the selected GPUs.", "watt",
			query(fmt.Sprintf("sum(%s)", sel(c.PowerUsage, hw)), "{{hostname}}"))).
		WithPanel(singleStat("Energy in range", "Energy used by the selected GPUs over the dashboard's time range.", "kwatth",
			query(fmt.Sprintf("sum(increase(%s[$__range])) / 3.6e9", sel(c.TotalEnergy, hw)), "{{hostname}}"))).
		WithRow(row("Utilization and memory")).
		WithPanel(timeSeries("GPU utilization by node", "Mean GPU utilization of each node's GPUs.", "percent", 12,
			query(fmt.Sprintf("avg by (hostname) (%s)", sel(c.GPUUtil, hw)), "{{hostname}}"))).
		WithPanel(timeSeries("GPU utilization by team", "Mean utilization of the GPUs each team holds, per node.", "percent", 12,
			query(fmt.Sprintf("avg by (hostname, team) (%s)", perHolder(sel(c.GPUUtil, hw))), "{{hostname}} {{team}}"))).
		WithPanel(timeSeries("Framebuffer used by node", "GPU memory in use on each node.", "mbytes", 12,
			query(fmt.Sprintf("sum by (hostname) (%s)", sel(c.FBUsed, hw)), "{{hostname}}"))).
		WithPanel(timeSeries("Framebuffer used by team", "GPU memory in use on the GPUs each team holds, per node.", "mbytes", 12,
			query(fmt.Sprintf("sum by (hostname, team) (%s)", perHolder(sel(c.FBUsed, hw))), "{{hostname}} {{team}}"))).
		WithRow(row("Power and temperature")).
		WithPanel(timeSeries("Power by node", "Power draw of each node's GPUs, with their summed limit.", "watt", 8,
			query(fmt.Sprintf("sum by (hostname) (%s)", sel(c.PowerUsage, hw)), "{{hostname}} draw"),
			query(fmt.Sprintf("sum by (hostname) (%s)", sel(c.PowerLimit, hw)), "{{hostname}} limit"))).
		WithPanel(timeSeries("Energy rate by node", "Power derived from the energy counter (mJ/s ÷ 1000).", "watt", 8,
			query(fmt.Sprintf("sum by (hostname) (rate(%s[$__rate_interval])) / 1000", sel(c.TotalEnergy, hw)), "{{hostname}}"))).
		WithPanel(timeSeries("Hottest GPU by node", "Highest GPU and memory temperature on each node.", "celsius", 8,
			query(fmt.Sprintf("max by (hostname) (%s)", sel(c.GPUTemp, hw)), "{{hostname}} GPU"),
			query(fmt.Sprintf("max by (hostname) (%s)", sel(c.MemoryTemp, hw)), "{{hostname}} memory"))).
		WithRow(row("Health")).
		WithPanel(tableOf("GPU health", "One row per GPU: up, throttling bits, XIDs and ECC/row-remap state (non-zero is bad, except Up).", 24,
			[]string{"Up", "Thermal throttling", "Power throttling", "XIDs in range", "ECC DBE (volatile)", "Row remap failure", "Row remap pending"},
			instant(fmt.Sprintf("max by (hostname, gpu) (%s) or max by (hostname, gpu) (%s * 0 + 1)", sel(c.GPUUp, hw), sel(c.GPUTemp, hw))),
			instant(fmt.Sprintf("max by (hostname, gpu) (%s + %s > bool 0)", rules.ClockBit(clock, "sw_thermal_slowdown"), rules.ClockBit(clock, "hw_thermal_slowdown"))),
			instant(fmt.Sprintf("max by (hostname, gpu) (%s + %s > bool 0)", rules.ClockBit(clock, "sw_power_cap"), rules.ClockBit(clock, "hw_power_brake_slowdown"))),
			instant(orZero(fmt.Sprintf("sum by (hostname, gpu) (increase(%s[$__range]))", sel(c.XIDErrors, hw)))),
			instant(orZero(fmt.Sprintf("max by (hostname, gpu) (%s)", sel(c.ECCDBEVol, hw)))),
			instant(orZero(fmt.Sprintf("max by (hostname, gpu) (%s)", sel(c.RemapFailure, hw)))),
			instant(orZero(fmt.Sprintf("max by (hostname, gpu) (%s)", sel(c.RemapPending, hw)))))).
		WithRow(row("Allocation")).
		WithPanel(timeSeries("Allocated versus used GPUs", "GPUs held by a job, and those of them busier than 5%.", "short", 12,
			query(fmt.Sprintf("count by (hostname) (%s)", allocated), "{{hostname}} allocated"),
			query(fmt.Sprintf("count by (hostname) (%s and on (hostname, UUID, GPU_I_ID) %s)", allocated, busy), "{{hostname}} in use"))).
		WithPanel(timeSeries("Allocated GPUs by team", "GPUs each team holds, per node.", "short", 12,
			query(fmt.Sprintf("count by (hostname, team) (%s)", holders()), "{{hostname}} {{team}}"))).
		Build())
}
