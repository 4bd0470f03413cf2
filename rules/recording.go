package rules

import (
	"fmt"
	"time"

	"github.com/prometheus/common/model"

	c "github.com/gpuwatch/gpuwatch/schema"
)

// PoolingInterval is the evaluation interval of the pooling rules: a sum of
// their samples over a range times this interval is GPU-time.
const PoolingInterval = 30 * time.Second

// BusyUtil is the GPU utilization (%) above which a held GPU counts as used
// in the pooling rules and the dashboards.
const BusyUtil = 5

// Recording rules, each with its consumer. Names follow level:metric:operations
// (https://prometheus.io/docs/practices/rules/); the level says which labels
// survive the aggregation.
var (
	// teamRule labels alerts with the team holding the GPU: one team per GPU
	// (topk keeps a single holder of a shared GPU), so the join in teamed
	// stays one-to-one. Consumer: the GPU alerts.
	teamRule = Rule{Record: "hostname_UUID:gpuwatch_allocation_team:topk1"}
	// AllocatedGPUs, UsedGPUs and IdleGPUs are the team pooling figures by
	// team and GPU model: GPUs held, held and busier than BusyUtil, held and
	// at 0% for 10 minutes. Consumer: the team dashboard's pooling and cost
	// panels.
	AllocatedGPUs = Rule{Record: "team_modelName:gpuwatch_allocated_gpus:count"}
	UsedGPUs      = Rule{Record: "team_modelName:gpuwatch_used_gpus:count"}
	IdleGPUs      = Rule{Record: "team_modelName:gpuwatch_idle_gpus:count"}
)

// recordingGroups are the recording rules with their expressions, which read
// metric names from the catalogue when called.
func recordingGroups() []Group {
	team := teamRule
	team.Expr = fmt.Sprintf(`max by (%s, %s, %s) (topk by (%s, %s) (1, %s{%s!=""}))`,
		c.LabelHostname, c.LabelUUID, c.LabelTeam, c.LabelHostname, c.LabelUUID, c.AllocationInfo.Name, c.LabelTeam)
	team.Comment = "One team per GPU, for labelling alerts: topk keeps a single holder of a\nshared GPU, so the alert join stays one-to-one."

	// held is one series per (team, GPU or MIG instance): a GPU shared by two
	// jobs of one team counts once for that team. The model comes from the
	// device's temperature series (the allocation series does not carry it);
	// a held GPU without one still counts, with no model.
	holders := fmt.Sprintf("group by (%s, %s, %s, %s) (%s)",
		c.LabelTeam, c.LabelHostname, c.LabelUUID, c.LabelGIID, c.AllocationInfo.Name)
	held := fmt.Sprintf("(\n    %s\n      * on (%s, %s) group_left (%s) group by (%s, %s, %s) (%s)\n    or on (%s, %s, %s, %s) %s\n  )",
		holders, c.LabelHostname, c.LabelUUID, c.LabelModelName, c.LabelHostname, c.LabelUUID, c.LabelModelName, c.GPUTemp.Name,
		c.LabelTeam, c.LabelHostname, c.LabelUUID, c.LabelGIID, holders)
	onDevice := fmt.Sprintf("on (%s, %s, %s)", c.LabelHostname, c.LabelUUID, c.LabelGIID)
	byTeam := fmt.Sprintf("count by (%s, %s)", c.LabelTeam, c.LabelModelName)
	alloc, used, idle := AllocatedGPUs, UsedGPUs, IdleGPUs
	alloc.Expr = fmt.Sprintf("%s (\n  %s\n)", byTeam, held)
	used.Expr = fmt.Sprintf("%s (\n  %s\n    and %s\n  (%s > %d)\n)", byTeam, held, onDevice, c.GPUUtil.Name, BusyUtil)
	idle.Expr = fmt.Sprintf("%s (\n  %s\n    and %s\n  (max_over_time(%s[10m]) == 0)\n)", byTeam, held, onDevice, c.GPUUtil.Name)
	alloc.Comment = "Allocation metadata (team, job, user) lives only on " + c.AllocationInfo.Name + ",\n" +
		"so per-team figures join the GPU series to it."
	return []Group{
		{Name: "gpuwatch-alerts.rules", Interval: "30s", Rules: []Rule{team}},
		{Name: "gpuwatch-pooling.rules", Interval: model.Duration(PoolingInterval).String(), Rules: []Rule{alloc, used, idle}},
		plannerGroup(),
	}
}
