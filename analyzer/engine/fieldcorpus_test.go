package engine

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/fieldgen"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/analyzer/query/promapi"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// The independent corpus (analyzer/internal/fieldgen): field-shaped
// workloads written apart from the simulator, two clusters in one store,
// labelled from the field's definitions. These tests score the analyzer on
// it, variant by variant.

var fieldOrigin = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

// fieldDB replays the corpus in format f into a fresh embedded store, and
// also into each of also.
func fieldDB(t *testing.T, site *fieldgen.Site, f fieldgen.Format, also ...fieldgen.Sink) *embedded.DB {
	t.Helper()
	db, err := embedded.Open(filepath.Join(t.TempDir(), "tsdb"), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := replaySite(db, site, f, also...); err != nil {
		t.Fatal(err)
	}
	return db
}

// replaySite replays the site in format f into db, and also into each of
// also.
func replaySite(db *embedded.DB, site *fieldgen.Site, f fieldgen.Format, also ...fieldgen.Sink) error {
	ctx := context.Background()
	app := db.Appender()
	return site.Replay(fieldOrigin, 11, f, func(ts time.Time, fams []*dto.MetricFamily) error {
		if err := app.AppendFamilies(ctx, ts, fams); err != nil {
			return err
		}
		for _, s := range also {
			if err := s(ts, fams); err != nil {
				return err
			}
		}
		return nil
	})
}

// cachedFieldDB is fieldDB of the field corpus through the replay cache:
// variant names the format (its Exporter is code, which a key cannot
// print), and this file, which defines the variants, is among the inputs.
func cachedFieldDB(t *testing.T, variant string, f fieldgen.Format) *embedded.DB {
	t.Helper()
	r := testtool.Replay{Name: "field-corpus-" + variant,
		Packages: []string{"github.com/gpuwatch/gpuwatch/analyzer/internal/fieldgen", "github.com/gpuwatch/gpuwatch/analyzer/query/embedded"},
		Files:    []string{"analyzer/engine/fieldcorpus_test.go"},
		Extra: fmt.Sprintf("fieldgen.Corpus(), %s: DCP %v SM %v exporter %v honor_labels false %v restart %s interval %s",
			variant, f.DCP, f.SM, f.Exporter != nil, f.HonorLabelsFalse, f.Restart, f.Interval)}
	dir := filepath.Join(t.TempDir(), "tsdb")
	if _, err := testtool.CachedReplay(t, r, dir, func(dir string) error {
		db, err := embedded.Open(dir, embedded.Options{})
		if err != nil {
			return err
		}
		ctx := context.Background()
		app := db.Appender()
		err = fieldgen.Corpus().Replay(fieldOrigin, 11, f, func(ts time.Time, fams []*dto.MetricFamily) error {
			return app.AppendFamilies(ctx, ts, fams)
		})
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	db, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// analyzeSpan is a one-shot analysis of [from, to) from q under cfg.
func analyzeSpan(t *testing.T, q query.Querier, cfg config.Config, from, to time.Time) Analysis {
	t.Helper()
	e, err := New(Options{Querier: q, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	a, err := e.AnalyzeWindow(context.Background(), from, to)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func analyzeSite(t *testing.T, q query.Querier, site *fieldgen.Site) Analysis {
	t.Helper()
	return analyzeSpan(t, q, config.Default(), fieldOrigin, fieldOrigin.Add(site.Span))
}

// fieldScore is how the analyzer did on the corpus' labels.
type fieldScore struct {
	labels, found int
	// per pattern: findings, and those a label or an accepted reading
	// backs; labels, and those found.
	findings, backed    map[string]int
	patLabels, patFound map[string]int
	// hours: labelled allocations whose GPU-hours are off by more than
	// 15 %, with the figures.
	hoursOff []string
	missed   []string
	false_   []string
}

func (s fieldScore) recall() float64 { return float64(s.found) / float64(max(1, s.labels)) }

func (s fieldScore) precision(p string) float64 {
	if s.findings[p] == 0 {
		return 1
	}
	return float64(s.backed[p]) / float64(s.findings[p])
}

func (s fieldScore) String() string {
	var ps []string
	for p := range s.findings {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	var b strings.Builder
	fmt.Fprintf(&b, "recall %d/%d = %.3f;", s.found, s.labels, s.recall())
	for _, p := range ps {
		fmt.Fprintf(&b, " %s precision %d/%d", p, s.backed[p], s.findings[p])
	}
	for _, m := range s.missed {
		fmt.Fprintf(&b, "\n  missed: %s", m)
	}
	for _, f := range s.false_ {
		fmt.Fprintf(&b, "\n  false: %s", f)
	}
	for _, h := range s.hoursOff {
		fmt.Fprintf(&b, "\n  hours: %s", h)
	}
	return b.String()
}

// waste patterns are scored; health findings are never waste and the
// corpus has no health case.
func scoreSite(site *fieldgen.Site, fs []finding.Finding) fieldScore {
	s := fieldScore{findings: map[string]int{}, backed: map[string]int{}, patLabels: map[string]int{}, patFound: map[string]int{}}
	byJob := map[string][]finding.Finding{}
	for _, f := range fs {
		if f.Pattern.Health() {
			continue
		}
		byJob[f.Job] = append(byJob[f.Job], f)
		s.findings[string(f.Pattern)]++
	}
	works := map[string]*fieldgen.Work{}
	for i := range site.Work {
		works[site.Work[i].Holder.Job()] = &site.Work[i]
	}
	for job, jfs := range byJob {
		w := works[job]
		for _, f := range jfs {
			ok := w != nil && slices.Contains(w.Also, f.Pattern)
			if w != nil {
				for _, l := range w.Waste {
					ok = ok || l.Pattern == f.Pattern
				}
			}
			if ok {
				s.backed[string(f.Pattern)]++
			} else {
				s.false_ = append(s.false_, fmt.Sprintf("%s %s (%.1f GPU-h, %s)", f.Pattern, job, f.WastedGPUHours, f.Action))
			}
		}
	}
	for _, w := range site.Work {
		for _, l := range w.Waste {
			s.labels++
			s.patLabels[string(l.Pattern)]++
			var got *finding.Finding
			for i, f := range byJob[w.Holder.Job()] {
				if f.Pattern == l.Pattern {
					got = &byJob[w.Holder.Job()][i]
				}
			}
			if got == nil {
				s.missed = append(s.missed, fmt.Sprintf("%s %s (%s)", l.Pattern, w.Holder.Job(), w.Case))
				continue
			}
			s.found++
			s.patFound[string(l.Pattern)]++
			if math.Abs(got.WastedGPUHours-l.GPUHours) > 0.15*l.GPUHours {
				s.hoursOff = append(s.hoursOff, fmt.Sprintf("%s %s: %.2f GPU-h, labelled %.2f (%s)", l.Pattern, w.Holder.Job(), got.WastedGPUHours, l.GPUHours, w.Case))
			}
		}
	}
	sort.Strings(s.false_)
	return s
}

// reclaims are the patterns whose default action reclaims or kills: their
// precision must be 1.
var reclaims = []string{string(schema.CPUOnly), string(schema.Stuck), string(schema.IdleSession), string(schema.OverRequested)}

func checkSite(t *testing.T, what string, s fieldScore) {
	t.Helper()
	t.Logf("%s: %s", what, s)
	if s.recall() < 0.95 {
		t.Errorf("%s: recall %.3f, want ≥ 0.95", what, s.recall())
	}
	for p := range s.findings {
		want := 0.97
		if slices.Contains(reclaims, p) {
			want = 1
		}
		if s.precision(p) < want {
			t.Errorf("%s: %s precision %.3f, want ≥ %.2f", what, p, s.precision(p), want)
		}
	}
	if len(s.hoursOff) > 0 {
		t.Errorf("%s: %d labelled allocations' GPU-hours off by more than 15 %%", what, len(s.hoursOff))
	}
}

// TestCorpusField scores the analyzer on the independent corpus in each
// variant: dcgm-exporter's default counters; its 4.x DCP set (no
// SM_ACTIVE); the exporter's own pod on the series under three installs'
// names, with honor_labels false and true; and the mixed 15/30/60 s store
// against its one-interval twin (same findings, GPU-hours ±2 %). Both
// clusters share the store in every variant.
func TestCorpusField(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 36 hours of two clusters")
	}
	if testtool.Race {
		t.Skip("the corpus runs without -race: scripts/test.sh runs TestCorpus* in its own step")
	}
	site := fieldgen.Corpus()
	variants := map[string]fieldgen.Format{
		"default counters": {Restart: 11 * time.Hour},
		"DCP 4.x":          {DCP: true, Restart: 11 * time.Hour},
	}
	for name, scheme := range fieldgen.ExporterSchemes {
		variants["exporter "+name+", honor_labels false"] = fieldgen.Format{DCP: true, Restart: 11 * time.Hour, Exporter: fieldgen.OnKubernetes(scheme), HonorLabelsFalse: true}
		variants["exporter "+name+", honor_labels true"] = fieldgen.Format{Restart: 11 * time.Hour, Exporter: fieldgen.OnKubernetes(scheme)}
	}
	names := make([]string, 0, len(variants))
	for n := range variants {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Run(n, func(t *testing.T) {
			a := analyzeSite(t, cachedFieldDB(t, n, variants[n]), site)
			checkSite(t, n, scoreSite(site, a.Findings))
			if f := variants[n]; f.Exporter != nil {
				for _, f := range a.Findings {
					if f.Namespace == "monitoring" || f.Namespace == "gpu-operator" || f.Namespace == "ops" {
						t.Errorf("the exporter's own pod taken for a job: %s", f.Key())
					}
				}
			}
		})
	}
	t.Run("mixed intervals against one", func(t *testing.T) {
		mixed := analyzeSite(t, cachedFieldDB(t, "mixed intervals", fieldgen.Format{}), site)
		one := analyzeSite(t, cachedFieldDB(t, "one interval", fieldgen.Format{Interval: 15 * time.Second}), site)
		checkSite(t, "one interval (15 s)", scoreSite(site, one.Findings))
		sameAnalysis(t, "15/30/60 s vs 15 s", one, mixed)
	})
}

// TestCorpusFieldPrometheus: the DCP variant through a real Prometheus
// and a real VictoriaMetrics scores as through the embedded store.
func TestCorpusFieldPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 36 hours of two clusters")
	}
	if testtool.Race {
		t.Skip("the corpus runs without -race: scripts/test.sh runs TestCorpus* in its own step")
	}
	needProm(t)
	site := fieldgen.Corpus()
	dir := t.TempDir()
	om := simload.NewOpenMetrics(dir)
	f := fieldgen.Format{DCP: true, Restart: 11 * time.Hour}
	sinks := []fieldgen.Sink{fieldgen.Sink(om.Sink)}
	vm, err := startVictoria(t, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sinks = append(sinks, fieldgen.Sink(vm.sink))
	db := fieldDB(t, site, f, sinks...)
	path := filepath.Join(dir, "field.om")
	if err := om.Close(path); err != nil {
		t.Fatal(err)
	}
	if err := vm.flush(); err != nil {
		t.Fatal(err)
	}
	if err := vm.ready(); err != nil {
		t.Fatal(err)
	}
	emb := analyzeSite(t, db, site)
	for name, url := range map[string]string{"Prometheus": startPrometheus(t, path).url, "VictoriaMetrics": vm.url} {
		c, err := promapi.New(url, promapi.Options{Timeout: 2 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		got := analyzeSite(t, c, site)
		checkSite(t, name, scoreSite(site, got.Findings))
		sameAnalysis(t, name+" vs embedded", emb, got)
	}
}
