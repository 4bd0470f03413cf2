package sim

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/configfile"
	"github.com/gpuwatch/gpuwatch/schema"
)

const okHead = `fleet:
  - hostname: n1
    model: A100-SXM4-80GB
    gpus: 4
`

func TestBadScenarios(t *testing.T) {
	cases := []struct {
		name string
		yml  string
		line int
		key  string
		msg  string
	}{
		{"unknown top-level key", okHead + "workload: []\n", 5, "workload", "unknown key"},
		{"unknown workload key", okHead + `workloads:
  - id: "1"
    user: u
    behavior: training
`, 8, "workloads[0].behavior", "unknown key"},
		{"wrong type", okHead + `workloads:
  - id: "1"
    gpus: zero
`, 7, "workloads[0].gpus", "cannot unmarshal"},
		{"unknown model", `fleet:
  - hostname: n1
    model: V100
`, 3, "fleet[0].model", "unknown model"},
		{"no fleet", "workloads: []\n", 1, "fleet", "at least one node"},
		{"idle util noise out of range", okHead + "noise: {idle_util_percent: 30}\n", 5, "noise.idle_util_percent", "between 0 and 10"},
		{"negative board spread", okHead + "noise:\n  board_idle_spread: -0.1\n", 6, "noise.board_idle_spread", "between 0 and 0.5"},
		{"duplicate host", `fleet:
  - hostnames: [a, b]
    model: L40S
  - hostname: a
    model: L40S
`, 4, "fleet[1].hostname", "defined twice"},
		{"too many GPUs", `fleet:
  - hostname: a
    model: L40S
    gpus: 64
`, 4, "fleet[0].gpus", "between 1 and 16"},
		{"unknown behaviour", okHead + `workloads:
  - {id: "1", user: u, node: n1, gpus: [0], duration: 1h,
     behaviour: trainin}
`, 7, "workloads[0].behaviour", `unknown behaviour "trainin"`},
		{"bad duration", okHead + `workloads:
  - id: "1"
    user: u
    node: n1
    gpus: [0]
    behaviour: training
    duration: 2 hours
`, 11, "workloads[0].duration", `duration "2 hours": want e.g.`},
		{"end before start", okHead + `workloads:
  - id: "1"
    user: u
    node: n1
    gpus: [0]
    behaviour: training
    start: 3h
    end: 2h
`, 12, "workloads[0].end", "must be after start"},
		{"GPU out of range", okHead + `workloads:
  - id: "1"
    user: u
    node: n1
    gpus: [0, 4]
    behaviour: training
    duration: 1h
`, 9, "workloads[0].gpus[1]", "out of range"},
		{"unknown node", okHead + `workloads:
  - id: "1"
    user: u
    node: n9
    gpus: [0]
    behaviour: training
    duration: 1h
`, 8, "workloads[0].node", `unknown node "n9"`},
		{"unknown pattern", okHead + `workloads:
  - id: "1"
    user: u
    node: n1
    gpus: [0]
    behaviour: training
    duration: 1h
    expect: [idle]
`, 12, "workloads[0].expect[0]", "unknown pattern"},
		{"overlap", okHead + `workloads:
  - {id: "1", user: u, node: n1, gpus: [0, 1], duration: 2h, behaviour: training}
  - id: "2"
    user: u
    node: n1
    gpus: [1]
    start: 1h
    duration: 1h
    behaviour: training
`, 10, "workloads[1].gpus", "overlaps workload 1"},
		{"notebook not interactive", okHead + `workloads:
  - id: "1"
    user: u
    node: n1
    gpus: [0]
    duration: 1h
    behaviour: idle_notebook
    kind: batch
`, 12, "workloads[0].kind", "needs kind interactive"},
		{"partial on one GPU", okHead + `workloads:
  - id: "1"
    user: u
    node: n1
    gpus: [0]
    duration: 1h
    behaviour: partial_gpus
`, 9, "workloads[0].gpus", "at least 2 GPUs"},
		{"param out of range", okHead + `workloads:
  - id: "1"
    user: u
    node: n1
    gpus: [0]
    duration: 1h
    behaviour: low_util
    params:
      util: 140
`, 13, "workloads[0].params.util", "between 0 and 100"},
		{"unknown param", okHead + `workloads:
  - id: "1"
    user: u
    node: n1
    gpus: [0]
    duration: 1h
    behaviour: low_util
    params:
      utilisation: 14
`, 13, "workloads[0].params.utilisation", "unknown key"},
		{"param of another behaviour", okHead + `workloads:
  - id: "1"
    user: u
    node: n1
    gpus: [0]
    duration: 1h
    behaviour: training
    params: {util: 90,
      delay: 5m}
`, 13, "workloads[0].params.delay", "not a parameter of behaviour training"},
		{"duplicate job on a node", okHead + `workloads:
  - {id: "1", user: u, node: n1, gpus: [0], duration: 1h, behaviour: training}
  - {id: "1", user: u, node: n1, gpus: [1], start: 2h,
     duration: 1h, behaviour: training}
`, 7, "workloads[1].id", "already runs on n1"},
		{"fleet too large", "fleet:\n  - hostnames: [" + manyHosts(300) + "]\n    model: H200\n    gpus: 16\n",
			1, "fleet", "4800 GPUs: a simulated fleet has at most 4096"},
		{"behavior typo", okHead + "workloads:\n  - id: \"1\"\n    behavor: training\n", 7, "workloads[0].behavor", `unknown key "behavor" (did you mean "behaviour"?)`},
		{"NaN util", okHead + "workloads:\n  - id: \"1\"\n    params:\n      util: .nan\n", 8, "workloads[0].params.util", "NaN and infinities are refused"},
		{"infinite cores", okHead + "workloads:\n  - id: \"1\"\n    params:\n      cpu_cores: -.inf\n", 8, "workloads[0].params.cpu_cores", "NaN and infinities are refused"},
		{"weeks", okHead + "workloads:\n  - {id: \"1\", user: u, node: n1, gpus: [0], behaviour: training, duration: 1w2x}\n", 6, "workloads[0].duration", `duration "1w2x"`},
		{"unknown fault", okHead + `faults:
  - kind: meltdown
    node: n1
`, 6, "faults[0].kind", "unknown fault kind"},
		{"xid without code", okHead + `faults:
  - kind: xid
    node: n1
    at: 1m
`, 6, "faults[0].xid", "XID code"},
		{"recurring window without duration", okHead + `faults:
  - kind: thermal_throttle
    node: n1
    every: 10m
`, 6, "faults[0].duration", "duration shorter than every"},
		{"MIG on a non-MIG GPU", okHead + `workloads:
  - id: "1"
    user: u
    node: n1
    mig: {gpu: 0, instance: 1}
    duration: 1h
    behaviour: training
`, 9, "workloads[0].mig.gpu", "not in MIG mode"},
		{"kubernetes fields on slurm", okHead + `workloads:
  - id: "1"
    user: u
    namespace: ml
    node: n1
    gpus: [0]
    duration: 1h
    behaviour: training
`, 8, "workloads[0].namespace", "for scheduler kubernetes"},
		{"bad origin", "origin: yesterday\n" + okHead, 1, "origin", "invalid time"},
		{"syntax error", okHead + "workloads: [\n", 5, "", "did not find expected"},
		{"two documents", okHead + "---\nname: x\n", 5, "", "more than one YAML document"},
		{"empty", "", 0, "", "empty scenario"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseScenario("bad.yaml", []byte(c.yml))
			if err == nil {
				t.Fatal("parsed without error")
			}
			var se *configfile.Error
			if !errors.As(err, &se) {
				t.Fatalf("error %T %v, want *configfile.Error", err, err)
			}
			if se.File != "bad.yaml" || se.Line != c.line || se.Path != c.key || !strings.Contains(se.Msg, c.msg) {
				t.Errorf("got file %q line %d key %q msg %q\nwant line %d key %q msg containing %q",
					se.File, se.Line, se.Path, se.Msg, c.line, c.key, c.msg)
			}
			if c.line > 0 && !strings.HasPrefix(err.Error(), "bad.yaml:"+itoa(c.line)+": ") {
				t.Errorf("message %q does not start with file:line", err)
			}
		})
	}
}

// TestScenarioEveryErrorCollected: one read reports every bad workload,
// each at its own file:line: key.
func TestScenarioEveryErrorCollected(t *testing.T) {
	doc := okHead + "workloads:\n  - {id: a, user: u, node: n1, gpus: [0], behaviour: training, duration: soon}\n" +
		"  - {id: b, user: u, node: n1, gpus: [1], behaviour: lazy, duration: 1h}\n"
	_, err := ParseScenario("s.yaml", []byte(doc))
	var errs configfile.Errors
	if !errors.As(err, &errs) || len(errs) != 2 {
		t.Fatalf("want 2 errors, got %v", err)
	}
	for i, w := range []string{"s.yaml:6: workloads[0].duration: ", "s.yaml:7: workloads[1].behaviour: "} {
		if !strings.HasPrefix(errs[i].Error(), w) {
			t.Errorf("error %d = %q, want prefix %q", i, errs[i], w)
		}
	}
}

// TestScenarioBadValuesOnOneLine: the field types name each bad value of
// a flow-style line at its own key, not all at the line's last one.
func TestScenarioBadValuesOnOneLine(t *testing.T) {
	doc := okHead + "workloads:\n  - {id: a, user: u, node: n1, gpus: [0], scheduler: pbs, behaviour: trainin, kind: daemon, start: 0s, duration: -1h, expect: [lazy]}\n"
	_, err := ParseScenario("s.yaml", []byte(doc))
	var errs configfile.Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %T %v, want configfile.Errors", err, err)
	}
	want := []string{
		`s.yaml:6: workloads[0].scheduler: unknown scheduler "pbs" (one of slurm, kubernetes)`,
		`s.yaml:6: workloads[0].behaviour: unknown behaviour "trainin"`,
		`s.yaml:6: workloads[0].kind: unknown kind "daemon" (one of batch, interactive, service)`,
		`s.yaml:6: workloads[0].duration: must be positive, got -1h`,
		`s.yaml:6: workloads[0].expect[0]: unknown pattern "lazy"`,
	}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(errs[i].Error(), w) {
			t.Errorf("error %d = %q, want prefix %q", i, errs[i], w)
		}
	}
}

func manyHosts(n int) string {
	h := make([]string, n)
	for i := range h {
		h[i] = "h" + strconv.Itoa(i)
	}
	return strings.Join(h, ", ")
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestParseDuration(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"90s", 90 * time.Second, true}, {"2h", 2 * time.Hour, true}, {"3d", 72 * time.Hour, true},
		{"1d12h", 36 * time.Hour, true}, {"-2h", -2 * time.Hour, true}, {"0s", 0, true},
		{"1.5d", 0, false}, {"2w", 14 * 24 * time.Hour, true}, {"+1d", 24 * time.Hour, true}, {"d", 0, false}, {"2 hours", 0, false}, {"", 0, false},
		{"-", 0, false}, {"1d-2h", 0, false}, {"99999d", 0, false},
	}
	for _, c := range cases {
		got, err := parseDuration(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("parseDuration(%q) = %v, %v; want %v ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestLoadScenarioErrors(t *testing.T) {
	if _, err := LoadScenario(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
	p := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(p, []byte(okHead+"bogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadScenario(p); err == nil || !strings.HasPrefix(err.Error(), p+":5: bogus: ") {
		t.Errorf("error %v does not name %s:5 and the key", err, p)
	}
	if _, err := Builtin("nope"); err == nil || !strings.Contains(err.Error(), "corpus") {
		t.Errorf("unknown built-in: %v", err)
	}
}

func TestShippedScenarios(t *testing.T) {
	names := BuiltinNames()
	for _, want := range []string{"corpus", "default", "throttling-xid"} {
		if !contains(names, want) {
			t.Errorf("scenario %s not shipped (have %v)", want, names)
		}
	}
	files, _ := filepath.Glob("scenarios/*.yaml")
	if len(files) != len(names) {
		t.Errorf("files %v vs embedded %v", files, names)
	}
	for _, f := range files {
		if _, err := LoadScenario(f); err != nil {
			t.Errorf("%v", err)
		}
	}
	count := func(sc *Scenario) (map[string]int, int) {
		pat := map[string]int{}
		healthy := 0
		for _, e := range sc.Expectations() {
			if e.Healthy() {
				healthy++
			}
			for _, p := range e.Patterns {
				pat[p]++
			}
		}
		return pat, healthy
	}

	def := DefaultScenario()
	if len(def.Nodes) != 4 {
		t.Errorf("default: %d nodes, want 4", len(def.Nodes))
	}
	gpus, models := 0, map[string]bool{}
	for _, n := range def.Nodes {
		gpus += n.GPUs
		models[n.Model.Key] = true
	}
	if gpus != 32 || len(models) != 2 {
		t.Errorf("default: %d GPUs of %d models, want 32 of 2", gpus, len(models))
	}
	pat, healthy := count(def)
	for _, p := range schema.Patterns {
		if pat[string(p)] < 1 {
			t.Errorf("default: no %s workload", p)
		}
	}
	if healthy < 3 {
		t.Errorf("default: %d healthy workloads", healthy)
	}
	kinds := map[FaultKind]bool{}
	for _, f := range def.Faults {
		kinds[f.Kind] = true
	}
	if !kinds[ThermalThrottle] || !kinds[XID] {
		t.Errorf("default: faults %v, want a thermal throttle and an XID", kinds)
	}

	corpus, err := Builtin("corpus")
	if err != nil {
		t.Fatal(err)
	}
	pat, healthy = count(corpus)
	if n := len(corpus.Workloads); n < 120 {
		t.Errorf("corpus: %d allocations, want >= 120", n)
	}
	for _, p := range schema.Patterns {
		if pat[string(p)] < 8 {
			t.Errorf("corpus: %s %d times, want >= 8", p, pat[string(p)])
		}
	}
	if healthy < 20 {
		t.Errorf("corpus: %d healthy allocations, want >= 20", healthy)
	}
	models, counts, nodes := map[string]bool{}, map[int]bool{}, map[string]bool{}
	for _, e := range corpus.Expectations() {
		models[e.Model], counts[e.GPUs], nodes[e.Hostname] = true, true, true
		// Jobs may start before the week and run past its end (the
		// analysis window cuts them), but each is seen in it.
		if e.StartOffset >= 7*24*time.Hour || e.EndOffset <= 0 {
			t.Errorf("corpus: %s/%s outside the week", e.Hostname, e.Job)
		}
		if !e.ProcessEnd.IsZero() && e.ProcessEnd.Sub(e.Start) > 7*24*time.Hour {
			t.Errorf("corpus: orphan %s outlives the week", e.Job)
		}
		// Ground truth must match the behaviour: a job labelled with a
		// pattern its behaviour does not produce, or the reverse, is a bug.
		want := behaviourPattern[Behaviour(e.Behaviour)]
		// Borderline cases show a wasteful behaviour just short of its
		// threshold (a few minutes of staging, a short hang): healthy.
		borderline := e.Healthy()
		switch {
		case want == "" && !e.Healthy():
			t.Errorf("corpus: healthy behaviour %s of %s labelled %v", e.Behaviour, e.Job, e.Patterns)
		case want != "" && !borderline && !contains(e.Patterns, want):
			t.Errorf("corpus: %s (%s) expects %v, want %s", e.Job, e.Behaviour, e.Patterns, want)
		}
		if len(e.Patterns) > 1 {
			t.Errorf("corpus: %s has several patterns %v; keep the corpus unambiguous", e.Job, e.Patterns)
		}
		end := min(e.EndOffset, 7*24*time.Hour)
		if e.Behaviour != string(Overlong) && e.Kind != schema.KindService && end-e.StartOffset >= 48*time.Hour {
			t.Errorf("corpus: %s runs %s: past the 48h tier maximum but not labelled overlong",
				e.Job, e.EndOffset-e.StartOffset)
		}
	}
	if len(models) < 4 || len(counts) < 4 || len(nodes) < 4 {
		t.Errorf("corpus: %d models, %d GPU counts, %d nodes", len(models), len(counts), len(nodes))
	}
}

// behaviourPattern is the pattern each wasteful behaviour exhibits.
var behaviourPattern = map[Behaviour]string{
	CPUOnly: "cpu_only", PartialGPUs: "over_requested", HungCollective: "stuck", StuckIdle: "stuck",
	StartupDelay: "startup_overhead", IdleNotebook: "idle_session", LowUtil: "low_utilization",
	Overlong: "overlong", Orphan: "orphan_process",
}

func TestExpectations(t *testing.T) {
	sc, err := ParseScenario("e.yaml", []byte(okHead+`workloads:
  - {id: "9", user: u, account: acct, team: t, node: n1, gpus: [1, 2], start: 2h, duration: 3h, behaviour: orphan,
     params: {orphan_for: 1h}, expect: [orphan_process]}
  - {id: p, scheduler: kubernetes, namespace: ns, user: v, node: n1, gpus: [0], start: 0s, end: 1d, behaviour: training}
`))
	if err != nil {
		t.Fatal(err)
	}
	origin := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	got := sc.ExpectationsAt(origin)
	if len(got) != 2 {
		t.Fatalf("%d expectations", len(got))
	}
	e := got[0]
	if e.Hostname != "n1" || e.Job != "9" || e.GPUs != 2 || e.Kind != "batch" || e.Team != "t" || e.Account != "acct" ||
		e.Model != "NVIDIA A100-SXM4-80GB" || len(e.Patterns) != 1 || e.Patterns[0] != "orphan_process" ||
		!e.Start.Equal(origin.Add(2*time.Hour)) || !e.End.Equal(origin.Add(5*time.Hour)) ||
		!e.ProcessEnd.Equal(origin.Add(6*time.Hour)) || e.Scheduler != "slurm" {
		t.Errorf("orphan expectation %+v", e)
	}
	k := got[1]
	if k.Job != "ns/p" || !k.Healthy() || k.Patterns == nil || k.Scheduler != "kubernetes" || k.Team != "" ||
		k.EndOffset != 24*time.Hour {
		t.Errorf("healthy expectation %+v", k)
	}
	// The source's origin and the expectations agree on when a job holds its GPUs.
	src, clk := newSimFrom(t, sc, 1)
	exp := sc.ExpectationsAt(src.Origin())
	clk.t = exp[0].Start.Add(time.Minute)
	s, _ := src.Collect(t.Context())
	if a := allocationsOn(s, gpu(t, s, 1).Key()); len(a) != 1 || a[0].JobID() != exp[0].Job || !a[0].Start.Equal(exp[0].Start) {
		t.Errorf("allocation %+v vs expectation start %s", a, exp[0].Start)
	}
}

func FuzzParseScenario(f *testing.F) {
	// The small shipped scenarios seed the corpus; the 12 KB corpus.yaml
	// would make minimisation crawl.
	for _, p := range []string{"scenarios/default.yaml", "scenarios/throttling-xid.yaml"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(okHead + "workloads: [{id: x, user: u, node: n1, gpus: [0], duration: 1h, behaviour: orphan}]\n"))
	f.Add([]byte(okHead + "faults: [{kind: xid, node: n1, xid: 79, every: 1s}]\nrepeat: 1h\n"))
	f.Add([]byte("fleet: [{hostname: a, model: H200, mig: [{gpu: 0, profiles: [1g.18gb]}]}]\n"))
	f.Add([]byte(okHead + "faults: [{kind: field_error, node: n1, field: memory, gpus: [1], at: 1m, duration: 1h}]\n"))
	f.Add([]byte("{{{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := ParseScenario("fuzz.yaml", data)
		if err != nil {
			var se *configfile.Error
			if !errors.As(err, &se) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		// A scenario that parses must simulate without panicking.
		clk := &fakeClock{t: testOrigin}
		src, err := New(sc, Options{Seed: 1, Clock: clk})
		if err != nil {
			return
		}
		for _, off := range []time.Duration{0, time.Hour, 50 * time.Hour} {
			clk.t = testOrigin.Add(off)
			if _, err := src.CollectAll(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		_ = sc.Expectations()
	})
}
