package engine

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/analyzer/query"
)

// stepCache fetches a data set's steps once and replays them to every
// engine made from it. The sensitivity sweeps analyze one data set under a
// hundred configurations: the detectors are a pure function of the steps
// and the configuration (the thresholds swept are under idle and patterns,
// never the step), so only detection is run again per configuration, not
// the queries and the features.
type stepCache struct {
	q  query.Querier
	mu sync.Mutex
	// got is keyed by the fetch's grid: first step, step count and step.
	got map[stepsKey]*fetchedSteps
}

type stepsKey struct {
	start       int64
	total       int
	step, chunk time.Duration
}

type fetchedSteps struct {
	once   sync.Once
	chunks [][]features.Step
	err    error
}

func newStepCache(q query.Querier) *stepCache {
	return &stepCache{q: q, got: map[stepsKey]*fetchedSteps{}}
}

// engine is an engine under cfg whose fetches come from the cache, the
// first of each grid fetched through the querier by an engine under cfg.
func (c *stepCache) engine(cfg config.Config) (*Engine, error) {
	e, err := New(Options{Querier: c.q, Config: cfg})
	if err != nil {
		return nil, err
	}
	fetcher, err := New(Options{Querier: c.q, Config: cfg})
	if err != nil {
		return nil, err
	}
	e.replay = func(start time.Time, total int) (<-chan []features.Step, func() error) {
		f := c.entry(stepsKey{start: start.UnixNano(), total: total, step: e.Step(), chunk: time.Duration(e.o.ChunkSteps)})
		f.once.Do(func() {
			chunks, wait := fetcher.fetchChunks(context.Background(), start, total, features.NewMemory())
			for s := range chunks {
				f.chunks = append(f.chunks, s)
			}
			f.err = wait()
		})
		out := make(chan []features.Step, len(f.chunks))
		for _, s := range f.chunks {
			out <- s
		}
		close(out)
		return out, func() error { return f.err }
	}
	return e, nil
}

func (c *stepCache) entry(k stepsKey) *fetchedSteps {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.got[k]
	if f == nil {
		f = &fetchedSteps{}
		c.got[k] = f
	}
	return f
}

// TestCorpusStepCacheSameFindings: an analysis replayed from the cache finds
// what one that fetches through the querier finds, finding for finding.
func TestCorpusStepCacheSameFindings(t *testing.T) {
	site, cache := borderline(t, 0)
	direct := analyzeSite(t, fieldDB(t, site, borderlineFormats[0].f), site).Findings
	e, err := cache.engine(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	cached, err := e.Analyze(context.Background(), fieldOrigin, fieldOrigin.Add(site.Span))
	if err != nil {
		t.Fatal(err)
	}
	if len(direct) == 0 || !reflect.DeepEqual(direct, cached) {
		t.Errorf("replayed steps found %d findings, a fetch %d, or they differ:\n%v\n%v", len(cached), len(direct), cached, direct)
	}
}
