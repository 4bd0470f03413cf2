package demo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/gpuwatch/gpuwatch/analyzer/report"
	"github.com/gpuwatch/gpuwatch/internal/serve"
)

// RunOptions are `gpuwatch demo`'s: the simulation, then the summary, then
// (unless Exit) the server until ctx ends.
type RunOptions struct {
	Options
	Exit bool
	// Web holds the listen address and the TLS/basic-auth web config.
	Web *web.FlagConfig
	// Listener, when set, is served instead of Web's addresses (tests).
	Listener net.Listener
	// Stdout receives the summary; Verbose adds timing and peak memory.
	Stdout  io.Writer
	Verbose bool
	Version string
}

// Run runs the demo.
func Run(ctx context.Context, o RunOptions) error {
	d, err := New(o.Options)
	if err != nil {
		return err
	}
	defer d.Close()
	res, err := d.Simulate(ctx)
	if err != nil {
		if ctx.Err() != nil { // interrupted: as the server does, stop quietly
			return nil
		}
		return err
	}
	if err := WriteSummary(o.Stdout, res); err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, "\nWrote %d files to %s: reports/ (%d teams and the fleet), dashboards/, findings.json, audit.json, gpuwatch.db, tsdb/\n",
		len(res.Files), d.o.Out, len(res.Teams))
	writeExplore(o.Stdout, d.o.Out, res)
	if o.Verbose {
		fmt.Fprintf(o.Stdout, "%d collections, %d analyzer cycles, %d findings, %d audit events in %s; peak RSS %s\n",
			res.Collections, res.Cycles, len(res.Findings), len(res.Audit), res.Elapsed, PeakRSS())
	}
	if o.Exit {
		return nil
	}
	if o.Web == nil {
		return errors.New("no listen address to serve on (RunOptions.Web)")
	}
	h, err := d.Handler(ctx, o.Version)
	if err != nil {
		return err
	}
	if o.Listener != nil {
		fmt.Fprintf(o.Stdout, "Serving http://%s/ (analyzer page) and /metrics (live exporter) until interrupted.\n", o.Listener.Addr())
		return serve.ServeListener(ctx, o.Listener, h, o.Web, d.o.Logger)
	}
	if o.Web != nil && o.Web.WebListenAddresses != nil {
		fmt.Fprintf(o.Stdout, "Serving %s: / (analyzer page) and /metrics (live exporter) until interrupted.\n",
			strings.Join(*o.Web.WebListenAddresses, ", "))
	}
	return serve.Serve(ctx, h, o.Web, d.o.Logger)
}

// writeExplore prints the commands that read what the demo wrote, to be
// copied as they are: the embedded telemetry store is --tsdb.path (the
// output folder, which holds it as tsdb/), the state database
// --storage.path; the window and week are the simulated span's.
func writeExplore(w io.Writer, out string, res *Result) {
	dir := shellWord(out)
	db := shellWord(filepath.Join(out, "gpuwatch.db"))
	fmt.Fprintf(w, "Read them with the other commands:\n")
	fmt.Fprintf(w, "  gpuwatch analyze --tsdb.path=%s --from=%s --to=%s\n", dir, res.Origin.UTC().Format(time.RFC3339), res.End.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "  gpuwatch report --storage.path=%s --week=%s --format=text\n", db, report.WeekOf(res.Origin, time.UTC).Label)
	fmt.Fprintf(w, "  gpuwatch audit --storage.path=%s\n", db)
}

// shellWord is s as one word of a POSIX shell command line: as it is when
// it holds nothing a shell would act on, else single-quoted.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=+,@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// PeakRSS reads the process's peak resident memory (VmHWM) from
// /proc/self/status; "unknown" where there is none.
func PeakRSS() string {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
