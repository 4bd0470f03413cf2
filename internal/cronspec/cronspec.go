// Package cronspec holds the rule every gpuwatch schedule obeys beyond what
// robfig/cron checks: cron reads "@every 0s" and "@every -1s" as every
// second, which nobody means.
package cronspec

import (
	"fmt"
	"strings"
	"time"
)

// CheckEvery refuses an "@every" schedule whose interval is under a second
// (zero and negative included); other specs pass to the cron parser.
func CheckEvery(spec string) error {
	rest, ok := strings.CutPrefix(strings.TrimSpace(spec), "@every ")
	if !ok {
		return nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(rest))
	if err != nil {
		return fmt.Errorf("@every %q: %w", rest, err)
	}
	if d < time.Second {
		return fmt.Errorf("@every %s: the interval must be at least 1s", d)
	}
	return nil
}
