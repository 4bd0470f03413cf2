package demo

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// progress draws a plain-text bar. On a terminal it is redrawn in place
// with \r at most ten times a second; elsewhere (a log file, CI) it writes
// one line per quarter, so logs stay short.
type progress struct {
	w        io.Writer
	terminal bool
	total    int
	began    time.Time
	last     time.Time
	quarter  int
	drawn    bool
}

func newProgress(w io.Writer, terminal bool, total int) *progress {
	return &progress{w: w, terminal: terminal, total: max(total, 1), began: time.Now()}
}

// set reports n of total collections done, at simulated offset off.
func (p *progress) set(n int, off time.Duration) {
	if p.w == nil {
		return
	}
	if !p.terminal {
		q := n * 4 / p.total
		if q > p.quarter && q < 4 { // the last line is done's
			p.quarter = q
			fmt.Fprintf(p.w, "gpuwatch demo: simulated %s (%d%%)\n", hours(off), n*100/p.total)
		}
		return
	}
	now := time.Now()
	if n < p.total && now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.last = now
	const width = 30
	fill := n * width / p.total
	fmt.Fprintf(p.w, "\r[%s%s] %3d%%  simulated %s  %s", strings.Repeat("#", fill), strings.Repeat(".", width-fill),
		n*100/p.total, hours(off), time.Since(p.began).Round(100*time.Millisecond))
	p.drawn = true
}

func (p *progress) done() {
	if p.w == nil {
		return
	}
	if p.drawn {
		fmt.Fprintln(p.w)
		return
	}
	if !p.terminal {
		fmt.Fprintf(p.w, "gpuwatch demo: simulation done in %s\n", time.Since(p.began).Round(100*time.Millisecond))
	}
}

func hours(d time.Duration) string {
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}
