package analyzercmd

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/internal/clikit"
	"github.com/gpuwatch/gpuwatch/internal/command"
)

func Audit(app *kingpin.Application) (string, func(ctx context.Context) error) {
	cmd := app.Command("audit", "List the reclamation audit log: every step as intended and as done, failed, skipped or dry-run.")
	storage := registerStorageFlags(cmd, "Path of the gpuwatch state database (SQLite).", "")
	since := cmd.Flag("since", "Only events of this recent period (e.g. 24h, 168h); all when 0.").Default("0s").Duration()
	job := cmd.Flag("job", "Only events of this job.").String()
	limit := cmd.Flag("limit", "At most this many (newest) events; all when 0.").Default("0").Int()
	format := cmd.Flag("format", "Output format: table or json.").Default("table").Enum("table", "json")
	return cmd.FullCommand(), func(ctx context.Context) error {
		if *limit < 0 {
			return &clikit.UsageError{Err: fmt.Errorf("--limit must be 0 (all) or more, got %d", *limit)}
		}
		if *since < 0 {
			return &clikit.UsageError{Err: fmt.Errorf("--since must not be negative, got %s", *since)}
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
		lg, err := audit.Open(ctx, st)
		if err != nil {
			return err
		}
		f := audit.Filter{Job: *job, Limit: *limit}
		if *since > 0 {
			f.Since = time.Now().Add(-*since)
		}
		evs, err := lg.Events(ctx, f)
		if err != nil {
			return err
		}
		if *format == "json" {
			return audit.WriteJSON(os.Stdout, evs)
		}
		return audit.WriteTable(os.Stdout, evs)
	}
}
