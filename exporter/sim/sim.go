// Package sim is the simulated fleet. PLACEHOLDER: being written; this file fixes the API.
package sim

import (
	"context"
	"errors"

	"github.com/gpuwatch/gpuwatch/exporter/source"
)

// Scenario is a parsed scenario file.
type Scenario struct{}

// LoadScenario reads and validates a scenario file.
func LoadScenario(path string) (*Scenario, error) { return nil, errors.New("not implemented") }

// ParseScenario parses a scenario; name is used in error messages.
func ParseScenario(name string, data []byte) (*Scenario, error) {
	return nil, errors.New("not implemented")
}

// DefaultScenario is the built-in scenario used when no file is given.
func DefaultScenario() *Scenario { return &Scenario{} }

// Options configure the simulator.
type Options struct {
	Seed  int64
	Clock source.Clock
	// Node selects one node of the scenario's fleet ("" = every node in one snapshot).
	Node string
}

// Source simulates a fleet.
type Source struct{}

// New builds a simulated source.
func New(sc *Scenario, opts Options) (*Source, error) { return nil, errors.New("not implemented") }

func (s *Source) Name() string { return "sim" }
func (s *Source) Collect(ctx context.Context) (*source.Snapshot, error) {
	return nil, errors.New("not implemented")
}
func (s *Source) Close() error { return nil }
