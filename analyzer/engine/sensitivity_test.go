package engine

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

const sensitivityPath = "../../docs/sensitivity.md"

// knob is one numeric detector threshold of the analyzer configuration.
type knob struct {
	key string // YAML path, e.g. patterns.stuck.idle_duration
	v   reflect.Value
	max float64 // the value's range (percent 100, ratio 1), 0 when unbounded
}

// knobs lists every numeric threshold under idle and patterns, walking the
// configuration by its YAML tags, so a threshold added to the config is in
// the table without a change here.
func knobs(c *config.Config) []knob {
	var out []knob
	var walk func(v reflect.Value, key string)
	walk = func(v reflect.Value, key string) {
		switch v.Kind() {
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				f := v.Type().Field(i)
				tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
				sub := key
				if tag != "" {
					sub = strings.TrimPrefix(key+"."+tag, ".")
				}
				walk(v.Field(i), sub)
			}
		case reflect.Map:
			ks := v.MapKeys()
			sort.Slice(ks, func(i, j int) bool { return ks[i].String() < ks[j].String() })
			for _, k := range ks {
				// Map values are not addressable: get and set go through the map.
				out = append(out, knob{key: key + "." + k.String(), v: v})
			}
		case reflect.Float64:
			m := 0.0
			switch v.Type() {
			case reflect.TypeOf(config.Percent(0)):
				m = 100
			case reflect.TypeOf(config.Ratio(0)):
				m = 1
			}
			out = append(out, knob{key: key, v: v, max: m})
		case reflect.Int64:
			out = append(out, knob{key: key, v: v})
		}
	}
	v := reflect.ValueOf(c).Elem()
	walk(v.FieldByName("Idle"), "idle")
	walk(v.FieldByName("Patterns"), "patterns")
	return out
}

// get and scale read and move a knob's value.
func (k knob) get() float64 {
	if k.v.Kind() == reflect.Map {
		return float64(k.v.MapIndex(reflect.ValueOf(k.mapKey())).Int())
	}
	if k.v.Kind() == reflect.Int64 {
		return float64(k.v.Int())
	}
	return k.v.Float()
}

func (k knob) mapKey() string { return k.key[strings.LastIndex(k.key, ".")+1:] }

func (k knob) set(x float64) {
	switch k.v.Kind() {
	case reflect.Map:
		nv := reflect.New(k.v.Type().Elem()).Elem()
		nv.SetInt(int64(x))
		k.v.SetMapIndex(reflect.ValueOf(k.mapKey()), nv)
	case reflect.Int64:
		k.v.SetInt(int64(x))
	default:
		if k.max > 0 && x > k.max {
			x = k.max
		}
		k.v.SetFloat(x)
	}
}

func (k knob) format(x float64) string {
	if k.v.Kind() == reflect.Map || k.v.Kind() == reflect.Int64 {
		return config.Duration(time.Duration(x)).String()
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.4f", x), "0"), ".")
}

// sensitivityRow is one configuration's cells.
type sensitivityRow struct {
	key, value string
	cells      map[schema.Pattern]string
}

// sensitivityJob is one configuration of the table: the defaults, or one
// threshold moved.
type sensitivityJob struct {
	key, value string
	cfg        config.Config
}

// sensitivityJobs is the defaults, then each threshold 25 % down and up
// from base's.
func sensitivityJobs(base func() config.Config) []sensitivityJob {
	jobs := []sensitivityJob{{key: "defaults", cfg: base()}}
	b := base()
	for _, k := range knobs(&b) {
		for _, m := range []float64{0.75, 1.25} {
			c := base() // a fresh copy, maps included
			var target knob
			for _, x := range knobs(&c) {
				if x.key == k.key {
					target = x
				}
			}
			target.set(k.get() * m)
			jobs = append(jobs, sensitivityJob{key: k.key, value: fmt.Sprintf("%s (%+d %%)", target.format(target.get()), int(m*100)-100), cfg: c})
		}
	}
	return jobs
}

// runSensitivity analyzes [from, to) of the cached data set under every
// job's configuration, two at a time, and scores each analysis. The data
// set's steps are fetched once (stepCache): each configuration costs its
// detection only.
func runSensitivity(t *testing.T, c *stepCache, from, to time.Time, jobs []sensitivityJob, cells func(i int, fs []finding.Finding) map[schema.Pattern]string) []sensitivityRow {
	t.Helper()
	rows := make([]sensitivityRow, len(jobs))
	// The defaults first, alone: that analysis fills the cache.
	analyze := func(i int) error {
		j := jobs[i]
		e, err := c.engine(j.cfg)
		if err != nil {
			return err
		}
		fs, err := e.Analyze(context.Background(), from, to)
		if err != nil {
			return fmt.Errorf("%s %s: %w", j.key, j.value, err)
		}
		rows[i] = sensitivityRow{key: j.key, value: j.value, cells: cells(i, fs)}
		return nil
	}
	start := time.Now()
	if err := analyze(0); err != nil {
		t.Fatal(err)
	}
	fetched := time.Since(start)
	var g errgroup.Group
	g.SetLimit(2)
	for i := 1; i < len(jobs); i++ {
		g.Go(func() error { return analyze(i) })
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d analyses in %s (the first, which fetched the steps, %s)", len(jobs), time.Since(start).Round(time.Millisecond), fetched.Round(time.Millisecond))
	return rows
}

// TestCorpusSensitivity moves each detector threshold 25 % down and up,
// one at a time, scores the independent borderline site (fieldgen.Borderline,
// in two counter sets) and the simulator's corpus (gpuwatch's own counters)
// with it, and requires docs/sensitivity.md to hold those tables, every
// row computed here (each data set's steps are fetched once, each
// configuration only re-runs detection). Every moved threshold must change
// some cell of some table, or stand in unmovable with the reason it cannot.
// UPDATE_DOCS=1 (scripts/update-docs.sh) writes the page instead; the
// page's threshold and value columns come from the code's defaults, so a
// changed default cannot leave the page stale.
func TestCorpusSensitivity(t *testing.T) {
	f := getFixture(t)
	exps := f.c.sc.ExpectationsAt(f.c.origin)
	jobs := sensitivityJobs(corpusConfig)
	field := borderlineSensitivity(t, jobs)
	scores := make([]map[schema.Pattern]*score, len(jobs))
	sim := runSensitivity(t, newStepCache(f.native), f.c.origin, f.c.origin.Add(f.c.span), jobs, func(k int, fs []finding.Finding) map[schema.Pattern]string {
		scores[k] = scoreFindings(exps, fs, nil, nil)
		cells := map[schema.Pattern]string{}
		for _, p := range schema.Patterns {
			cells[p] = cellOf(scores[k][p])
		}
		return cells
	})
	// The defaults must hold the acceptance on this table too.
	check(t, scores[0])
	for _, r := range unmoved(sim, field) {
		t.Errorf("%s at %s changes no cell of any table, and unmovable gives no reason", r.key, r.value)
	}
	got := sensitivityDoc(sim, field)
	if os.Getenv("UPDATE_DOCS") != "" {
		if err := os.WriteFile(sensitivityPath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	committed, err := os.ReadFile(sensitivityPath)
	if err != nil {
		t.Fatalf("%v (UPDATE_DOCS=1 go test ./analyzer/engine -run TestCorpusSensitivity writes it)", err)
	}
	if string(committed) != got {
		t.Errorf("%s differs from what the corpora give (or its thresholds from the code's defaults); rerun with UPDATE_DOCS=1 and commit it. Computed:\n%s", sensitivityPath, got)
	}
}

// unmovable holds the thresholds that no case of either corpus can move,
// with the reason; sensitivityDoc prints it.
var unmovable = map[string]string{"idle.floor_quantile": floorQuantileFixed}

// moved says whether row i of rows differs from the defaults' in a cell.
func moved(rows []sensitivityRow, i int) bool {
	for _, p := range schema.Patterns {
		if rows[i].cells[p] != rows[0].cells[p] {
			return true
		}
	}
	return false
}

// unmoved lists the rows that change no cell of any table and have no
// reason in unmovable.
func unmoved(sim []sensitivityRow, field []borderlineTable) []sensitivityRow {
	var out []sensitivityRow
	for i := 1; i < len(sim); i++ {
		m := moved(sim, i)
		for _, ft := range field {
			m = m || moved(ft.rows, i)
		}
		if _, ok := unmovable[sim[i].key]; !m && !ok {
			out = append(out, sim[i])
		}
	}
	return out
}

func sensitivityDoc(sim []sensitivityRow, field []borderlineTable) string {
	var b strings.Builder
	b.WriteString(`# Threshold sensitivity

Precision and recall per pattern when one detector threshold moves 25 % down or up and every
other keeps its default, on two corpora written apart: the simulator's labelled corpus week
(` + "`exporter/sim/scenarios/corpus.yaml`" + `, gpuwatch's own counters, idle noise on), and the
independent generator's borderline site (` + "`analyzer/internal/fieldgen`" + `, ` + "`Borderline`" + `: 60 hours
of seven A100 nodes, one case per GPU at a time, each case's readings just inside or just outside one
threshold, labelled by its cited source's rule, which is not always gpuwatch's default) in dcgm-exporter's default counters and in its
profiling set with SM activity. The run-time limits, which gpuwatch builds in none of, are the
sites' own: batch 48h, interactive 24h. Percentages and ratios are capped at their range. Each
cell is precision / recall; "–" is a pattern with no labelled case and no finding; a cell that
differs from the defaults' is in bold. A threshold that moves no cell of any table is one no
case pins down: the test that writes this page fails on it unless the page says why it cannot
move.

gpuwatch's own counters and the profiling set carry SM activity, which the idle and light-use
rules prefer to util, so the util-only thresholds (` + "`low_utilization.max_mean_util_percent`" + `) act on
the default counters only; SM and DRAM activity act only where they are exported.

Generated by ` + "`TestCorpusSensitivity`" + ` in ` + "`analyzer/engine`" + ` (` + "`scripts/update-docs.sh`" + `, or
` + "`UPDATE_DOCS=1 go test ./analyzer/engine -run TestCorpusSensitivity`" + `, rewrites it). CI recomputes
every row of every table (each corpus is fetched once; each configuration re-runs only the
detectors) and fails when this page differs from them or its threshold and value columns from the
code's defaults.

## The simulator's corpus week

`)
	writeSensitivityTable(&b, sim)
	for _, ft := range field {
		fmt.Fprintf(&b, "\n## The borderline site, %s\n\n", ft.name)
		writeSensitivityTable(&b, ft.rows)
	}
	b.WriteString("\n## Thresholds no table moves\n\n")
	var none []string
	for i := 1; i < len(sim); i++ {
		m := moved(sim, i)
		for _, ft := range field {
			m = m || moved(ft.rows, i)
		}
		if !m {
			why := unmovable[sim[i].key]
			if why == "" {
				why = "no case pins it down."
			}
			none = append(none, fmt.Sprintf("- `%s` at %s: %s\n", sim[i].key, sim[i].value, why))
		}
	}
	if len(none) == 0 {
		b.WriteString("None: every threshold, moved 25 % either way, changes a cell of some table.\n")
	}
	for _, l := range none {
		b.WriteString(l)
	}
	return b.String()
}

func writeSensitivityTable(b *strings.Builder, rows []sensitivityRow) {
	b.WriteString("| threshold | value |")
	for _, p := range schema.Patterns {
		b.WriteString(" " + string(p) + " |")
	}
	b.WriteString("\n|---|---|")
	for range schema.Patterns {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	base := rows[0]
	for _, r := range rows {
		key := "`" + r.key + "`"
		if r.key == "defaults" {
			key = "defaults"
		}
		fmt.Fprintf(b, "| %s | %s |", key, r.value)
		for _, p := range schema.Patterns {
			cell := r.cells[p]
			if r.key != "defaults" && cell != base.cells[p] {
				cell = "**" + cell + "**"
			}
			b.WriteString(" " + cell + " |")
		}
		b.WriteString("\n")
	}
}

func cellOf(s *score) string {
	if s.tp+s.fp+s.fn == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f / %.2f", s.precision(), s.recall())
}
