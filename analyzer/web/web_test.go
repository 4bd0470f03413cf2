package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/schema"
)

func fixtureHandler() http.Handler {
	return Handler(Options{
		Findings: fakeFindings{fs: fixtureFindings()},
		Audit:    fakeAudit{es: fixtureAudit()},
		Reports:  fixtureReports(),
		Now:      func() time.Time { return fixtureNow },
		Title:    "demo cluster",
	})
}

func get(t *testing.T, h http.Handler, target string) (int, http.Header, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	return rec.Code, rec.Header(), rec.Body.String()
}

var rowRE = regexp.MustCompile(`<tr class="finding" data-pattern="([a-z_]+)" data-team="([^"]*)" data-node="([^"]*)">\s*<td>.*\s*<td><b class="nw">([^<]*)</b>`)

// rows returns "pattern team node job" for each finding row, in page order.
func rows(body string) []string {
	var out []string
	for _, m := range rowRE.FindAllStringSubmatch(body, -1) {
		out = append(out, strings.Join(m[1:], " "))
	}
	return out
}

func TestFindingsFilters(t *testing.T) {
	h := fixtureHandler()
	cases := []struct {
		query  string
		want   []string
		wasted string
	}{
		{"/", []string{
			"low_utilization platform gpu-h100-02 ml-serving/embedder-7d9f",
			"cpu_only vision gpu-a100-01 481920",
			"over_requested vision gpu-a100-02 481650",
			"stuck nlp gpu-h100-01 481777",
			"overlong vision gpu-h100-01 480012",
			"idle_session speech gpu-h100-02 jupyter/jupyter-dave",
			"cpu_only nlp gpu-h100-01 481955",
			"startup_overhead speech gpu-a100-01 481901",
			"orphan_process nlp gpu-a100-02 479990",
		}, "177.5"}, // the orphan's 1.5 GPU-hours apart, as the accounting counts them
		{"/?team=vision", []string{
			"cpu_only vision gpu-a100-01 481920", "over_requested vision gpu-a100-02 481650", "overlong vision gpu-h100-01 480012",
		}, "86.0"},
		{"/?pattern=cpu_only", []string{"cpu_only vision gpu-a100-01 481920", "cpu_only nlp gpu-h100-01 481955"}, "43.0"},
		{"/?node=gpu-h100-01", []string{"stuck nlp gpu-h100-01 481777", "overlong vision gpu-h100-01 480012", "cpu_only nlp gpu-h100-01 481955"}, "43.0"},
		{"/?team=nlp&pattern=cpu_only&node=gpu-h100-01", []string{"cpu_only nlp gpu-h100-01 481955"}, "5.0"},
		{"/?team=nlp&node=gpu-a100-01", nil, "0.0"},
		{"/?team=nobody", nil, "0.0"},
	}
	for _, c := range cases {
		t.Run(c.query, func(t *testing.T) {
			code, hdr, body := get(t, h, c.query)
			if code != http.StatusOK {
				t.Fatalf("status %d", code)
			}
			if ct := hdr.Get("Content-Type"); ct != "text/html; charset=utf-8" {
				t.Errorf("content type %q", ct)
			}
			if got := rows(body); !reflect.DeepEqual(got, c.want) {
				t.Errorf("rows\n%q\nwant\n%q", got, c.want)
			}
			if !strings.Contains(body, `<b id="wasted">`+c.wasted+`</b>`) {
				t.Errorf("summary does not show %s GPU-hours wasted", c.wasted)
			}
			if c.want == nil && !strings.Contains(body, `id="empty"`) {
				t.Error("an empty selection must say so")
			}
			// The same selection through the JSON endpoint.
			_, _, js := get(t, h, strings.Replace(c.query, "/", "/findings.json", 1))
			var doc struct{ Findings []finding.Finding }
			if err := json.Unmarshal([]byte(js), &doc); err != nil {
				t.Fatal(err)
			}
			if len(doc.Findings) != len(c.want) {
				t.Errorf("findings.json has %d findings, want %d", len(doc.Findings), len(c.want))
			}
		})
	}
}

func TestFilterFormKeepsSelection(t *testing.T) {
	_, _, body := get(t, fixtureHandler(), "/?team=speech&pattern=idle_session")
	for _, want := range []string{
		`<option selected>speech</option>`,
		`<option value="idle_session" selected>Idle session</option>`,
		`<a class="reset" href="/">Clear</a>`,
		// a team link keeps the other filters
		`href="/?pattern=idle_session&amp;team=speech"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	// Every team, node and pattern is offered, whatever the selection.
	for _, want := range []string{">nlp</option>", ">platform</option>", ">gpu-a100-02</option>", `value="orphan_process"`} {
		if !strings.Contains(body, want) {
			t.Errorf("filter form lacks %s", want)
		}
	}
}

func TestTableIsBounded(t *testing.T) {
	h := Handler(Options{Findings: fakeFindings{fs: fixtureFindings()}, MaxRows: 3})
	_, _, body := get(t, h, "/")
	if got := rows(body); len(got) != 3 || got[0] != "low_utilization platform gpu-h100-02 ml-serving/embedder-7d9f" {
		t.Fatalf("rows %q, want the 3 largest", got)
	}
	if !strings.Contains(body, "Showing the 3 largest of 9 findings") || !strings.Contains(body, `<b id="wasted">177.5</b>`) {
		t.Error("a bounded table must say so, and the totals still cover every finding")
	}
	if _, _, body := get(t, fixtureHandler(), "/"); strings.Contains(body, `id="truncated"`) {
		t.Error("an unbounded table says it is truncated")
	}
}

func TestBadFilterIsRejected(t *testing.T) {
	code, _, body := get(t, fixtureHandler(), "/?pattern=cpu-only")
	if code != http.StatusBadRequest || !strings.Contains(body, `unknown pattern &#34;cpu-only&#34;`) {
		t.Fatalf("status %d, body lacks the reason", code)
	}
	code, _, body = get(t, fixtureHandler(), "/findings.json?pattern=nope")
	if code != http.StatusBadRequest || !strings.Contains(body, "unknown pattern") {
		t.Fatalf("json: status %d body %s", code, body)
	}
}

func TestPageEscapesData(t *testing.T) {
	fs := fixtureFindings()
	fs[0].JobName = "<script>alert(1)</script>"
	h := Handler(Options{Findings: fakeFindings{fs: fs}})
	_, hdr, body := get(t, h, "/")
	if strings.Contains(body, "<script>alert(1)</script>") || !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("a job name is not escaped")
	}
	if csp := hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
		t.Errorf("CSP %q", csp)
	}
}

func TestSourceErrors(t *testing.T) {
	h := Handler(Options{Findings: fakeFindings{err: errBoom}, Now: func() time.Time { return fixtureNow }})
	code, _, body := get(t, h, "/")
	if code != http.StatusInternalServerError || !strings.Contains(body, "could not read the findings") {
		t.Fatalf("status %d", code)
	}
	if strings.Contains(body, errBoom.Error()) {
		t.Error("internal error text leaks to the page")
	}
	// Sources left out: the pages say so instead of failing.
	for _, p := range []string{"/audit", "/reports"} {
		code, _, body := get(t, h, p)
		if code != http.StatusOK || !strings.Contains(body, "not configured") {
			t.Errorf("%s: status %d", p, code)
		}
	}
	if code, _, _ := get(t, h, "/reports/vision"); code != http.StatusNotFound {
		t.Errorf("report without a source: status %d", code)
	}
}

var auditRowRE = regexp.MustCompile(`<tr class="entry">\s*<td>([^<]*)</td><td><b>([^<]*)</b></td>\s*<td class="st-([a-z_]+)">`)

func TestAuditPage(t *testing.T) {
	h := fixtureHandler()
	cases := []struct {
		query string
		want  []string
	}{
		{"/audit", []string{"2026-11-27 13:55 reclaim dry_run", "2026-11-27 13:25 checkpoint done", "2026-11-27 13:24 checkpoint intended",
			"2026-11-27 12:55 warn done", "2026-11-27 12:30 warn failed"}},
		{"/audit?job=481777", []string{"2026-11-27 13:25 checkpoint done", "2026-11-27 13:24 checkpoint intended"}},
		{"/audit?job=none", nil},
	}
	for _, c := range cases {
		t.Run(c.query, func(t *testing.T) {
			code, _, body := get(t, h, c.query)
			if code != http.StatusOK {
				t.Fatalf("status %d", code)
			}
			var got []string
			for _, m := range auditRowRE.FindAllStringSubmatch(body, -1) {
				got = append(got, strings.Join(m[1:], " "))
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("entries\n%q\nwant\n%q", got, c.want)
			}
		})
	}
	h = Handler(Options{Audit: fakeAudit{es: fixtureAudit()}, AuditLimit: 2})
	if _, _, body := get(t, h, "/audit"); strings.Count(body, `<tr class="entry">`) != 2 {
		t.Error("AuditLimit is not applied")
	}
}

func TestReportsPages(t *testing.T) {
	h := fixtureHandler()
	_, _, body := get(t, h, "/reports")
	links := regexp.MustCompile(`<a href="(/reports/[^"]+)">`).FindAllStringSubmatch(body, -1)
	var got []string
	for _, l := range links {
		got = append(got, l[1])
	}
	if want := []string{"/reports/_fleet", "/reports/nlp", "/reports/vision"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("report links %q, want %q", got, want)
	}
	if !strings.Contains(body, "<td class=\"num\">24%</td>") { // vision: 480.5 of 2016
		t.Error("wasted share of vision's report missing")
	}
	cases := []struct {
		path string
		code int
		want string
	}{
		{"/reports/vision", 200, "Report 2026-W47 vision"},
		{"/reports/_fleet", 200, "Report 2026-W47 </h1>"},
		{"/reports/speech", 404, "no report"},
		{"/nope", 404, ""},
	}
	for _, c := range cases {
		code, _, body := get(t, h, c.path)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s: status %d, body %.80q", c.path, code, body)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader("x")))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /: status %d", rec.Code)
	}
}

// TestStoreAndAuditAdapters wires the real store and audit log.
func TestStoreAndAuditAdapters(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fs := fixtureFindings()
	old := fixtureNow.Add(-3 * time.Hour)
	if err := st.SaveFindings(ctx, old, fs[:2]); err != nil { // a cycle three hours ago
		t.Fatal(err)
	}
	fs[1].WastedGPUHours = 27 // the stuck job, seen again by the newest cycle
	if err := st.SaveFindings(ctx, fixtureNow, fs[1:3]); err != nil {
		t.Fatal(err)
	}
	src := StoreFindings{Store: st, Window: time.Hour, Now: func() time.Time { return fixtureNow }}
	got, err := src.CurrentFindings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Job != "481650" || got[1].Job != "481777" || got[1].WastedGPUHours != 27 {
		t.Fatalf("current findings %+v", got)
	}

	log, err := audit.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	rec := audit.Record{Key: "k1", FindingKey: fs[1].Key(), Step: "checkpoint", Actuator: "slurm", Hostname: fs[1].Hostname,
		Job: fs[1].Job, User: fs[1].User, Team: fs[1].Team, Pattern: string(fs[1].Pattern), Tier: "development"}
	if _, _, err := log.Intend(ctx, rec, fixtureNow.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := log.Finish(ctx, "k1", audit.Done, "signalled", fixtureNow); err != nil {
		t.Fatal(err)
	}
	h := Handler(Options{Findings: src, Audit: AuditLog{Log: log}, Now: func() time.Time { return fixtureNow }})
	_, _, body := get(t, h, "/audit")
	var states []string
	for _, m := range auditRowRE.FindAllStringSubmatch(body, -1) {
		states = append(states, m[3])
	}
	if !reflect.DeepEqual(states, []string{"done", "intended"}) {
		t.Fatalf("audit states newest first: %v", states)
	}
	if _, _, body := get(t, h, "/?pattern=stuck"); len(rows(body)) != 1 {
		t.Fatal("store-backed page does not filter")
	}
}

func TestHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Minute: "0m", 42 * time.Minute: "42m", 3*time.Hour + 5*time.Minute: "3h 05m", 51 * time.Hour: "2d 3h",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("humanDuration(%s) = %s, want %s", d, got, want)
		}
	}
}

func readAll(t *testing.T, r io.Reader) string {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCardsInTheAccountingsTerms: the cards' waste leaves out orphaned
// processes (outside any allocation, as the accounting counts them) and
// says how much they held; each pattern's bar names what its hours are
// (over the limit, orphaned, degraded) or shows only its count; the GPU
// count is of distinct GPUs, however many findings one GPU has.
func TestCardsInTheAccountingsTerms(t *testing.T) {
	fs := fixtureFindings()
	// A second finding on the stuck job's GPUs, and an overlong job whose
	// hours are over the limit, not waste.
	again := fs[1]
	again.Pattern, again.WastedGPUHours = schema.Straggler, 0
	again.Evidence = map[string]float64{schema.EvidenceDegraded: 3.5}
	fs[6].WastedGPUHours, fs[6].Evidence = 0, map[string]float64{"over_limit_gpu_hours": 12}
	fault := fs[2]
	fault.Pattern, fault.WastedGPUHours, fault.Evidence = schema.GPUFault, 0, nil
	fs = append(fs, again, fault)
	_, _, body := get(t, Handler(Options{Findings: fakeFindings{fs: fs}}), "/")
	for _, want := range []string{
		`<b id="wasted">165.5</b>`, `<span class="more" id="orphaned">1.5</span> more held by orphaned processes`,
		"12.0 h over the limit · 1", "1.5 h orphaned · 1", "3.5 h degraded · 1", "52.4 h · 1", "1 found",
		// 4+8+8+1+1+2+4+1+2 GPUs in nine findings, 8 of them again.
		`<span id="gpus">31</span> distinct GPUs`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("cards lack %q", want)
		}
	}
	if strings.Contains(body, "0.0 h ·") {
		t.Error("a bar of 0.0 h")
	}
}
