package analyzercmd

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/analyzer/report"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/internal/clikit"
	"github.com/gpuwatch/gpuwatch/internal/command"
)

func Report(app *kingpin.Application) (string, func(ctx context.Context) error) {
	cmd := app.Command("report", "Preview a waste report from the store without sending it: a team's weekly report, or the fleet's with --team unset.")
	storage := registerStorageFlags(cmd, "Path of the gpuwatch state database (SQLite) the analyzer writes.", "")
	var configFile string
	config := &configFile
	cmd.Flag("report.config", "Report configuration file (YAML): time zone, prices, Grafana URL, teams. Optional for a preview.").StringVar(config)
	command.OldSpelling(cmd, "config", "report.config").StringVar(config)
	team := cmd.Flag("team", "Team to report on; empty for the fleet (administrators') report.").String()
	week := cmd.Flag("week", "ISO week to report on, e.g. 2026-W47 (default: the last full week); a date (2026-11-28) gives a daily digest.").String()
	format := cmd.Flag("format", "Output format: html (charts embedded), text or json.").Default("html").Enum("html", "text", "json")
	out := cmd.Flag("out", "Write the report to this file instead of standard output.").String()
	return cmd.FullCommand(), func(ctx context.Context) error {
		cfg := &report.Config{}
		if *config != "" {
			c, err := report.LoadConfig(*config)
			if err != nil {
				return &clikit.UsageError{Err: err}
			}
			cfg = c
		} else {
			cfg.Defaults()
		}
		p := report.WeekOf(time.Now(), cfg.Location()).Prev()
		if *week != "" {
			var err error
			if p, err = report.ParsePeriod(*week, cfg.Location()); err != nil {
				return &clikit.UsageError{Err: fmt.Errorf("--week: %w", err)}
			}
		}
		target, err := storage.target(command.LoggerFrom(ctx), true)
		if err != nil {
			return err
		}
		st, err := store.OpenReadOnlyURL(target)
		if err != nil {
			return err
		}
		defer st.Close()
		if _, err := report.OpenOutbox(ctx, st); err != nil { // creates the indexes reports read with
			return err
		}
		b := report.NewBuilder(st, cfg)
		r, err := b.Build(ctx, p, *team)
		if err != nil {
			return err
		}
		if r.Totals.AllocatedGPUHours == 0 {
			if err := explainEmpty(ctx, st, *team, p, cfg.Location()); err != nil {
				return err
			}
		}
		body, err := renderReport(r, *format)
		if err != nil {
			return err
		}
		if *out == "" || *out == "-" {
			_, err = os.Stdout.Write(body)
			return err
		}
		if err := os.WriteFile(*out, body, report.FileMode); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
		command.LoggerFrom(ctx).Info("report written", "path", *out, "team", *team, "period", p.Label, "format", *format)
		return nil
	}
}

// renderReport is r as format: json, text, or html with its charts
// embedded.
func renderReport(r *report.Report, format string) ([]byte, error) {
	if format == "json" {
		return report.JSON(r)
	}
	rd, err := report.NewRenderer()
	if err != nil {
		return nil, err
	}
	x, err := rd.Render(r, report.ImagesDataURI)
	if err != nil {
		return nil, err
	}
	if format == "text" {
		return []byte(x.Text), nil
	}
	return []byte(x.HTML), nil
}

// explainEmpty says in one line on standard error why a report is all
// zeros: the period holds no usage, and from when to when the store has
// some (for the team, or for any team), or that it has none yet.
func explainEmpty(ctx context.Context, st *store.Store, team string, p report.Period, loc *time.Location) error {
	who := "the fleet"
	if team != "" {
		who = fmt.Sprintf("team %q", team)
	}
	day := func(t time.Time) string { return t.In(loc).Format("2006-01-02") }
	first, last, ok, err := st.UsageSpan(ctx, team)
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("report: no usage for %s in %s (%s to %s); ", who, p.Label, day(p.Start), day(p.End))
	switch {
	case ok:
		msg += fmt.Sprintf("the store holds usage of %s from %s to %s (choose a week in it with --week)", who, day(first), day(last))
	case team != "":
		if first, last, ok, err = st.UsageSpan(ctx, ""); err != nil {
			return err
		}
		if ok {
			msg += fmt.Sprintf("the store holds none of that team, and usage of other teams from %s to %s (is the team's name right? the teams file names them)", day(first), day(last))
		} else {
			msg += "the store holds no usage yet (the analyzer records it each cycle)"
		}
	default:
		msg += "the store holds no usage yet (the analyzer records it each cycle)"
	}
	fmt.Fprintln(os.Stderr, msg)
	return nil
}
