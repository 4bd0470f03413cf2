package collector

import (
	"context"
	"errors"
	"sync"

	"github.com/gpuwatch/gpuwatch/exporter/internal/fixture"
	"github.com/gpuwatch/gpuwatch/exporter/source"
)

// fakeSource returns a prepared snapshot; it can be made to block or fail.
type fakeSource struct {
	mu    sync.Mutex
	snap  *source.Snapshot
	err   error
	block chan struct{} // when non-nil, Collect waits on it (or ctx)
	calls int
}

func (f *fakeSource) Name() string { return "fake" }
func (f *fakeSource) Close() error { return nil }
func (f *fakeSource) Collect(ctx context.Context) (*source.Snapshot, error) {
	f.mu.Lock()
	f.calls++
	block, snap, err := f.block, f.snap, f.err
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	cp := *snap
	cp.Devices = append([]source.Device(nil), snap.Devices...)
	return &cp, nil
}

func fullSnapshot(n, procs int) *source.Snapshot { return fixture.Snapshot(n, procs) }

var errBoom = errors.New("boom")
