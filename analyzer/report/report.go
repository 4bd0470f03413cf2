// Package report builds gpuwatch's waste reports from the store: the
// weekly report per team, the administrators' fleet report and the daily
// digest. It renders them as HTML email with inline PNG charts, plain text
// and JSON, and schedules their delivery through an outbox so that each
// team gets each week's report exactly once, across restarts.
package report

import (
	"os"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/detect"
	"github.com/gpuwatch/gpuwatch/schema"
)

// FileMode is the mode of a report written to a file: reports name users,
// jobs and costs, so they are readable by their owner and group only.
const FileMode os.FileMode = 0o640

// DirMode is the mode of a folder created to hold reports.
const DirMode os.FileMode = 0o750

// Report is one report's numbers; renderers only format them.
type Report struct {
	// Team is empty for the fleet (administrators') report.
	Team        string    `json:"team,omitempty"`
	Period      Period    `json:"period"`
	TimeZone    string    `json:"timezone"`
	GeneratedAt time.Time `json:"generated_at"`
	Currency    string    `json:"currency,omitempty"`
	Priced      bool      `json:"priced"`
	Totals      Totals    `json:"totals"`
	// FleetShare is the team's part of the fleet's allocated GPU-hours,
	// FleetWasteShare its part of the fleet's wasted GPU-hours.
	FleetShare      float64      `json:"fleet_share"`
	FleetWasteShare float64      `json:"fleet_waste_share"`
	ByPattern       []PatternRow `json:"by_pattern"`
	Daily           []DayRow     `json:"daily"`
	// Trend holds the previous periods, oldest first, then this one.
	Trend    []TrendRow  `json:"trend"`
	TopJobs  []JobRow    `json:"top_jobs"`
	TopUsers []UserRow   `json:"top_users"`
	Advice   []AdviceRow `json:"advice"`
	// Shared lists the holders of shared GPUs (time-slicing, MPS, a HAMi
	// share) in the period, most wasted first: each one's share of the
	// GPUs it held and what it made of that share.
	Shared []SharedRow `json:"shared,omitempty"`
	// Teams and Actions fill the administrators' report only.
	Teams       []TeamRow     `json:"teams,omitempty"`
	Actions     []ActionEntry `json:"actions,omitempty"`
	ActionsNote string        `json:"actions_note,omitempty"`
	Link        string        `json:"link,omitempty"`
	// FleetHealth ranks the nodes whose GPUs slowed or failed jobs
	// (administrators' report only; see health.go).
	FleetHealth []HealthRow `json:"fleet_health,omitempty"`
	// Planner is the capacity planner's headline (when one is configured).
	Planner *PlannerSection `json:"planner,omitempty"`
}

// Totals are GPU-hours over the period, as the accounting package defines
// them: ActiveGPUHours is its used, Idle is allocated minus used, and
// over-limit and orphaned GPU-hours are totals of their own.
type Totals struct {
	AllocatedGPUHours float64 `json:"allocated_gpu_hours"`
	ActiveGPUHours    float64 `json:"active_gpu_hours"`
	IdleGPUHours      float64 `json:"idle_gpu_hours"`
	WastedGPUHours    float64 `json:"wasted_gpu_hours"`
	OverLimitGPUHours float64 `json:"over_limit_gpu_hours"`
	// DegradedGPUHours: slowed by throttled or faulty GPUs (accounting's
	// Degraded), never waste.
	DegradedGPUHours float64 `json:"degraded_gpu_hours"`
	OrphanGPUHours   float64 `json:"orphan_gpu_hours"`
	// WastedShare = Wasted / Allocated.
	WastedShare float64 `json:"wasted_share"`
	Cost        float64 `json:"cost"`
	WastedCost  float64 `json:"wasted_cost"`
	Jobs        int     `json:"jobs"`
	Users       int     `json:"users"`
}

// PatternRow is the waste of one pattern.
type PatternRow struct {
	Pattern        schema.Pattern `json:"pattern"`
	Label          string         `json:"label"`
	WastedGPUHours float64        `json:"wasted_gpu_hours"`
	Share          float64        `json:"share"` // of the report's wasted GPU-hours
	WastedCost     float64        `json:"wasted_cost"`
	Findings       int            `json:"findings"`
}

// DayRow is one calendar day.
type DayRow struct {
	Date              string  `json:"date"`
	AllocatedGPUHours float64 `json:"allocated_gpu_hours"`
	ActiveGPUHours    float64 `json:"active_gpu_hours"`
	WastedGPUHours    float64 `json:"wasted_gpu_hours"`
}

// TrendRow is one period of the trend.
type TrendRow struct {
	Label             string  `json:"label"`
	AllocatedGPUHours float64 `json:"allocated_gpu_hours"`
	ActiveGPUHours    float64 `json:"active_gpu_hours"`
	WastedGPUHours    float64 `json:"wasted_gpu_hours"`
	WastedShare       float64 `json:"wasted_share"`
}

// JobRow is one job's waste.
type JobRow struct {
	Job            string           `json:"job"`
	JobName        string           `json:"job_name,omitempty"`
	User           string           `json:"user"`
	Team           string           `json:"team,omitempty"`
	Hostname       string           `json:"hostname"`
	Model          string           `json:"model,omitempty"`
	GPUs           int              `json:"gpus"`
	Patterns       []schema.Pattern `json:"patterns"`
	WastedGPUHours float64          `json:"wasted_gpu_hours"`
	WastedCost     float64          `json:"wasted_cost"`
	Link           string           `json:"link,omitempty"`
}

// UserRow is one user's use and waste.
type UserRow struct {
	User              string  `json:"user"`
	Team              string  `json:"team,omitempty"`
	AllocatedGPUHours float64 `json:"allocated_gpu_hours"`
	ActiveGPUHours    float64 `json:"active_gpu_hours"`
	WastedGPUHours    float64 `json:"wasted_gpu_hours"`
	WastedCost        float64 `json:"wasted_cost"`
	Link              string  `json:"link,omitempty"`
}

// SharedRow is one holder of a shared GPU over the period, as the
// accounting books it: its hours are its share of the device's, never the
// whole device's, judged on its own use where the exporter reads it.
type SharedRow struct {
	Job      string `json:"job"`
	User     string `json:"user"`
	Team     string `json:"team,omitempty"`
	Hostname string `json:"hostname"`
	// Share is the part of its GPUs' time it held (0.25 as one of four
	// holders of a time-sliced GPU).
	Share             float64 `json:"share"`
	AllocatedGPUHours float64 `json:"allocated_gpu_hours"`
	ActiveGPUHours    float64 `json:"active_gpu_hours"`
	WastedGPUHours    float64 `json:"wasted_gpu_hours"`
	Link              string  `json:"link,omitempty"`
}

// AdviceRow is what to change for one finding.
type AdviceRow struct {
	Job            string         `json:"job"`
	User           string         `json:"user"`
	Hostname       string         `json:"hostname"`
	Pattern        schema.Pattern `json:"pattern"`
	WastedGPUHours float64        `json:"wasted_gpu_hours"`
	Advice         string         `json:"advice"`
	Link           string         `json:"link,omitempty"`
}

// TeamRow is one team in the administrators' report.
type TeamRow struct {
	Team              string         `json:"team"`
	AllocatedGPUHours float64        `json:"allocated_gpu_hours"`
	ActiveGPUHours    float64        `json:"active_gpu_hours"`
	WastedGPUHours    float64        `json:"wasted_gpu_hours"`
	WastedShare       float64        `json:"wasted_share"`
	FleetShare        float64        `json:"fleet_share"`
	Cost              float64        `json:"cost"`
	WastedCost        float64        `json:"wasted_cost"`
	TopPattern        schema.Pattern `json:"top_pattern,omitempty"`
	Link              string         `json:"link,omitempty"`
}

// PatternLabel is a pattern's name for people.
func PatternLabel(p schema.Pattern) string { return detect.Title(p) }
