package report

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	netmail "net/mail"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/mail"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/internal/configfile"
	"github.com/gpuwatch/gpuwatch/schema"
)

// JobMail configures the end-of-job mail: when a job ends having wasted
// more than the thresholds, its owner gets one mail with the job's
// figures, its findings and the advice, from the reports' outbox and
// SMTP. Off unless enabled, and dry-run (audited, not sent) unless
// dry_run is false.
type JobMail struct {
	Enabled bool `yaml:"enabled"`
	// DryRun (default true) writes each mail into the audit log as
	// dry_run instead of sending it.
	DryRun *bool `yaml:"dry_run"`
	// A job is mailed about when it wasted at least MinWastedGPUHours
	// (default 1) and at least MinWastedShare of its GPU-hours (default 0.25).
	MinWastedGPUHours float64 `yaml:"min_wasted_gpu_hours"`
	MinWastedShare    float64 `yaml:"min_wasted_share"`
	// EndedAfter is how long a job must have been gone from the telemetry
	// to count as ended (default 15m: a few analysis cycles).
	EndedAfter configfile.Duration `yaml:"ended_after"`
	// Domain makes a user's address user@Domain; Addresses override it
	// per user. A user with neither gets no mail (audited as skipped).
	Domain    string            `yaml:"domain"`
	Addresses map[string]string `yaml:"addresses"`
	// OptOut lists users who never get these mails.
	OptOut []string `yaml:"opt_out"`
}

func (j *JobMail) defaults() {
	if j.DryRun == nil {
		t := true
		j.DryRun = &t
	}
	if j.MinWastedGPUHours == 0 {
		j.MinWastedGPUHours = 1
	}
	if j.MinWastedShare == 0 {
		j.MinWastedShare = 0.25
	}
	if j.EndedAfter == 0 {
		j.EndedAfter = configfile.Duration(15 * time.Minute)
	}
}

func (j *JobMail) validate(bad func(path, format string, args ...any)) {
	if j.MinWastedGPUHours < 0 {
		bad("job_mail.min_wasted_gpu_hours", "negative: %v", j.MinWastedGPUHours)
	}
	if j.MinWastedShare < 0 || j.MinWastedShare > 1 {
		bad("job_mail.min_wasted_share", "%v not in [0, 1]", j.MinWastedShare)
	}
	if j.EndedAfter < 0 {
		bad("job_mail.ended_after", "negative")
	}
	if j.Domain != "" {
		if _, err := netmail.ParseAddress("user@" + j.Domain); err != nil || strings.ContainsAny(j.Domain, "@ <>") {
			bad("job_mail.domain", "%q is not a mail domain", j.Domain)
		}
	}
	for u, a := range j.Addresses {
		if _, err := netmail.ParseAddress(a); err != nil {
			bad("job_mail.addresses."+u, "%q: %v", a, err)
		}
	}
	if j.Enabled && j.Domain == "" && len(j.Addresses) == 0 {
		bad("job_mail", "enabled without domain or addresses: no user could be mailed")
	}
}

// Address is where user's mail goes; ok is false for an opted-out user,
// or one without an address (why says which).
func (j *JobMail) Address(user string) (addr string, ok bool, why string) {
	if slices.Contains(j.OptOut, user) {
		return "", false, "opted out"
	}
	if a, found := j.Addresses[user]; found {
		return a, true, ""
	}
	// A user name becomes an address only when it is a plain local part:
	// never let it carry a second address, a display name or a header.
	if j.Domain == "" || user == "" || strings.ContainsFunc(user, func(r rune) bool {
		return r <= ' ' || r >= 0x7f || strings.ContainsRune(`@<>,;:"()[]\`, r)
	}) {
		return "", false, "no address"
	}
	a := user + "@" + j.Domain
	if _, err := netmail.ParseAddress(a); err != nil {
		return "", false, "no address"
	}
	return a, true, ""
}

// EndedJob is one ended job as its end-of-job mail shows it.
type EndedJob struct {
	Job, JobName, User, Team, Hostname, Model, Kind string
	GPUs                                            int
	Start, End                                      time.Time
	TimeZone                                        string
	Currency                                        string
	Priced                                          bool
	AllocatedGPUHours, ActiveGPUHours               float64
	WastedGPUHours, WastedShare                     float64
	Cost, WastedCost                                float64
	Findings                                        []AdviceRow
	Link                                            string
	// EndedByFault, when set, says the job ended of a GPU fault (the
	// gpu_fault finding's advice): the mail goes out whatever the waste.
	EndedByFault string
	// DegradedGPUHours: slowed by throttled or faulty GPUs, never waste.
	DegradedGPUHours float64
}

// EndedJobOf builds the mail's content from the store: the job's summed
// usage and its findings (newest record of each), with their advice.
func EndedJobOf(ctx context.Context, st *store.Store, cfg *Config, hostname, job string) (*EndedJob, bool, error) {
	u, ok, err := st.JobUsage(ctx, hostname, job)
	if err != nil || !ok {
		return nil, false, err
	}
	fs, err := st.JobFindings(ctx, hostname, job)
	if err != nil {
		return nil, false, err
	}
	loc := cfg.Location()
	e := &EndedJob{Job: job, User: u.User, Team: u.Team, Hostname: hostname, Model: u.Model, Kind: u.Kind, GPUs: u.GPUs,
		Start: u.Start.In(loc), End: u.End.In(loc), TimeZone: cfg.TimeZone, Currency: cfg.Currency, Priced: cfg.Priced(),
		AllocatedGPUHours: u.AllocatedGPUHours, ActiveGPUHours: u.ActiveGPUHours}
	price := cfg.PriceFor(u.Model)
	for i := range fs {
		f := &fs[i]
		if e.JobName == "" {
			e.JobName = f.JobName
		}
		e.WastedGPUHours += f.WastedGPUHours
		e.DegradedGPUHours += f.Evidence[schema.EvidenceDegraded]
		if f.Pattern == schema.GPUFault && f.Evidence["ended_by_fault"] > 0 {
			e.EndedByFault = Advise(f)
		}
		e.Findings = append(e.Findings, AdviceRow{Job: job, User: f.User, Hostname: hostname, Pattern: f.Pattern,
			WastedGPUHours: f.WastedGPUHours, Advice: Advise(f),
			Link: cfg.link(cfg.Grafana.JobDashboard, Period{Start: f.Start, End: f.End}, "job", job, "hostname", hostname)})
	}
	// Findings may overlap (two patterns over the same hours): the waste
	// never exceeds what the job held.
	e.WastedGPUHours = min(e.WastedGPUHours, e.AllocatedGPUHours)
	e.WastedShare = ratio(e.WastedGPUHours, e.AllocatedGPUHours)
	e.Cost, e.WastedCost = e.AllocatedGPUHours*price, e.WastedGPUHours*price
	e.Link = cfg.link(cfg.Grafana.JobDashboard, Period{Start: u.Start, End: u.End}, "job", job, "hostname", hostname)
	return e, true, nil
}

// topPattern is the pattern that wasted the most, for the audit record.
func (e *EndedJob) topPattern() schema.Pattern {
	if len(e.Findings) == 0 {
		return ""
	}
	return e.Findings[0].Pattern
}

// jobMailCatchUp bounds how far back a tick looks for ended jobs: a job
// that ended while the daemon was down longer than this is not mailed late.
const jobMailCatchUp = 24 * time.Hour

// jobMailStep names the end-of-job mail in the audit log.
const jobMailStep = "job_mail"

// JobMailJob mails the owners of jobs that ended over the thresholds, on
// the reports' tick; each mail (or dry run, opt-out, missing address) is
// written to the audit log, and delivered through the outbox, which
// retries a failed delivery at later ticks and never sends one twice.
func JobMailJob(ctx context.Context, d Deps, log *audit.Log) (Job, error) {
	if d.Store == nil || d.Config == nil || d.Sender == nil || log == nil {
		return Job{}, errors.New("job mail: store, config, sender and audit log are required")
	}
	if !d.Config.JobMail.Enabled {
		return Job{}, errors.New("job mail: not enabled")
	}
	ob, err := OpenOutbox(ctx, d.Store)
	if err != nil {
		return Job{}, err
	}
	ob.Guard = d.Guard
	rd, err := NewRenderer()
	if err != nil {
		return Job{}, err
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	m := &jobMailer{d: d, log: log, outbox: ob, render: rd}
	return Job{Name: "job-mail", Spec: WithTimeZone(TickSpec, d.Config.TimeZone), Run: m.run}, nil
}

type jobMailer struct {
	d      Deps
	log    *audit.Log
	outbox *Outbox
	render *Renderer
	mu     sync.Mutex
}

func (m *jobMailer) run(ctx context.Context, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	jm := m.d.Config.JobMail
	ended, err := m.d.Store.JobsEndedBetween(ctx, now.Add(-jobMailCatchUp-jm.EndedAfter.D()), now.Add(-jobMailCatchUp), now.Add(-jm.EndedAfter.D()))
	if err != nil {
		return err
	}
	var errs []error
	for _, j := range ended {
		if err := m.consider(ctx, now, j); err != nil {
			errs = append(errs, err)
		}
	}
	sent, err := m.outbox.FlushAround(ctx, m.d.Sender, now, m.audited(now), KindJobEnd)
	if sent > 0 {
		m.d.Logger.Info("end-of-job mails sent", "count", sent)
	}
	if err != nil {
		m.d.Logger.Error("end-of-job mails not delivered; kept in the outbox for the next run", "err", err)
	}
	return errors.Join(append(errs, err)...)
}

// consider decides one ended job once: below the thresholds it is
// recorded as done with; otherwise it is queued (or, in dry-run, opted
// out or without an address, audited and recorded without a mail).
func (m *jobMailer) consider(ctx context.Context, now time.Time, j store.JobRef) error {
	period := j.Hostname + "/" + j.Job
	e, ok, err := EndedJobOf(ctx, m.d.Store, m.d.Config, j.Hostname, j.Job)
	if err != nil || !ok {
		return err
	}
	if has, err := m.outbox.Has(ctx, KindJobEnd, e.User, period); err != nil || has {
		return err
	}
	jm := m.d.Config.JobMail
	if e.EndedByFault == "" && (e.WastedGPUHours < jm.MinWastedGPUHours || e.WastedShare < jm.MinWastedShare) {
		return m.outbox.Skip(ctx, KindJobEnd, e.User, period, now, "under the thresholds")
	}
	rec := m.record(e, *jm.DryRun)
	addr, ok, why := jm.Address(e.User)
	var r *Rendered
	if ok {
		if r, err = m.render.RenderJob(e); err != nil {
			return err
		}
	}
	switch {
	case !ok:
		return m.settle(ctx, now, rec, audit.Skipped, why, period)
	case *jm.DryRun:
		return m.settle(ctx, now, rec, audit.DryRun, "would mail "+addr+": "+r.Subject, period)
	}
	added, err := m.outbox.Enqueue(ctx, Entry{Kind: KindJobEnd, Team: e.User, Period: period, Created: now,
		Subject: r.Subject, Message: r.Message([]string{addr})})
	if added {
		m.d.Logger.Info("end-of-job mail queued", "job", j.Job, "hostname", j.Hostname, "user", e.User)
	}
	return err
}

// record is the audit record of a job's mail; its key is the same for
// every attempt (hostname, job, end).
func (m *jobMailer) record(e *EndedJob, dryRun bool) audit.Record {
	fk := "jobmail|" + e.Hostname + "|" + e.Job
	return audit.Record{Key: audit.Key(fk, e.End, jobMailStep), FindingKey: fk, Episode: e.End, Step: jobMailStep,
		Actuator: "email", Hostname: e.Hostname, Job: e.Job, User: e.User, Team: e.Team, Pattern: string(e.topPattern()),
		DryRun: dryRun}
}

// settle audits a mail that is not sent and records it as done with.
func (m *jobMailer) settle(ctx context.Context, now time.Time, rec audit.Record, state audit.State, detail, period string) error {
	if _, fresh, err := m.log.Intend(ctx, rec, now); err != nil || !fresh {
		return err
	}
	if err := m.log.Finish(ctx, rec.Key, state, mail.SanitizeHeader(detail), now); err != nil {
		return err
	}
	return m.outbox.Skip(ctx, KindJobEnd, rec.User, period, now, string(state)+": "+detail)
}

// audited writes the audit log before and after each delivery; a mail
// the log says went out already is not sent again.
func (m *jobMailer) audited(now time.Time) Around {
	return func(ctx context.Context, e Entry, send func() error) error {
		host, job, _ := strings.Cut(e.Period, "/")
		ej, ok, err := EndedJobOf(ctx, m.d.Store, m.d.Config, host, job)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("job %s: no usage left in the store", e.Period)
		}
		rec := m.record(ej, false)
		prev, fresh, err := m.log.Intend(ctx, rec, now)
		if err != nil {
			return err
		}
		if !fresh {
			if prev.State == audit.Done {
				return nil // sent; only the outbox missed it
			}
			return fmt.Errorf("job %s: audit record is %s", e.Period, prev.State)
		}
		if err := m.d.Guard.Check(); err != nil {
			// Right before the send: intended, not sent; retried by
			// whoever leads at a later tick.
			ferr := m.log.Finish(ctx, rec.Key, audit.Failed, "not sent: "+err.Error(), now)
			return errors.Join(err, ferr)
		}
		serr := send()
		state, detail := audit.Done, "mailed "+strings.Join(e.Message.To, ", ")+": "+e.Subject
		if serr != nil {
			state, detail = audit.Failed, serr.Error()
		}
		if err := m.log.Finish(ctx, rec.Key, state, mail.SanitizeHeader(detail), now); err != nil {
			return errors.Join(serr, err)
		}
		return serr
	}
}
