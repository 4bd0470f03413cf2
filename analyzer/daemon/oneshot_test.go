package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/leader"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
)

// A one-shot analyzer (--once) that finds the lease held watches it for
// the lease duration: it stands by as soon as the holder renews (the
// holder lives), and takes over and acts when the holder stays silent
// that long (it crashed).
func TestRunOnceOrStandByWatchesTheLease(t *testing.T) {
	t.Parallel()
	ttl := time.Second
	for _, tc := range []struct {
		name        string
		renews      bool
		wantStandby bool
	}{
		{"holder renews", true, true},
		{"holder crashed", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "state.db")
			st, err := store.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			ctx := context.Background()
			holder := "other-host/1/0123456789abcdef"
			if _, ok, err := st.AcquireLease(ctx, leader.LeaseName, holder, ttl, time.Now()); !ok || err != nil {
				t.Fatal(ok, err)
			}
			stop := make(chan struct{})
			renewed := make(chan struct{})
			if tc.renews {
				go func() {
					defer close(renewed)
					for {
						select {
						case <-stop:
							return
						case <-time.After(ttl / 5):
							_, _, _ = st.AcquireLease(ctx, leader.LeaseName, holder, ttl, time.Now())
						}
					}
				}()
			} else {
				close(renewed)
			}
			r := newReplica(t, path, fmt.Sprintf(leaderPolicy, "10m", "30m"), &leader.StoreLease{Store: st, Identity: leader.Identity(), TTL: ttl}, nil)
			start := time.Now()
			res, err := r.d.RunOnceOrStandBy(ctx, st, leader.LeaseName, ttl)
			took := time.Since(start)
			close(stop)
			<-renewed
			if err != nil {
				t.Fatal(err)
			}
			if res.Standby != tc.wantStandby {
				t.Fatalf("standby %v after %s, want %v (steps %v)", res.Standby, took, tc.wantStandby, r.steps())
			}
			if tc.renews {
				if took >= ttl {
					t.Errorf("stood by after %s: the holder renewed within %s, so it should have at once", took, ttl/5)
				}
				if s := r.steps(); len(s) != 0 {
					t.Errorf("a standby acted: %v", s)
				}
				return
			}
			if took < ttl {
				t.Errorf("took over after %s, before the lease (%s) went unrenewed on its own clock", took, ttl)
			}
			if s := r.steps(); len(s) == 0 {
				t.Error("took over but did no step")
			}
		})
	}
}
