package rules

import (
	"fmt"

	c "github.com/gpuwatch/gpuwatch/schema"
)

// XID codes by alert, after NVIDIA's XID catalogue
// (docs.nvidia.com/deploy/xid-errors): hardware, firmware or memory faults
// that need the GPU drained, and application faults that fail one job.
var (
	XIDCritical    = []string{"48", "61", "62", "64", "74", "79", "92", "94", "95", "119", "120", "140", "154"}
	XIDApplication = []string{"13", "31", "43", "45"}
)

const runbookBase = "https://github.com/gpuwatch/gpuwatch/blob/main/docs/runbooks/"

// alert builds an alerting rule with its runbook link.
func alert(name, expr, forDur, severity, summary, description string) Rule {
	return Rule{Alert: name, Expr: expr, For: forDur,
		Labels: map[string]string{c.LabelSeverity: severity},
		Annotations: map[string]string{"summary": summary, "description": description,
			"runbook_url": runbookBase + name + ".md"}}
}

// nodeText names the node in an annotation: hostname, or Hostname on
// dcgm-exporter 3.x's data.
const nodeText = "{{ or $labels.hostname $labels.Hostname }}"

// onGPUText ends a GPU alert's summary: which node, GPU and device.
const onGPUText = "on " + nodeText + " GPU {{ $labels.gpu }} ({{ $labels.UUID }})"

// alertGroups are the alerting rules, in the order they are written.
func alertGroups() []Group {
	return []Group{throttlingAlerts(), xidAlerts(), memoryAlerts(), healthAlerts(), exporterAlerts()}
}

// throttlingAlerts are the gpuwatch-throttling.alerts group.
func throttlingAlerts() Group {
	return Group{Name: "gpuwatch-throttling.alerts", Rules: []Rule{
		alert("GPUThermalThrottling", teamed(anyOf(
			bitSet(c.ReasonSWThermalSlowdown),
			bitSet(c.ReasonHWThermalSlowdown),
			fmt.Sprintf("(rate(%s[5m]) > 0.05 * 1e9)", c.ThermViolation.Name))),
			"5m", string(c.SeverityWarning),
			"GPU thermal throttling "+onGPUText,
			"The GPU has lowered its clocks for temperature (software or hardware thermal slowdown bit of the clock-event reasons, or thermal violation time above 5% of the last 5 minutes) for 5 minutes. Jobs on it run slower."),
		alert("GPUPowerThrottling", teamed(anyOf(
			bitSet(c.ReasonSWPowerCap),
			bitSet(c.ReasonHWPowerBrakeSlowdown),
			fmt.Sprintf("(rate(%s[5m]) > 0.25 * 1e9)", c.PowerViolation.Name))),
			"15m", string(c.SeverityWarning),
			"GPU power throttling "+onGPUText,
			"The GPU has been held at its power limit (software power cap or hardware power brake bit, or power violation time above 25%) for 15 minutes. Check the power limit and the cooling; lower the limit deliberately or spread the load."),
		alert("GPUHardwareSlowdown", teamed(anyOf(
			bitSet(c.ReasonHWSlowdown),
			bitSet(c.ReasonHWThermalSlowdown),
			bitSet(c.ReasonHWPowerBrakeSlowdown))),
			"5m", string(c.SeverityCritical),
			"GPU hardware slowdown "+onGPUText,
			"A hardware slowdown bit (HW slowdown, HW thermal slowdown or HW power brake) of the clock-event reasons has been set for 5 minutes: the board protects itself, clocks are cut by half or more. Check cooling and power supply."),
	}}
}

// xidAlerts are the gpuwatch-xid.alerts group.
func xidAlerts() Group {
	xidAll := append(append([]string{}, XIDCritical...), XIDApplication...)
	return Group{Name: "gpuwatch-xid.alerts", Rules: []Rule{
		alert("GPUXidCritical", teamed(xidSeen(xidMatcher("=~", XIDCritical))), "", string(c.SeverityCritical),
			"Critical XID {{ $labels.xid }} "+onGPUText,
			"The driver reported XID {{ $labels.xid }} in the last 10 minutes. NVIDIA's catalogue lists it as a hardware, firmware or memory fault that usually needs the GPU drained and reset."),
		alert("GPUXidApplicationError", teamed(xidSeen(xidMatcher("=~", XIDApplication))), "", string(c.SeverityWarning),
			"Application XID {{ $labels.xid }} "+onGPUText,
			"The driver reported XID {{ $labels.xid }} in the last 10 minutes: an application fault (graphics engine exception, MMU fault, reset channel or preemptive cleanup). The job that hit it most likely failed; the GPU is usually fine."),
		alert("GPUXidError", teamed(xidSeen(xidMatcher("!~", xidAll))), "", string(c.SeverityWarning),
			"XID {{ $labels.xid }} "+onGPUText,
			"The driver reported XID {{ $labels.xid }} in the last 10 minutes, which gpuwatch does not classify as critical or as an application error. Look it up in NVIDIA's XID catalogue."),
	}}
}

// memoryAlerts are the gpuwatch-memory.alerts group.
func memoryAlerts() Group {
	return Group{Name: "gpuwatch-memory.alerts", Rules: []Rule{
		alert("GPUECCDoubleBitErrors", teamed(anyOf(
			increased(c.ECCDBEVol.Name, "10m", 0),
			increased(c.ECCDBEAgg.Name, "10m", 0))),
			"", string(c.SeverityCritical),
			"Uncorrectable ECC errors "+onGPUText,
			"The GPU counted double-bit (uncorrectable) ECC errors in the last 10 minutes. Data in flight may be corrupt; the job on it should be considered failed."),
		alert("GPURowRemapFailure", teamed(c.RemapFailure.Name+" == 1"), "", string(c.SeverityCritical),
			"Row remapping failed "+onGPUText,
			"The GPU could not remap a faulty memory row: it has no spare rows left. Take it out of service and open an RMA."),
		alert("GPURowRemapPending", teamed(c.RemapPending.Name+" == 1"), "5m", string(c.SeverityWarning),
			"Row remap pending a GPU reset "+onGPUText,
			"A memory row remap is waiting for the next GPU reset. Drain the GPU and reset it when the running job ends."),
	}}
}

// healthAlerts are the gpuwatch-health.alerts group.
func healthAlerts() Group {
	return Group{Name: "gpuwatch-health.alerts", Rules: []Rule{
		alert("GPUDown", c.GPUUp.Name+" == 0", "1m", string(c.SeverityCritical),
			"GPU lost "+onGPUText,
			"The GPU did not answer the exporter for a minute (lost, or fell off the bus). Jobs on it have failed; the node needs a GPU reset or a reboot."),
		alert("GPUMissing", fmt.Sprintf(`(
  group by (instance, job, %s, %s, %s, %s, %s) (%s)
    unless on (instance, %s) %s
    unless on (instance, %s) (%s == 0)
)
and on (instance) (up == 1)`,
			c.LabelHostname, c.LabelOldHost, c.LabelGPU, c.LabelUUID, c.LabelModelName, lastOver(c.GPUTemp, "1h"),
			c.LabelUUID, c.GPUTemp.Name, c.LabelUUID, c.GPUUp.Name),
			"5m", string(c.SeverityCritical),
			"GPU missing from "+nodeText+" GPU {{ $labels.gpu }} ({{ $labels.UUID }})",
			"The GPU published series within the last hour but none now, while its exporter is up. The driver no longer lists it (fell off the bus, disabled, or the node booted without it)."),
		alert("GPUHighTemperature", teamed(c.GPUTemp.Name+" > 85"), "5m", string(c.SeverityWarning),
			"GPU temperature {{ $value | humanize }}C "+onGPUText,
			"The GPU has been above 85C for 5 minutes; it will start thermal slowdown soon. Check the airflow and fans of "+nodeText+"."),
		alert("GPUMemoryHighTemperature", teamed(c.MemoryTemp.Name+" > 95"), "5m", string(c.SeverityWarning),
			"GPU memory temperature {{ $value | humanize }}C "+onGPUText,
			"The GPU's memory (HBM) has been above 95C for 5 minutes; it will slow down memory clocks soon."),
		alert("GPUNVLinkErrors", teamed(anyOf(
			increased(c.NVLinkReplay.Name, "10m", 0),
			increased(c.NVLinkRecovery.Name, "10m", 0),
			increased(c.NVLinkCRCData.Name, "10m", 100))),
			"5m", string(c.SeverityWarning),
			"NVLink errors "+onGPUText,
			"NVLink replay or recovery errors (or many CRC errors) keep appearing: a link is degrading, multi-GPU jobs slow down or fail."),
		alert("GPUPCIeReplayErrors", teamed(fmt.Sprintf("increase(%s[10m]) > 10", c.PCIeReplay.Name)), "5m", string(c.SeverityWarning),
			"PCIe replays "+onGPUText,
			"The GPU retried more than 10 PCIe transfers in 10 minutes: the slot, riser or cable is marginal."),
	}}
}

// exporterAlerts are the gpuwatch-exporter.alerts group.
func exporterAlerts() Group {
	return Group{Name: "gpuwatch-exporter.alerts", Rules: []Rule{
		withComment(alert("GPUExporterDown", fmt.Sprintf(`(
  up == 0
  and on (job, instance)
  group by (job, instance) (
    %s
    or %s
  )
)
or (
  group by (job, instance, %s, %s) (%s)
    unless on (%s, %s) %s
    unless on (job, instance) up
)`, lastOver(c.LastCollect, "1d"), lastOver(c.GPUTemp, "1h"),
			c.LabelHostname, c.LabelOldHost, lastOver(c.GPUTemp, "1h"),
			c.LabelHostname, c.LabelOldHost, c.GPUTemp.Name),
			"2m", string(c.SeverityCritical),
			"GPU exporter down on {{ $labels.instance }}",
			"Prometheus could not scrape the GPU exporter at {{ $labels.instance }} (job {{ $labels.job }}) for 2 minutes, or its target vanished while no other target serves that node's GPUs. No GPU alert can fire for that node until it is back."),
			"A target is a GPU exporter when it published the exporter's heartbeat\n"+
				"(or, for a stock dcgm-exporter, a GPU temperature) recently, whatever\n"+
				"its scrape job is called. The second branch catches a target that\n"+
				"vanished from service discovery (its node is gone) while no other\n"+
				"target serves that node's GPUs."),
		alert("GPUExporterStale", fmt.Sprintf("time() - %s > 60", c.LastCollect.Name), "2m", string(c.SeverityWarning),
			"GPU exporter on {{ $labels.instance }} serves stale data",
			"The exporter at {{ $labels.instance }} answers scrapes but its last successful collection is {{ $value | humanizeDuration }} old: the driver hangs or every read fails."),
		alert("GPUAnalyzerDown", fmt.Sprintf(`(
  up == 0
  and on (job, instance)
  group by (job, instance) (
    %s
    or %s
  )
)
or (time() - %s > 1800)
or (time() - %s > 1800)`, lastOver(c.AnalyzerLastCycle, "1d"), lastOver(c.AnalyzerLastEscalation, "1d"),
			c.AnalyzerLastCycle.Name, c.AnalyzerLastEscalation.Name),
			"5m", string(c.SeverityWarning),
			"gpuwatch analyzer down on {{ $labels.instance }}",
			"The analyzer is not scraped or has not finished a detection or escalation cycle for 30 minutes: waste findings, reclamation and reports are on hold."),
	}}
}

func withComment(r Rule, comment string) Rule {
	r.Comment = comment
	return r
}
