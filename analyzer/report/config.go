package report

import (
	netmail "net/mail"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/gpuwatch/gpuwatch/analyzer/mail"
	"github.com/gpuwatch/gpuwatch/internal/configfile"
	"github.com/gpuwatch/gpuwatch/internal/cronspec"
)

// Config is the reports' configuration file.
type Config struct {
	// TimeZone names the IANA zone that weeks, days and schedules use.
	TimeZone string `yaml:"timezone"`
	// Schedule is the weekly team reports' cron spec (5 fields).
	Schedule string `yaml:"schedule"`
	// DigestSchedule, when set, sends the administrators a daily digest.
	DigestSchedule string `yaml:"digest_schedule"`
	// Currency labels costs (EUR, USD, ...).
	Currency string `yaml:"currency"`
	// Prices per GPU-hour by GPU model name (modelName): an exact name, or a
	// part of it ("A100-SXM4-80GB", "H100"); the longest match wins.
	Prices map[string]float64 `yaml:"prices"`
	// DefaultPrice applies to models not in Prices.
	DefaultPrice float64 `yaml:"default_price"`
	Grafana      Grafana `yaml:"grafana"`
	// Top is how many jobs and users the report lists.
	Top int `yaml:"top"`
	// TrendWeeks is how many previous weeks the trend compares against.
	TrendWeeks int `yaml:"trend_weeks"`
	// Admins receive the fleet report and the daily digest.
	Admins []string `yaml:"admins"`
	// Teams maps a team (the allocation's account/team) to its recipients.
	Teams map[string]Team `yaml:"teams"`
	SMTP  mail.Config     `yaml:"smtp"`
	// JobMail is the end-of-job mail to the owners of wasteful jobs.
	JobMail JobMail `yaml:"job_mail"`

	loc *time.Location
}

// Team is one team's entry.
type Team struct {
	Recipients []string `yaml:"recipients"`
}

// Grafana locates the dashboards that reports link to.
type Grafana struct {
	URL string `yaml:"url"`
	// Dashboard paths below URL; the job dashboard gets var-job and
	// var-hostname, the team dashboard var-team, the user one var-user.
	JobDashboard  string `yaml:"job_dashboard"`
	TeamDashboard string `yaml:"team_dashboard"`
	UserDashboard string `yaml:"user_dashboard"`
}

// DefaultSchedule sends team reports on Mondays at 09:00.
const DefaultSchedule = "0 9 * * MON"

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.TimeZone == "" {
		c.TimeZone = "UTC"
	}
	if c.Schedule == "" {
		c.Schedule = DefaultSchedule
	}
	if c.Top == 0 {
		c.Top = 10
	}
	if c.TrendWeeks == 0 {
		c.TrendWeeks = 4
	}
	if c.Grafana.JobDashboard == "" {
		c.Grafana.JobDashboard = "d/gpuwatch-job/gpuwatch-job"
	}
	if c.Grafana.TeamDashboard == "" {
		c.Grafana.TeamDashboard = "d/gpuwatch-team/gpuwatch-team"
	}
	if c.Grafana.UserDashboard == "" {
		c.Grafana.UserDashboard = c.Grafana.TeamDashboard
	}
	c.JobMail.defaults()
	if c.loc == nil || c.loc.String() != c.TimeZone {
		if loc, err := time.LoadLocation(c.TimeZone); err == nil {
			c.loc = loc
		}
	}
}

// Location is the configured time zone (UTC until Defaults has run).
func (c *Config) Location() *time.Location {
	if c.loc == nil {
		return time.UTC
	}
	return c.loc
}

// PriceFor is the price of one GPU-hour of model.
func (c *Config) PriceFor(model string) float64 {
	if p, ok := c.Prices[model]; ok {
		return p
	}
	best, price := -1, c.DefaultPrice
	for k, p := range c.Prices {
		if strings.Contains(model, k) && len(k) > best {
			best, price = len(k), p
		}
	}
	return price
}

// Priced reports whether costs can be shown at all.
func (c *Config) Priced() bool { return c.DefaultPrice > 0 || len(c.Prices) > 0 }

// TeamNames lists the configured teams, sorted.
func (c *Config) TeamNames() []string {
	out := make([]string, 0, len(c.Teams))
	for t := range c.Teams {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// LoadConfig reads and validates a configuration file through
// internal/configfile: bounded read, one document, known keys, no NaN or
// infinite prices; every error names the file, line and key.
func LoadConfig(path string) (*Config, error) {
	b, err := configfile.ReadFile(path)
	if err != nil {
		return nil, configfile.Errors{{File: path, Msg: err.Error()}}
	}
	return ParseConfig(path, b)
}

// ParseConfig parses and validates YAML; name prefixes the errors.
func ParseConfig(name string, b []byte) (*Config, error) {
	var c Config
	doc, err := configfile.Decode(name, b, &c)
	if err != nil {
		return nil, err
	}
	c.Defaults()
	if err := c.validate(doc); err != nil {
		return nil, err
	}
	return &c, nil
}

// validate checks values, reporting each problem at its line.
func (c *Config) validate(doc *configfile.Doc) error {
	var errs configfile.Errors
	bad := func(path string, format string, args ...any) {
		errs = append(errs, doc.Errorf(path, format, args...))
	}
	loc, err := time.LoadLocation(c.TimeZone)
	if err != nil {
		bad("timezone", "%v", err)
	} else {
		c.loc = loc
	}
	parser := cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
	if _, err := parser.Parse(c.Schedule); err != nil {
		bad("schedule", "%q: %v", c.Schedule, err)
	} else if err := cronspec.CheckEvery(c.Schedule); err != nil {
		bad("schedule", "%v", err)
	}
	if c.DigestSchedule != "" {
		if _, err := parser.Parse(c.DigestSchedule); err != nil {
			bad("digest_schedule", "%q: %v", c.DigestSchedule, err)
		} else if err := cronspec.CheckEvery(c.DigestSchedule); err != nil {
			bad("digest_schedule", "%v", err)
		}
	}
	for m, p := range c.Prices {
		if p < 0 {
			bad("prices."+m, "negative price %v", p)
		}
	}
	if c.DefaultPrice < 0 {
		bad("default_price", "negative price %v", c.DefaultPrice)
	}
	if c.Top < 0 || c.Top > 100 {
		bad("top", "%d not in [1, 100]", c.Top)
	}
	if c.TrendWeeks < 0 || c.TrendWeeks > 52 {
		bad("trend_weeks", "%d not in [1, 52]", c.TrendWeeks)
	}
	if c.Grafana.URL != "" && !strings.HasPrefix(c.Grafana.URL, "http://") && !strings.HasPrefix(c.Grafana.URL, "https://") {
		bad("grafana.url", "%q is not an http(s) URL", c.Grafana.URL)
	}
	for i, a := range c.Admins {
		if _, err := netmail.ParseAddress(a); err != nil {
			bad("admins["+strconv.Itoa(i)+"]", "%q: %v", a, err)
		}
	}
	for _, t := range c.TeamNames() {
		if strings.TrimSpace(t) == "" || mail.SanitizeHeader(t) != t {
			bad("teams."+t, "team name must be printable and non-empty")
		}
		if len(c.Teams[t].Recipients) == 0 {
			bad("teams."+t, "no recipients")
		}
		for i, a := range c.Teams[t].Recipients {
			if _, err := netmail.ParseAddress(a); err != nil {
				bad("teams."+t+".recipients["+strconv.Itoa(i)+"]", "%q: %v", a, err)
			}
		}
	}
	c.JobMail.validate(bad)
	// SMTP is needed to send, not to preview: check it only when present.
	if c.SMTP != (mail.Config{}) {
		smtp := c.SMTP
		smtp.Defaults()
		if err := smtp.Validate(); err != nil {
			for _, e := range splitJoined(err) {
				key, msg, _ := strings.Cut(e.Error(), ": ")
				bad("smtp."+key, "%s", msg)
			}
		}
	}
	return errs.Err()
}

func splitJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
