package testtool

import (
	"testing"
	"time"
)

// Eventually polls cond every 100 ms until it holds, failing the test after
// timeout or on an error. Tests wait for the condition they need, never a
// fixed time: a fixed sleep is too long on a fast machine and too short on
// a loaded one.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s", what, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
