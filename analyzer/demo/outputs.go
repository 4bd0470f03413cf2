package demo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/present"
	"github.com/gpuwatch/gpuwatch/analyzer/report"
	"github.com/gpuwatch/gpuwatch/dashboards"
)

// writeOutputs writes findings.json, audit.json, reports/ and dashboards/
// into the output folder and fills res from the store.
func (d *Demo) writeOutputs(ctx context.Context, res *Result) error {
	out := d.o.Out
	// The upper bound is exclusive; the last cycle is stamped at the end.
	fs, err := d.st.FindingsBetween(ctx, res.Origin, res.End.Add(time.Millisecond))
	if err != nil {
		return fmt.Errorf("findings: %w", err)
	}
	res.Findings = fs
	var buf bytes.Buffer
	if err := present.JSON(&buf, fs, nil, nil); err != nil {
		return fmt.Errorf("findings.json: %w", err)
	}
	if err := d.write(res, "findings.json", buf.Bytes()); err != nil {
		return err
	}
	if res.Audit, err = d.log.Events(ctx, audit.Filter{}); err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	buf.Reset()
	if err := audit.WriteJSON(&buf, res.Audit); err != nil {
		return fmt.Errorf("audit.json: %w", err)
	}
	if err := d.write(res, "audit.json", buf.Bytes()); err != nil {
		return err
	}
	buf.Reset()
	if err := planJSON(&buf, res); err != nil {
		return err
	}
	if err := d.write(res, "plan.json", buf.Bytes()); err != nil {
		return err
	}
	if err := d.writeReports(ctx, res); err != nil {
		return err
	}
	files, err := dashboards.Write(filepath.Join(out, "dashboards"))
	if err != nil {
		return fmt.Errorf("dashboards: %w", err)
	}
	res.Files = append(res.Files, files...)
	return nil
}

func (d *Demo) write(res *Result, name string, data []byte) error {
	path := filepath.Join(d.o.Out, name)
	if err := os.MkdirAll(filepath.Dir(path), report.DirMode); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := os.WriteFile(path, data, report.FileMode); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	res.Files = append(res.Files, path)
	return nil
}

// reportConfig lists the teams the store saw, so that each gets a report.
func (d *Demo) reportConfig(ctx context.Context, from, to time.Time) (*report.Config, error) {
	cfg := &report.Config{}
	cfg.Defaults()
	us, err := d.st.UsageBetween(ctx, from, to)
	if err != nil {
		return nil, fmt.Errorf("report teams: %w", err)
	}
	cfg.Teams = map[string]report.Team{}
	for _, u := range us {
		if u.Team != "" {
			cfg.Teams[u.Team] = report.Team{}
		}
	}
	return cfg, nil
}

// period is the simulated span as a report period: a week's label when it
// is one ISO week.
func (d *Demo) period(res *Result) report.Period {
	p := report.WeekOf(res.Origin, time.UTC)
	if !p.Start.Equal(res.Origin) || !p.End.Equal(res.End) {
		p = report.Period{Kind: report.Week, Start: res.Origin, End: res.End,
			Label: res.Origin.Format("2006-01-02T15:04") + "+" + strings.TrimSuffix(res.End.Sub(res.Origin).String(), "0m0s")}
	}
	return p
}

func (d *Demo) builder(cfg *report.Config, end time.Time) *report.Builder {
	var planned plannedSpan
	if d.result != nil {
		planned.p, planned.err = d.result.Plan, d.result.PlanErr
	}
	b := report.NewBuilder(d.st, cfg)
	b.Planner, b.Now = planned, func() time.Time { return end }
	return b
}

// writeReports writes reports/<team>.html for every team and
// reports/fleet.html, the administrators' report, for the simulated span.
func (d *Demo) writeReports(ctx context.Context, res *Result) error {
	if _, err := report.OpenOutbox(ctx, d.st); err != nil { // creates the indexes reports read with
		return fmt.Errorf("reports: %w", err)
	}
	cfg, err := d.reportConfig(ctx, res.Origin, res.End)
	if err != nil {
		return err
	}
	res.Teams = cfg.TeamNames()
	sort.Strings(res.Teams)
	teams, fleet, err := d.builder(cfg, res.End).BuildAll(ctx, d.period(res), res.Teams, true)
	if err != nil {
		return fmt.Errorf("reports: %w", err)
	}
	rd, err := report.NewRenderer()
	if err != nil {
		return fmt.Errorf("reports: %w", err)
	}
	render := func(r *report.Report, name string) error {
		x, err := rd.Render(r, report.ImagesDataURI)
		if err != nil {
			return fmt.Errorf("render report %s: %w", name, err)
		}
		return d.write(res, filepath.Join("reports", name+".html"), []byte(x.HTML))
	}
	if fleet != nil {
		res.Fleet = fleet
		if err := render(fleet, "fleet"); err != nil {
			return err
		}
	}
	for _, team := range res.Teams {
		r := teams[team]
		if r == nil {
			continue
		}
		name := fileName(team)
		if name == "fleet" { // the fleet report's name
			name = "team-fleet"
		}
		if err := render(r, name); err != nil {
			return err
		}
	}
	return nil
}

// fileName keeps a team name safe as a file name.
func fileName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, s)
}
