package dashboards

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"

	"github.com/gpuwatch/gpuwatch/rules"
	c "github.com/gpuwatch/gpuwatch/schema"
)

// Fleet is the fleet overview: how busy the GPUs are per node and team, power
// and temperature, a health table and allocated against used GPUs.
func Fleet() (dashboard.Dashboard, error) {
	allocated := fmt.Sprintf("group by (hostname, UUID, GPU_I_ID) (%s)", holders())
	busy := fmt.Sprintf("(%s > %d)", gpus(c.GPUUtil), rules.BusyUtil)
	clock := gpus(c.ClockEvents)
	return finish(newDashboard("gpuwatch-fleet", "gpuwatch / Fleet overview",
		"Utilization, memory, power, temperature and health of every GPU, by node and team.", false).
		WithRow(row("Fleet")).
		WithPanel(singleStat("GPUs", "GPUs publishing telemetry.", "short",
			query(fmt.Sprintf("count(%s)", gpus(c.GPUTemp)), "{{hostname}}"))).
		WithPanel(singleStat("GPUs down", fmt.Sprintf("GPUs the driver reports lost (%s == 0).", c.GPUUp.Name), "short",
			query(fmt.Sprintf("count(%s == 0) or vector(0)", gpus(c.GPUUp)), "{{hostname}}"))).
		WithPanel(singleStat("Allocated GPUs", fmt.Sprintf("GPUs held by a job (%s).", c.AllocationInfo.Name), "short",
			query(fmt.Sprintf("count(%s) or vector(0)", allocated), "{{hostname}}"))).
		WithPanel(singleStat("Mean utilization", "Mean GPU utilization over the selected GPUs.", "percent",
			query(fmt.Sprintf("avg(%s)", gpus(c.GPUUtil)), "{{hostname}}"))).
		WithPanel(singleStat("Power", "Total power draw of the selected GPUs.", "watt",
			query(fmt.Sprintf("sum(%s)", gpus(c.PowerUsage)), "{{hostname}}"))).
		WithPanel(singleStat("Energy in range", "Energy used by the selected GPUs over the dashboard's time range.", "kwatth",
			query(fmt.Sprintf("sum(%s) / 3.6e9", gpusFn(c.TotalEnergy, "increase(%s[$__range])")), "{{hostname}}"))).
		WithRow(row("Utilization and memory")).
		WithPanel(timeSeries("GPU utilization by node", "Mean GPU utilization of each node's GPUs.", "percent", 12,
			query(fmt.Sprintf("avg by (hostname) (%s)", gpus(c.GPUUtil)), "{{hostname}}"))).
		WithPanel(timeSeries("GPU utilization by team", "Mean utilization of the GPUs each team holds, per node.", "percent", 12,
			query(fmt.Sprintf("avg by (hostname, team) (%s)", perHolder(gpus(c.GPUUtil))), "{{hostname}} {{team}}"))).
		WithPanel(timeSeries("Framebuffer used by node", "GPU memory in use on each node.", "mbytes", 12,
			query(fmt.Sprintf("sum by (hostname) (%s)", gpus(c.FBUsed)), "{{hostname}}"))).
		WithPanel(timeSeries("Framebuffer used by team", "GPU memory in use on the GPUs each team holds, per node.", "mbytes", 12,
			query(fmt.Sprintf("sum by (hostname, team) (%s)", perHolder(gpus(c.FBUsed))), "{{hostname}} {{team}}"))).
		WithRow(row("Power and temperature")).
		WithPanel(timeSeries("Power by node", "Power draw of each node's GPUs, with their summed limit.", "watt", 8,
			query(fmt.Sprintf("sum by (hostname) (%s)", gpus(c.PowerUsage)), "{{hostname}} draw"),
			query(fmt.Sprintf("sum by (hostname) (%s)", gpus(c.PowerLimit)), "{{hostname}} limit"))).
		WithPanel(timeSeries("Energy rate by node", "Power derived from the energy counter (mJ/s ÷ 1000).", "watt", 8,
			query(fmt.Sprintf("sum by (hostname) (%s) / 1000", gpusFn(c.TotalEnergy, "rate(%s[$__rate_interval])")), "{{hostname}}"))).
		WithPanel(timeSeries("Hottest GPU by node", "Highest GPU and memory temperature on each node.", "celsius", 8,
			query(fmt.Sprintf("max by (hostname) (%s)", gpus(c.GPUTemp)), "{{hostname}} GPU"),
			query(fmt.Sprintf("max by (hostname) (%s)", gpus(c.MemoryTemp)), "{{hostname}} memory"))).
		WithRow(row("Health")).
		WithPanel(tableOf("GPU health", "One row per GPU: up, throttling bits, XIDs and ECC/row-remap state (non-zero is bad, except Up).", 24,
			[]string{"Up", "Thermal throttling", "Power throttling", "XIDs in range", "ECC DBE (volatile)", "Row remap failure", "Row remap pending"},
			instant(fmt.Sprintf("max by (hostname, gpu) (%s) or max by (hostname, gpu) (%s * 0 + 1)", gpus(c.GPUUp), gpus(c.GPUTemp))),
			instant(fmt.Sprintf("max by (hostname, gpu) (%s + %s > bool 0)", rules.ClockBit(clock, c.ReasonSWThermalSlowdown), rules.ClockBit(clock, c.ReasonHWThermalSlowdown))),
			instant(fmt.Sprintf("max by (hostname, gpu) (%s + %s > bool 0)", rules.ClockBit(clock, c.ReasonSWPowerCap), rules.ClockBit(clock, c.ReasonHWPowerBrakeSlowdown))),
			instant(orZero(fmt.Sprintf("sum by (hostname, gpu) (%s)", gpusFn(c.XIDErrors, "increase(%s[$__range])")))),
			instant(orZero(fmt.Sprintf("max by (hostname, gpu) (%s)", gpus(c.ECCDBEVol)))),
			instant(orZero(fmt.Sprintf("max by (hostname, gpu) (%s)", gpus(c.RemapFailure)))),
			instant(orZero(fmt.Sprintf("max by (hostname, gpu) (%s)", gpus(c.RemapPending)))))).
		WithRow(row("Allocation")).
		WithPanel(timeSeries("Allocated versus used GPUs", "GPUs held by a job, and those of them busier than 5%.", "short", 12,
			query(fmt.Sprintf("count by (hostname) (%s)", allocated), "{{hostname}} allocated"),
			query(fmt.Sprintf("count by (hostname) (%s and on (hostname, UUID, GPU_I_ID) %s)", allocated, busy), "{{hostname}} in use"))).
		WithPanel(timeSeries("Allocated GPUs by team", "GPUs each team holds, per node.", "short", 12,
			query(fmt.Sprintf("count by (hostname, team) (%s)", holders()), "{{hostname}} {{team}}"))).
		Build())
}
