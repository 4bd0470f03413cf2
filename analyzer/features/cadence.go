package features

import (
	"math"
	"sort"
	"time"
)

// Memory is what fetches learn from the data and keep for the next: the
// pods taken as exporters and each device's own sample cadence. The engine
// stores it between cycles; a nil Memory learns from one fetch alone.
type Memory struct {
	Exporters Exporters           `json:"exporters,omitempty"`
	Cadence   map[string]*Cadence `json:"cadence,omitempty"`
}

// NewMemory returns an empty memory.
func NewMemory() *Memory {
	return &Memory{Exporters: Exporters{}, Cadence: map[string]*Cadence{}}
}

// Cadence is a device's recent per-step sample counts. Their most common
// value is the count of a full step: the device's own scrape interval,
// learned from its samples, so that a target scraped every 60 s is as
// fully covered at 5 samples a step as one scraped every 15 s at 20.
type Cadence struct {
	Recent   []float64 `json:"r"`
	LastSeen time.Time `json:"t"`
}

// cadenceKeep is how many recent step counts a device's cadence keeps: two
// hours at 5m steps, long enough that an outage or a partial step does not
// set the expectation; a target scraped faster is adopted at once, one
// scraped slower (its count under half the old) once the old counts have
// aged out, unknown meanwhile.
const cadenceKeep = 24

// Prune forgets devices and exporters not seen since cutoff.
func (m *Memory) Prune(cutoff time.Time) {
	if m == nil {
		return
	}
	m.Exporters.Prune(cutoff)
	for k, c := range m.Cadence {
		if c.LastSeen.Before(cutoff) {
			delete(m.Cadence, k)
		}
	}
}

func (m *Memory) ensure() {
	if m.Exporters == nil {
		m.Exporters = Exporters{}
	}
	if m.Cadence == nil {
		m.Cadence = map[string]*Cadence{}
	}
}

// learn sets each device's expected count per step from its counts in
// steps and what the memory held, then records the counts.
func (m *Memory) learn(steps []Step) map[string]float64 {
	counts := map[string][]float64{}
	for _, s := range steps {
		for d, c := range s.DeviceSamples {
			if c > 0 {
				counts[d] = append(counts[d], c)
			}
		}
	}
	exp := make(map[string]float64, len(counts))
	last := steps[len(steps)-1].End
	for d, cs := range counts {
		c := m.Cadence[d]
		if c == nil {
			c = &Cadence{}
			m.Cadence[d] = c
		}
		exp[d] = mode(append(append([]float64(nil), c.Recent...), cs...))
		c.Recent = append(c.Recent, cs...)
		if n := len(c.Recent); n > cadenceKeep {
			c.Recent = append([]float64(nil), c.Recent[n-cadenceKeep:]...)
		}
		c.LastSeen = last
	}
	// Devices of earlier fetches that are silent now keep their cadence:
	// their zero count is then missing data, not a new expectation.
	for d, c := range m.Cadence {
		if _, ok := exp[d]; !ok && len(c.Recent) > 0 {
			exp[d] = mode(c.Recent)
		}
	}
	return exp
}

// ModeCount is the count a full interval of a series holds, from its
// counts over many intervals (zeros left out: they are gaps): the most
// common of those at least half the largest, the larger on a tie.
func ModeCount(cs []float64) float64 { return mode(cs) }

// mode is the count of a full step: the most common of the counts at
// least half the largest (lower ones are partial steps: a job's edges, a
// gap inside the step), the larger on a tie, so that a device seen in a
// partial step and a full one reads the full one's count.
func mode(cs []float64) float64 {
	if len(cs) == 0 {
		return 0
	}
	top := 0.0
	for _, c := range cs {
		top = max(top, c)
	}
	s := make([]float64, 0, len(cs))
	for _, c := range cs {
		if c >= top/2 {
			s = append(s, c)
		}
	}
	sort.Float64s(s)
	best, bestN := s[0], 0
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && s[j] == s[i] {
			j++
		}
		if j-i >= bestN {
			best, bestN = s[i], j-i
		}
		i = j
	}
	return best
}

// ExpectedOf is the samples a full step of a device (a DeviceID) holds:
// its own cadence, or, for a device with none learnt, the largest of the
// step's.
func (s *Step) ExpectedOf(dev string) float64 {
	if e := s.Expected[dev]; e > 0 {
		return e
	}
	return s.MaxExpected
}

// Known reports whether a device has enough samples in the step to be
// judged: at least minCoverage of its own full step.
func (s *Step) Known(dev string, minCoverage float64) bool {
	e := s.Expected[dev]
	return e > 0 && s.DeviceSamples[dev] >= minCoverage*e
}

// Share is the part of the step that samples on a device cover. A step
// one sample short of its device's full count is full: scrape times
// jitter, and an interval that does not divide the step puts one sample
// more or less in a step, so full steps hold the count or one less (the
// one more is capped). Counting those at their ratio would lose a few
// percent of every allocation on a target scraped every 30 or 60 s.
func (s *Step) Share(dev string, samples float64) float64 {
	return FullShare(samples, s.ExpectedOf(dev))
}

// FullShare is the share of a full bucket, one that holds full samples,
// that a bucket holding samples covers, by the rule Step.Share states: one
// sample short of a full count of three or more is full.
func FullShare(samples, full float64) float64 {
	if full <= 0 {
		return 0
	}
	if full >= 3 && samples >= full-1 {
		return 1
	}
	return math.Min(1, samples/full)
}
