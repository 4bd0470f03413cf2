// Package web is the analyzer's web page: the current findings (filterable
// by team, pattern and node), the audit log of decisions and actions, and
// the latest report of each team. Pages are rendered on the server with
// html/template; there is no JavaScript and no build step. Serve the
// Handler with internal/serve.Serve so the same web config (TLS, basic
// auth) protects it as the exporter.
package web

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/accounting"
	"github.com/gpuwatch/gpuwatch/analyzer/detect"
	"github.com/gpuwatch/gpuwatch/analyzer/engine"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/pagestyle"
	"github.com/gpuwatch/gpuwatch/analyzer/present"
	"github.com/gpuwatch/gpuwatch/analyzer/report"
	"github.com/gpuwatch/gpuwatch/schema"
)

// FindingsSource gives the current findings (for the daemon: those of the
// recent cycles in the store; see StoreFindings).
type FindingsSource interface {
	CurrentFindings(ctx context.Context) ([]finding.Finding, error)
}

// AuditEntry is one line of the audit log as the page shows it.
type AuditEntry struct {
	Time     time.Time
	Step     string // notify, warn, checkpoint, reclaim, ...
	Actuator string // slurm, kubernetes, email, ...
	State    string // intended, done, failed, skipped, dry_run
	DryRun   bool
	Hostname string
	Job      string
	User     string
	Team     string
	Pattern  string
	Detail   string
}

// AuditSource gives the newest audit entries, newest first, at most limit.
type AuditSource interface {
	RecentAudit(ctx context.Context, limit int) ([]AuditEntry, error)
}

// ReportSummary describes one team's latest report: its GPU-hours as the
// accounting package defines them (UsedGPUHours is its used).
type ReportSummary struct {
	Team              string // "" is the fleet (administrators') report
	Period            string // e.g. 2026-W47
	GeneratedAt       time.Time
	AllocatedGPUHours float64
	ActiveGPUHours    float64
	WastedGPUHours    float64
	OverLimitGPUHours float64
	// DegradedGPUHours: slowed by throttled or faulty GPUs, never waste.
	DegradedGPUHours float64
	OrphanGPUHours   float64
	// Health ranks the nodes whose GPUs slowed or failed jobs (the fleet
	// report's ranking, at most five); empty for a team's report.
	Health     []report.HealthRow
	TopPattern schema.Pattern
}

// AccountingSource gives the fleet's accounting of the latest report
// period, which the findings page shows above the current findings.
type AccountingSource interface {
	FleetAccounting(ctx context.Context) (ReportSummary, error)
}

// ErrNoReport is returned by ReportSource.ReportHTML for a team without one.
var ErrNoReport = errors.New("no report")

// ReportSource gives the latest report of each team and its HTML.
type ReportSource interface {
	LatestReports(ctx context.Context) ([]ReportSummary, error)
	// ReportHTML is the rendered report (the e-mail's HTML part), trusted:
	// gpuwatch's report renderer wrote it.
	ReportHTML(ctx context.Context, team string) ([]byte, error)
}

// Options configure the Handler. Any source may be nil: its page then says
// that the feature is not configured.
type Options struct {
	Findings FindingsSource
	Audit    AuditSource
	Reports  ReportSource
	// Planner gives the capacity plan of the Planner tab.
	Planner PlanSource
	// Now is the clock shown on the pages (tests inject one).
	Now    func() time.Time
	Logger *slog.Logger
	// Title names the installation in the header, e.g. "gpuwatch — cluster-a".
	Title string
	// AuditLimit is the number of audit entries shown (default 200).
	AuditLimit int
	// MaxRows bounds the findings table (default 500, the largest first):
	// a page is for people; findings.json has them all.
	MaxRows int
	// Coverage says what the last analyzer cycle saw; nil hides the line.
	Coverage CoverageSource
	// Accounting gives the fleet's GPU-hours of the latest report period;
	// nil hides the line.
	Accounting AccountingSource
}

// CoverageSource gives what the last analyzer cycle saw (engine.Metrics
// keeps it for /metrics too, so both say the same).
type CoverageSource interface {
	LastCoverage() (engine.Coverage, bool)
}

//go:embed templates/*.html
var templateFS embed.FS

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"pagestyle": pagestyle.CSS,
	"gpuh":      func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"pct":       func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) },
	"ts":        func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04") },
	"dur":       humanDuration,
	"sub":       func(a, b time.Time) time.Duration { return a.Sub(b) },
	"label":     patternLabel,
	"evidence":  evidence,
	"pctOf":     func(a, b float64) float64 { return safeDiv(a, b) },
	"slug":      ReportSlug,
	"width": func(a, b float64) string {
		return fmt.Sprintf("%.1f%%", 100*math.Min(1, safeDiv(a, b)))
	},
	"query": func(v url.Values, k, val string) string {
		q := url.Values{}
		for kk, vv := range v {
			q[kk] = vv
		}
		if val == "" {
			q.Del(k)
		} else {
			q.Set(k, val)
		}
		if len(q) == 0 {
			return "/"
		}
		return "/?" + q.Encode()
	},
}).ParseFS(templateFS, "templates/*.html"))

// Handler serves the pages:
//
//	/                 findings; ?team=&pattern=&node= filter them
//	/findings.json    the same findings as JSON ({"findings": [...]})
//	/audit            the audit log; ?job= filters it
//	/reports          the latest report of each team
//	/reports/{team}   that report's HTML ("_fleet" for the fleet report)
//	/planner          the capacity plan: layouts, idle heat map, forecast
func Handler(o Options) http.Handler {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.AuditLimit <= 0 {
		o.AuditLimit = 200
	}
	if o.MaxRows <= 0 {
		o.MaxRows = 500
	}
	if o.Title == "" {
		o.Title = "gpuwatch"
	}
	s := &site{o}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.findings)
	mux.HandleFunc("GET /findings.json", s.findingsJSON)
	mux.HandleFunc("GET /audit", s.audit)
	mux.HandleFunc("GET /reports", s.reports)
	mux.HandleFunc("GET /reports/{team}", s.report)
	mux.HandleFunc("GET /planner", s.planner)
	return securityHeaders(mux)
}

type site struct{ Options }

// securityHeaders: the pages need nothing but their own inline styles, so
// the policy forbids everything else (no scripts at all).
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		h.ServeHTTP(w, r)
	})
}

// Filter selects findings; empty fields match everything.
type Filter struct {
	Team, Pattern, Node string
}

// ParseFilter reads a Filter from query parameters, rejecting unknown
// patterns (a misspelt pattern would silently show nothing).
func ParseFilter(q url.Values) (Filter, error) {
	f := Filter{Team: q.Get("team"), Pattern: q.Get("pattern"), Node: q.Get("node")}
	if f.Pattern != "" && !schema.Pattern(f.Pattern).Valid() {
		return f, fmt.Errorf("unknown pattern %q", f.Pattern)
	}
	return f, nil
}

// Match reports whether the filter selects f.
func (flt Filter) Match(f *finding.Finding) bool {
	return (flt.Team == "" || f.Team == flt.Team) &&
		(flt.Pattern == "" || string(f.Pattern) == flt.Pattern) &&
		(flt.Node == "" || f.Hostname == flt.Node)
}

// Apply returns the findings the filter selects, most GPU-hours wasted first.
func (flt Filter) Apply(fs []finding.Finding) []finding.Finding {
	out := make([]finding.Finding, 0, len(fs))
	for i := range fs {
		if flt.Match(&fs[i]) {
			out = append(out, fs[i])
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].WastedGPUHours != out[j].WastedGPUHours {
			return out[i].WastedGPUHours > out[j].WastedGPUHours
		}
		return out[i].Key() < out[j].Key()
	})
	return out
}

// patternTotal is one pattern's bar: its findings and the GPU-hours they
// stand for in the accounting's own terms. Waste, hours over the limit,
// degraded hours and orphaned hours are different quantities, so each bar
// says which it draws (Measure), and a pattern with none shows its count.
type patternTotal struct {
	Pattern  schema.Pattern
	Count    int
	GPUHours float64
	Measure  string
}

// patternMeasure is what a finding's GPU-hours are in the accounting
// (package accounting): an orphan's are orphaned, outside any allocation;
// an overlong job's are over the limit; a straggler's or throttled job's
// degraded; the rest wasted.
func patternMeasure(f *finding.Finding) (string, float64) {
	switch {
	case f.Pattern == schema.OrphanProcess:
		return "orphaned", f.WastedGPUHours
	case f.WastedGPUHours > 0:
		return "wasted", f.WastedGPUHours
	case f.Evidence[accounting.EvidenceOverLimit] > 0:
		return "over the limit", f.Evidence[accounting.EvidenceOverLimit]
	case f.Evidence[schema.EvidenceDegraded] > 0:
		return "degraded", f.Evidence[schema.EvidenceDegraded]
	}
	return "", 0
}

type findingsPage struct {
	page
	Filter   Filter
	Query    url.Values
	Teams    []string
	Nodes    []string
	Patterns []schema.Pattern
	Findings []finding.Finding // the selection
	Shown    []finding.Finding // its first MaxRows
	Total    int               // before filtering
	// Wasted is the selection's waste as the accounting counts it; Orphaned
	// the hours orphaned processes held, outside any allocation and so
	// apart from it.
	Wasted, Orphaned float64
	// From and To span the selection's findings: the window the cards'
	// figures cover (zero when there is none).
	From, To time.Time
	GPUs     int
	ByPat    []patternTotal
	MaxPat   float64
	Jobs     int
	// Coverage is the sentence on what the last cycle saw, "" when unknown.
	Coverage string
	// Accounting is the fleet's GPU-hours of the latest report period.
	Accounting *ReportSummary
}

type page struct {
	Title  string
	Active string
	Now    time.Time
	Error  string
	// Configured is false when the page's source was not wired.
	Configured bool
}

func (s *site) page(active string, configured bool) page {
	return page{Title: s.Title, Active: active, Now: s.Now(), Configured: configured}
}

func (s *site) load(r *http.Request) (Filter, []finding.Finding, []finding.Finding, int, error) {
	flt, err := ParseFilter(r.URL.Query())
	if err != nil {
		return flt, nil, nil, http.StatusBadRequest, err
	}
	if s.Findings == nil {
		return flt, nil, nil, 0, nil
	}
	all, err := s.Findings.CurrentFindings(r.Context())
	if err != nil {
		s.Logger.Error("web: read findings", "err", err)
		return flt, nil, nil, http.StatusInternalServerError, errors.New("could not read the findings; see the analyzer's log")
	}
	return flt, all, flt.Apply(all), 0, nil
}

func (s *site) findings(w http.ResponseWriter, r *http.Request) {
	flt, all, sel, code, err := s.load(r)
	p := findingsPage{page: s.page("findings", s.Findings != nil), Filter: flt, Query: r.URL.Query(),
		Patterns: schema.AllPatterns, Total: len(all), Findings: sel}
	if s.Coverage != nil {
		if c, ok := s.Coverage.LastCoverage(); ok {
			p.Coverage = cycleLine(c, len(all))
		}
	}
	if s.Accounting != nil {
		if a, err := s.Accounting.FleetAccounting(r.Context()); err != nil {
			s.Logger.Error("web: read accounting", "err", err)
		} else {
			p.Accounting = &a
		}
	}
	if err != nil {
		p.Error = err.Error()
	}
	teams, nodes := map[string]bool{}, map[string]bool{}
	for i := range all {
		teams[all[i].Team], nodes[all[i].Hostname] = true, true
	}
	p.Teams, p.Nodes = sortedKeys(teams), sortedKeys(nodes)
	p.Shown = sel[:min(len(sel), s.MaxRows)]
	p.ByPat, p.MaxPat = patternTotals(sel)
	jobs, devices := map[string]bool{}, map[string]bool{}
	for i := range sel {
		f := &sel[i]
		if f.Pattern == schema.OrphanProcess {
			p.Orphaned += f.WastedGPUHours
		} else {
			p.Wasted += f.WastedGPUHours
		}
		// A GPU with several findings (or several MIG instances) is one GPU.
		for _, g := range f.GPUs {
			uuid, _, _ := strings.Cut(g, "/")
			devices[f.Hostname+"|"+uuid] = true
		}
		if p.From.IsZero() || f.Start.Before(p.From) {
			p.From = f.Start
		}
		if f.End.After(p.To) {
			p.To = f.End
		}
		jobs[f.Hostname+"|"+f.Job] = true
	}
	p.Jobs, p.GPUs = len(jobs), len(devices)
	s.render(w, code, "findings.html", p)
}

// patternTotals sums the selection per pattern in each pattern's measure,
// largest first, and the largest.
func patternTotals(sel []finding.Finding) ([]patternTotal, float64) {
	byPat := map[schema.Pattern]*patternTotal{}
	for i := range sel {
		f := &sel[i]
		pt := byPat[f.Pattern]
		if pt == nil {
			pt = &patternTotal{Pattern: f.Pattern}
			byPat[f.Pattern] = pt
		}
		pt.Count++
		if m, h := patternMeasure(f); m != "" {
			pt.Measure, pt.GPUHours = m, pt.GPUHours+h
		}
	}
	var out []patternTotal
	var most float64
	for _, pat := range schema.AllPatterns {
		if pt := byPat[pat]; pt != nil {
			out = append(out, *pt)
			most = math.Max(most, pt.GPUHours)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].GPUHours > out[j].GPUHours })
	return out, most
}

// cycleLine says what the last analyzer cycle read, and when: a cycle reads
// only the newest interval, so its "no findings" (a short window, say) is
// about that interval, not about the findings the store holds from earlier
// cycles, and the line says which it is.
func cycleLine(c engine.Coverage, findings int) string {
	line := present.CoverageLine(c)
	when := fmt.Sprintf("Last analyzer cycle, %s to %s UTC: ", c.From.UTC().Format("2006-01-02 15:04"), c.To.UTC().Format("2006-01-02 15:04"))
	if c.Reason == "" || findings == 0 {
		return when + line
	}
	line = strings.TrimSuffix(line, " No findings: "+c.Reason+".")
	return when + line + " It found nothing new (" + c.Reason + "); the findings below come from earlier cycles."
}

func (s *site) findingsJSON(w http.ResponseWriter, r *http.Request) {
	_, _, sel, code, err := s.load(r)
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	if sel == nil {
		sel = []finding.Finding{}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"findings": sel})
}

type auditPage struct {
	page
	Job     string
	Entries []AuditEntry
	Limit   int
}

func (s *site) audit(w http.ResponseWriter, r *http.Request) {
	p := auditPage{page: s.page("audit", s.Audit != nil), Job: r.URL.Query().Get("job"), Limit: s.AuditLimit}
	code := 0
	if s.Audit != nil {
		es, err := s.Audit.RecentAudit(r.Context(), s.AuditLimit)
		if err != nil {
			s.Logger.Error("web: read audit log", "err", err)
			p.Error, code = "could not read the audit log; see the analyzer's log", http.StatusInternalServerError
		}
		for _, e := range es {
			if p.Job == "" || e.Job == p.Job {
				p.Entries = append(p.Entries, e)
			}
		}
	}
	s.render(w, code, "audit.html", p)
}

type reportsPage struct {
	page
	Reports []ReportSummary
}

// fleetSlug names the fleet report in URLs (a team cannot be called so:
// team names do not start with an underscore in the teams file).
const fleetSlug = "_fleet"

func (s *site) reports(w http.ResponseWriter, r *http.Request) {
	p := reportsPage{page: s.page("reports", s.Reports != nil)}
	code := 0
	if s.Reports != nil {
		rs, err := s.Reports.LatestReports(r.Context())
		if err != nil {
			s.Logger.Error("web: read reports", "err", err)
			p.Error, code = "could not read the reports; see the analyzer's log", http.StatusInternalServerError
		}
		sort.SliceStable(rs, func(i, j int) bool {
			if (rs[i].Team == "") != (rs[j].Team == "") {
				return rs[i].Team == "" // the fleet first
			}
			return rs[i].Team < rs[j].Team
		})
		p.Reports = rs
	}
	s.render(w, code, "reports.html", p)
}

func (s *site) report(w http.ResponseWriter, r *http.Request) {
	if s.Reports == nil {
		http.NotFound(w, r)
		return
	}
	team := r.PathValue("team")
	if team == fleetSlug {
		team = ""
	}
	body, err := s.Reports.ReportHTML(r.Context(), team)
	switch {
	case errors.Is(err, ErrNoReport):
		http.Error(w, "no report for this team yet", http.StatusNotFound)
		return
	case err != nil:
		s.Logger.Error("web: read report", "team", team, "err", err)
		http.Error(w, "could not read the report; see the analyzer's log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(body)
}

func (s *site) render(w http.ResponseWriter, code int, name string, data any) {
	var b strings.Builder
	if err := templates.ExecuteTemplate(&b, name, data); err != nil {
		s.Logger.Error("web: render", "page", name, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if code != 0 {
		w.WriteHeader(code)
	}
	_, _ = w.Write([]byte(b.String()))
}

// ReportSlug is the URL path element of a team's report.
func ReportSlug(team string) string {
	if team == "" {
		return fleetSlug
	}
	return team
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		if k != "" {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func safeDiv(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func humanDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0m"
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
	}
}

func patternLabel(p schema.Pattern) string { return detect.Label(p) }

// evidence formats a finding's numbers compactly and in a stable order.
func evidence(ev map[string]float64) string {
	keys := make([]string, 0, len(ev))
	for k := range ev {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		v := ev[k]
		s := fmt.Sprintf("%.3g", v)
		if v == math.Trunc(v) && math.Abs(v) < 1e6 {
			s = fmt.Sprintf("%.0f", v)
		}
		parts = append(parts, k+"="+s)
	}
	return strings.Join(parts, " · ")
}
