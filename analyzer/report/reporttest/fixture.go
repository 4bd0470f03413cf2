// Package reporttest fills a store with a deterministic, seeded fleet's
// usage intervals and findings, as the analyzer would have written them,
// for report tests, benchmarks and the docs example.
package reporttest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Fleet describes the fleet to simulate.
type Fleet struct {
	Seed     uint64
	GPUs     int // rounded up to whole 8-GPU hosts
	Teams    []string
	Start    time.Time     // first interval; jobs end by End
	End      time.Time     // exclusive
	Interval time.Duration // the analyzer's interval (default 1h)
	// Keep returns the written rows (tests compare reports with them).
	Keep bool
}

// Written is what Fill stored, when Keep is set.
type Written struct {
	Usage    []store.Usage
	Findings []finding.Finding
	Cycles   []time.Time // cycle of each finding
}

// Models cycles through these GPU models per host.
var Models = []string{"NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB", "NVIDIA L40S"}

// Teams returns n team names team-001, team-002, ...
func Teams(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("team-%03d", i+1)
	}
	return out
}

type profile struct {
	pattern schema.Pattern // "" is a healthy job
	weight  int
}

var profiles = []profile{{"", 58}, {schema.CPUOnly, 7}, {schema.LowUtilization, 11}, {schema.OverRequested, 6},
	{schema.StartupOverhead, 6}, {schema.Stuck, 4}, {schema.IdleSession, 5}, {schema.Overlong, 3}}

// Fill writes the fleet's usage and findings into st.
func Fill(ctx context.Context, st *store.Store, f Fleet) (*Written, error) {
	if f.Interval == 0 {
		f.Interval = time.Hour
	}
	if len(f.Teams) == 0 {
		return nil, fmt.Errorf("fill: no teams")
	}
	rng := rand.New(rand.NewPCG(f.Seed, f.Seed^0x9e3779b97f4a7c15))
	users := teamUsers(rng, f.Teams)
	w := &Written{}
	var batch []store.Usage
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := st.AddUsage(ctx, batch); err != nil {
			return err
		}
		if f.Keep {
			w.Usage = append(w.Usage, batch...)
		}
		batch = batch[:0]
		return nil
	}
	var findings []finding.Finding
	var cycles []time.Time
	jobID := 100000
	slots := makeSlots(rng, (f.GPUs+7)/8)
	steps := int(f.End.Sub(f.Start) / f.Interval)
	// Rows go in time order, one analyzer cycle after the other, as the
	// analyzer writes them (and as SQLite then lays them out).
	for step := 0; step < steps; step++ {
		s := f.Start.Add(time.Duration(step) * f.Interval)
		for _, sl := range slots {
			if sl.left == 0 {
				if sl.idle > 0 {
					sl.idle--
					continue
				}
				jobID++
				sl.startJob(rng, jobID, steps-step, f.Teams, users)
			}
			batch = append(batch, sl.run(rng, s, f.Interval))
			if sl.left == 0 {
				if sl.prof != "" && sl.wasted > 0 {
					findings = append(findings, sl.finding(rng))
					cycles = append(cycles, sl.we.Add(-time.Minute))
				}
				sl.idle = rng.IntN(4)
			}
		}
		if len(batch) >= 20000 {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if err := saveCycles(ctx, st, findings, cycles); err != nil {
		return nil, err
	}
	if f.Keep {
		w.Findings, w.Cycles = findings, cycles
	}
	return w, nil
}

// teamUsers gives each team 2 to 6 users.
func teamUsers(rng *rand.Rand, teams []string) map[string][]string {
	users := map[string][]string{}
	for i, t := range teams {
		n := 2 + rng.IntN(5)
		for k := 0; k < n; k++ {
			users[t] = append(users[t], fmt.Sprintf("u%03d%c", i+1, 'a'+k))
		}
	}
	return users
}

// A slot is one group of GPUs that is allocated together; each runs jobs
// back to back with short gaps.
type slot struct {
	host, model string
	gpus        []string
	idle        int // steps until the next job starts
	// the running job
	left, length, at int
	job, user, team  string
	kind             string
	prof             schema.Pattern
	wasted           float64
	ws, we           time.Time
}

// makeSlots splits each of the hosts' 8 GPUs into slots by one of a few
// usual splits.
func makeSlots(rng *rand.Rand, hosts int) []*slot {
	splits := [][]int{{8}, {4, 4}, {4, 2, 1, 1}, {2, 2, 2, 2}, {1, 1, 1, 1, 2, 2}}
	var slots []*slot
	for h := 0; h < hosts; h++ {
		gpuIdx := 0
		for _, size := range splits[rng.IntN(len(splits))] {
			sl := &slot{host: fmt.Sprintf("gpu-n%04d", h+1), model: Models[h%len(Models)], idle: rng.IntN(6)}
			for i := 0; i < size; i++ {
				sl.gpus = append(sl.gpus, fmt.Sprintf("GPU-%04d-%d", h+1, gpuIdx))
				gpuIdx++
			}
			slots = append(slots, sl)
		}
	}
	return slots
}

// startJob starts job jobID in the slot, at most stepsLeft steps long, for
// a random user and profile.
func (sl *slot) startJob(rng *rand.Rand, jobID, stepsLeft int, teams []string, users map[string][]string) {
	length := 4 + rng.IntN(57)
	if length > stepsLeft {
		length = stepsLeft
	}
	sl.job, sl.left, sl.length, sl.at = fmt.Sprint(jobID), length, length, 0
	sl.team = teams[rng.IntN(len(teams))]
	sl.user = users[sl.team][rng.IntN(len(users[sl.team]))]
	sl.prof = pick(rng)
	if sl.prof == schema.OverRequested && len(sl.gpus) < 2 {
		sl.prof = schema.LowUtilization
	}
	sl.kind = schema.KindBatch
	if sl.prof == schema.IdleSession {
		sl.kind = schema.KindInteractive
	}
	sl.wasted, sl.ws, sl.we = 0, time.Time{}, time.Time{}
}

// run runs the slot's job for the interval starting at s and returns its
// usage row, tracking the job's wasted time.
func (sl *slot) run(rng *rand.Rand, s time.Time, interval time.Duration) store.Usage {
	size := len(sl.gpus)
	hours := interval.Hours() * float64(size)
	active, waste := activity(rng, sl.prof, sl.at, sl.length)
	if waste > 0 {
		if sl.ws.IsZero() {
			sl.ws = s
		}
		sl.we = s.Add(interval)
	}
	sl.wasted += hours * waste
	u := store.Usage{Start: s, End: s.Add(interval), Hostname: sl.host, Job: sl.job, User: sl.user, Team: sl.team,
		Kind: sl.kind, Model: sl.model, GPUs: size, AllocatedGPUHours: hours, ActiveGPUHours: hours * active}
	sl.at++
	sl.left--
	return u
}

// finding is the finding of the slot's job, which has just ended.
func (sl *slot) finding(rng *rand.Rand) finding.Finding {
	id, _ := strconv.Atoi(sl.job)
	return finding.Finding{Pattern: sl.prof, Severity: schema.SeverityWarning, Job: sl.job, User: sl.user,
		Team: sl.team, Kind: sl.kind, Hostname: sl.host, Scheduler: schema.SchedulerSlurm, Account: sl.team,
		JobName: fmt.Sprintf("train-%s-%d", sl.user, id%97), ModelName: sl.model, GPUs: sl.gpus,
		Start: sl.ws, End: sl.we, WastedGPUHours: sl.wasted, Evidence: evidence(rng, sl.prof, len(sl.gpus), sl.length),
		Action: schema.ActionNotify}
}

// saveCycles saves the findings one analyzer cycle per distinct time, as
// the analyzer would save them.
func saveCycles(ctx context.Context, st *store.Store, findings []finding.Finding, cycles []time.Time) error {
	for i := 0; i < len(findings); {
		j := i
		for j < len(findings) && cycles[j].Equal(cycles[i]) {
			j++
		}
		if err := st.SaveFindings(ctx, cycles[i], findings[i:j]); err != nil {
			return err
		}
		i = j
	}
	return nil
}

func pick(rng *rand.Rand) schema.Pattern {
	total := 0
	for _, p := range profiles {
		total += p.weight
	}
	n := rng.IntN(total)
	for _, p := range profiles {
		if n < p.weight {
			return p.pattern
		}
		n -= p.weight
	}
	return ""
}

// activity is the active fraction of interval i of n, and the fraction the
// analyzer would call waste.
func activity(rng *rand.Rand, p schema.Pattern, i, n int) (active, waste float64) {
	busy := 0.82 + 0.16*rng.Float64()
	switch p {
	case schema.CPUOnly:
		return 0, 1
	case schema.LowUtilization:
		return busy, 0.55
	case schema.OverRequested:
		return busy / 2, 0.5
	case schema.StartupOverhead:
		if i < 2 {
			return 0, 1
		}
	case schema.Stuck:
		if i >= n*2/3 {
			return 0, 1
		}
	case schema.IdleSession:
		if i >= 1 {
			return 0.02, 0.98
		}
	case schema.Overlong:
		if i >= 48 {
			return busy, 1
		}
	}
	return busy, 0
}

func evidence(rng *rand.Rand, p schema.Pattern, gpus, hours int) map[string]float64 {
	switch p {
	case schema.LowUtilization:
		return map[string]float64{"mean_util_percent": float64(5 + rng.IntN(20)), "fb_max_mib": float64(2000 + rng.IntN(30000))}
	case schema.OverRequested:
		return map[string]float64{"idle_gpus": float64(gpus - gpus/2)}
	case schema.StartupOverhead:
		return map[string]float64{"delay_minutes": 120}
	case schema.Overlong:
		return map[string]float64{"runtime_hours": float64(hours), "max_runtime_hours": 48}
	}
	return map[string]float64{}
}
