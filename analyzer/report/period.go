package report

import (
	"fmt"
	"time"
)

// Period kinds.
const (
	Week = "week"
	Day  = "day"
)

// Period is a report's time span [Start, End) in the configured zone.
type Period struct {
	Kind  string    `json:"kind"`
	Label string    `json:"label"` // 2026-W47 or 2026-11-23
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// WeekOf is the ISO week (Monday to Monday in loc) that contains t.
func WeekOf(t time.Time, loc *time.Location) Period {
	t = t.In(loc)
	back := (int(t.Weekday()) + 6) % 7 // days since Monday
	start := time.Date(t.Year(), t.Month(), t.Day()-back, 0, 0, 0, 0, loc)
	y, w := start.ISOWeek()
	return Period{Kind: Week, Label: fmt.Sprintf("%04d-W%02d", y, w), Start: start,
		End: time.Date(start.Year(), start.Month(), start.Day()+7, 0, 0, 0, 0, loc)}
}

// DayOf is the calendar day in loc that contains t.
func DayOf(t time.Time, loc *time.Location) Period {
	t = t.In(loc)
	start := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
	return Period{Kind: Day, Label: start.Format("2006-01-02"), Start: start,
		End: time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, loc)}
}

// ParseWeek parses an ISO week such as 2026-W47.
func ParseWeek(s string, loc *time.Location) (Period, error) {
	var y, w int
	if n, err := fmt.Sscanf(s, "%4d-W%2d", &y, &w); err != nil || n != 2 || len(s) != 8 {
		return Period{}, fmt.Errorf("week %q: want YYYY-Www, e.g. 2026-W47", s)
	}
	if y < MinYear {
		return Period{}, fmt.Errorf("week %q: year %d is before %d", s, y, MinYear)
	}
	// Week 1 is the week with January 4th in it.
	p := WeekOf(time.Date(y, time.January, 4+7*(w-1), 12, 0, 0, 0, loc), loc)
	if w < 1 || p.Label != s {
		return Period{}, fmt.Errorf("week %q: year %d has no week %d", s, y, w)
	}
	return p, nil
}

// MinYear is the first year a report may cover: gpuwatch has no telemetry
// from before Unix time, and year 0 is a typo, not a request.
const MinYear = 1970

// ParsePeriod accepts an ISO week or a date (a daily digest).
func ParsePeriod(s string, loc *time.Location) (Period, error) {
	if t, err := time.ParseInLocation("2006-01-02", s, loc); err == nil {
		if t.Year() < MinYear {
			return Period{}, fmt.Errorf("date %q: year %d is before %d", s, t.Year(), MinYear)
		}
		return DayOf(t, loc), nil
	}
	return ParseWeek(s, loc)
}

// Prev is the period of the same kind just before p.
func (p Period) Prev() Period {
	if p.Kind == Day {
		return DayOf(p.Start.Add(-time.Hour), p.Start.Location())
	}
	return WeekOf(p.Start.Add(-time.Hour), p.Start.Location())
}

// Days lists the calendar days of p.
func (p Period) Days() []Period {
	var out []Period
	for d := DayOf(p.Start, p.Start.Location()); d.Start.Before(p.End); d = DayOf(d.End, p.Start.Location()) {
		out = append(out, d)
	}
	return out
}
