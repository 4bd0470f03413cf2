package plan

import (
	"fmt"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/plan/demand"
)

// ShortHistoryError is Build's refusal to plan on less data than the
// packing needs: a plan from ten minutes of samples would name GPUs to free
// on no evidence.
type ShortHistoryError struct {
	// Have is the history in the window (demand.Result.HistoryHours), Need
	// Options.MinHistory.
	Have, Need time.Duration
	// From and To are the window read (whole clock hours).
	From, To time.Time
}

func (e *ShortHistoryError) Error() string {
	if e.Have == 0 {
		return fmt.Sprintf("not enough history to plan: no GPU samples in any whole clock hour from %s to %s "+
			"(the current hour is not read until it ends); the plan needs %s of hourly data (--plan.min-history)",
			e.From.UTC().Format(time.RFC3339), e.To.UTC().Format(time.RFC3339), hoursOf(e.Need))
	}
	return fmt.Sprintf("not enough history to plan: %s of hourly data from %s to %s, the plan needs %s "+
		"(--plan.min-history): plan again after %s", hoursOf(e.Have), e.From.UTC().Format(time.RFC3339),
		e.To.UTC().Format(time.RFC3339), hoursOf(e.Need), e.To.Add(e.Need-e.Have).UTC().Format(time.RFC3339))
}

// enoughHistory refuses a window whose data holds fewer hours than
// MinHistory.
func (o *Options) enoughHistory(res *demand.Result) error {
	have := time.Duration(res.HistoryHours) * time.Hour
	if have >= o.MinHistory {
		return nil
	}
	return &ShortHistoryError{Have: have, Need: o.MinHistory, From: res.From, To: res.To}
}

func hoursOf(d time.Duration) string {
	if d%time.Hour == 0 {
		return fmt.Sprintf("%d h", d/time.Hour)
	}
	return d.Round(time.Minute).String()
}
