package plan

import "testing"

// windows finds the spare spans of the day, one that wraps past midnight
// whole.
func TestWindowsWrapMidnight(t *testing.T) {
	hm := &HeatMap{GPUs: 10, Idle: make([]float64, HoursOfWeek), Unallocated: make([]float64, HoursOfWeek)}
	for w := 0; w < HoursOfWeek; w++ {
		if h := w % 24; h >= 22 || h < 7 {
			hm.Unallocated[w] = 4 // 40 % spare at night
		} else {
			hm.Idle[w] = 1
		}
	}
	ws := windows(hm)
	if len(ws) != 1 || ws[0].From != 22 || ws[0].To != 31 || ws[0].String() != "22:00–07:00: 40 % idle (4.0 GPUs)" {
		t.Fatalf("windows %+v, want one 22:00–07:00 at 40 %%", ws)
	}
}
