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
	"github.com/gpuwatch/gpuwatch/analyzer/query"
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

// runSensitivity analyzes [from, to) of q under every job's configuration,
// two at a time, and scores each analysis.
func runSensitivity(t *testing.T, q query.Querier, from, to time.Time, jobs []sensitivityJob, cells func(i int, fs []finding.Finding) map[schema.Pattern]string) []sensitivityRow {
	t.Helper()
	rows := make([]sensitivityRow, len(jobs))
	var g errgroup.Group
	g.SetLimit(2)
	start := time.Now()
	for i, j := range jobs {
		g.Go(func() error {
			e, err := New(Options{Querier: q, Config: j.cfg})
			if err != nil {
				return err
			}
			fs, err := e.Analyze(context.Background(), from, to)
			if err != nil {
				return fmt.Errorf("%s %s: %w", j.key, j.value, err)
			}
			rows[i] = sensitivityRow{key: j.key, value: j.value, cells: cells(i, fs)}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d analyses in %s", len(jobs), time.Since(start).Round(time.Millisecond))
	return rows
}

// TestCorpusSensitivity moves each detector threshold 25 % down and up,
// one at a time, scores the independent borderline site (fieldgen.Borderline,
// in two counter sets) and the simulator's corpus (gpuwatch's own counters)
// with it, and requires docs/sensitivity.md to hold those tables. Every
// moved threshold must change some cell of some table, or stand in unmoved
// with the reason it cannot.
//
// The borderline site is small and is scored under every configuration.
// The simulator's week is the costly corpus (each analysis is a week of a
// hundred GPUs): the suite scores it under the defaults and under each
// configuration the borderline site leaves unmoved, which is what it takes
// to show that every row moves, and checks those rows against the page; the
// page's other rows of that table are regenerated, with every row of every
// table, by UPDATE_DOCS=1 (scripts/update-docs.sh). The page's threshold
// and value columns are checked whole against the code's defaults either
// way, so a changed default cannot leave the page stale.
func TestCorpusSensitivity(t *testing.T) {
	f := getFixture(t)
	exps := f.c.sc.ExpectationsAt(f.c.origin)
	jobs := sensitivityJobs(corpusConfig)
	field := borderlineSensitivity(t, jobs)
	full := os.Getenv("UPDATE_DOCS") != ""
	var want []int // the rows of the simulator's table to compute
	for i := range jobs {
		if full || i == 0 || !movedInAny(field, i) {
			want = append(want, i)
		}
	}
	subset := make([]sensitivityJob, len(want))
	for k, i := range want {
		subset[k] = jobs[i]
	}
	scores := make([]map[schema.Pattern]*score, len(subset))
	computed := runSensitivity(t, f.native, f.c.origin, f.c.origin.Add(f.c.span), subset, func(k int, fs []finding.Finding) map[schema.Pattern]string {
		scores[k] = scoreFindings(exps, fs, nil, nil)
		cells := map[schema.Pattern]string{}
		for _, p := range schema.Patterns {
			cells[p] = cellOf(scores[k][p])
		}
		return cells
	})
	t.Logf("the simulator's week under %d of %d configurations; the borderline site under all", len(subset), len(jobs))
	// The defaults must hold the acceptance on this table too.
	check(t, scores[0])
	sim := make([]sensitivityRow, len(jobs))
	for i, j := range jobs {
		sim[i] = sensitivityRow{key: j.key, value: j.value}
	}
	for k, i := range want {
		sim[i] = computed[k]
	}
	if full {
		for _, r := range unmoved(sim, field) {
			t.Errorf("%s at %s changes no cell of any table, and unmovable gives no reason", r.key, r.value)
		}
		if err := os.WriteFile(sensitivityPath, []byte(sensitivityDoc(sim, field)), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	committed, err := os.ReadFile(sensitivityPath)
	if err != nil {
		t.Fatalf("%v (UPDATE_DOCS=1 go test ./analyzer/engine -run TestCorpusSensitivity writes it)", err)
	}
	// The rows not computed here are the page's own: the page must still
	// list exactly these configurations for its cells to be taken.
	page, err := pageRows(string(committed), simTableHeading)
	if err != nil || len(page) != len(jobs) {
		t.Fatalf("%s: the simulator's table has %d rows (%v) where the code has %d configurations; rerun with UPDATE_DOCS=1 and commit it",
			sensitivityPath, len(page), err, len(jobs))
	}
	for i := range sim {
		if sim[i].cells == nil {
			sim[i].cells = page[i].cells
		}
	}
	for _, r := range unmoved(sim, field) {
		t.Errorf("%s at %s changes no cell of any table, and unmovable gives no reason", r.key, r.value)
	}
	if got := sensitivityDoc(sim, field); string(committed) != got {
		t.Errorf("%s differs from what the corpora give (or its thresholds from the code's defaults); rerun with UPDATE_DOCS=1 and commit it. Computed:\n%s", sensitivityPath, got)
	}
}

// simTableHeading is the heading of the simulator's table on the page.
const simTableHeading = "## The simulator's corpus week"

// movedInAny says whether row i differs from the defaults' in a cell of
// any of the borderline site's tables.
func movedInAny(field []borderlineTable, i int) bool {
	for _, ft := range field {
		if moved(ft.rows, i) {
			return true
		}
	}
	return false
}

// pageRows reads the table under heading back from the page: each row's
// threshold, value and cells, bold marks dropped.
func pageRows(doc, heading string) ([]sensitivityRow, error) {
	_, rest, ok := strings.Cut(doc, "\n"+heading+"\n")
	if !ok {
		return nil, fmt.Errorf("no %q", heading)
	}
	var rows []sensitivityRow
	lines := strings.Split(rest, "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "## ") {
			break
		}
		if !strings.HasPrefix(l, "| ") || strings.HasPrefix(l, "| threshold |") {
			continue
		}
		f := strings.Split(strings.Trim(l, "| "), " | ")
		if len(f) != 2+len(schema.Patterns) {
			return nil, fmt.Errorf("row %q has %d cells, not %d", l, len(f), 2+len(schema.Patterns))
		}
		r := sensitivityRow{key: strings.Trim(f[0], "`"), value: f[1], cells: map[schema.Pattern]string{}}
		for k, p := range schema.Patterns {
			r.cells[p] = strings.Trim(f[2+k], "*")
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// unmovable holds the thresholds that no case of either corpus can move,
// with the reason; sensitivityDoc prints it.
var unmovable = map[string]string{}

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
independent generator's borderline site (` + "`analyzer/internal/fieldgen`" + `, ` + "`Borderline`" + `: 30 hours
of six A100 nodes, one case per GPU at a time, each case's readings just inside or just outside one
threshold, labelled by what the workload is) in dcgm-exporter's default counters and in its
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
` + "`UPDATE_DOCS=1 go test ./analyzer/engine -run TestCorpusSensitivity`" + `, rewrites it). CI recomputes the
borderline site's tables whole, and the simulator's week under the defaults and every threshold the
borderline site does not move, and fails when this page differs from those rows or its threshold
and value columns from the code's defaults.

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
