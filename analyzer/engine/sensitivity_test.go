package engine

import (
	"context"
	"flag"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/schema"
)

var update = flag.Bool("update", false, "rewrite docs/sensitivity.md from the corpus")

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

// sensitivityRow is one configuration's scores.
type sensitivityRow struct {
	key, value string
	sc         map[schema.Pattern]*score
}

// TestCorpusSensitivity moves each detector threshold 25 % down and up,
// one at a time, scores the corpus (gpuwatch's own counters) with it, and
// requires docs/sensitivity.md to hold exactly that table: CI recomputes
// it, so the committed figures are what the code does. -update rewrites the
// file.
func TestCorpusSensitivity(t *testing.T) {
	f := getFixture(t)
	exps := f.c.sc.ExpectationsAt(f.c.origin)
	base := corpusConfig()
	type job struct {
		key   string
		value string
		cfg   config.Config
	}
	var jobs []job
	jobs = append(jobs, job{key: "defaults", value: "", cfg: corpusConfig()})
	for _, k := range knobs(&base) {
		for _, m := range []float64{0.75, 1.25} {
			c := corpusConfig() // a fresh copy, maps included
			var target knob
			for _, x := range knobs(&c) {
				if x.key == k.key {
					target = x
				}
			}
			target.set(k.get() * m)
			jobs = append(jobs, job{key: k.key, value: fmt.Sprintf("%s (%+d %%)", target.format(target.get()), int(m*100)-100), cfg: c})
		}
	}
	rows := make([]sensitivityRow, len(jobs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	errs := make(chan error, len(jobs))
	start := time.Now()
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			e, err := New(Options{Querier: f.native, Config: j.cfg})
			if err != nil {
				errs <- err
				return
			}
			fs, err := e.Analyze(context.Background(), f.c.origin, f.c.origin.Add(f.c.span))
			if err != nil {
				errs <- fmt.Errorf("%s %s: %w", j.key, j.value, err)
				return
			}
			rows[i] = sensitivityRow{key: j.key, value: j.value, sc: scoreFindings(exps, fs, nil, nil)}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d analyses of the corpus week in %s", len(jobs), time.Since(start).Round(time.Millisecond))
	got := sensitivityDoc(rows)
	if *update {
		if err := os.WriteFile(sensitivityPath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(sensitivityPath)
	if err != nil {
		t.Fatalf("%v (go test ./analyzer/engine -run TestCorpusSensitivity -update writes it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from what the corpus gives; rerun with -update and commit it. Computed:\n%s", sensitivityPath, got)
	}
	// The defaults must hold the acceptance on this table too.
	check(t, rows[0].sc)
}

func sensitivityDoc(rows []sensitivityRow) string {
	var b strings.Builder
	b.WriteString(`# Threshold sensitivity

Precision and recall per pattern on the labelled corpus week
(` + "`exporter/sim/scenarios/corpus.yaml`" + `, gpuwatch's own counters, idle noise on) when one
detector threshold moves 25 % down or up and every other keeps its default (the run-time
limits, which gpuwatch builds in none of, are the corpus site's: batch 48h, interactive 24h). Percentages and
ratios are capped at their range. Each cell is precision / recall; "–" is a pattern with no
labelled case and no finding. Rows where a cell differs from the defaults show which
thresholds the corpus' borderline cases (within 20 % of a threshold, on both sides) pin down.
gpuwatch's own counters carry SM activity, which the idle and light-use rules prefer to util, so
the util-only thresholds (` + "`low_utilization.max_mean_util_percent`" + `) act on the stock
dcgm-exporter variants, not here.

Generated by ` + "`TestCorpusSensitivity`" + ` in ` + "`analyzer/engine`" + `, which recomputes it in CI and
fails when this file differs (` + "`go test ./analyzer/engine -run TestCorpusSensitivity -update`" + `
rewrites it).

`)
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
		fmt.Fprintf(&b, "| %s | %s |", key, r.value)
		for _, p := range schema.Patterns {
			cell := cellOf(r.sc[p])
			if r.key != "defaults" && cell != cellOf(base.sc[p]) {
				cell = "**" + cell + "**"
			}
			b.WriteString(" " + cell + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func cellOf(s *score) string {
	if s.tp+s.fp+s.fn == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f / %.2f", s.precision(), s.recall())
}
