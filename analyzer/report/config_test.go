package report

import (
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	full := `timezone: Europe/Berlin
schedule: "0 9 * * MON"
digest_schedule: "0 7 * * *"
currency: EUR
prices:
  A100: 1.8
  "NVIDIA H100 80GB HBM3": 3.2
default_price: 1.0
grafana:
  url: https://grafana.example.org
top: 5
trend_weeks: 3
admins: [ops@example.org]
teams:
  ml:
    recipients: [a@example.org, "Bob <bob@example.org>"]
smtp:
  host: smtp.example.org
  port: 587
  tls: starttls
  username: gpuwatch
  password_file: /etc/gpuwatch/smtp-password
  from: gpuwatch@example.org
`
	cases := []struct {
		name string
		yaml string
		want []string // substrings of the error; none: valid
	}{
		{name: "full", yaml: full},
		{name: "empty means defaults", yaml: ""},
		{name: "unknown key", yaml: "timezone: UTC\nteamz: {}\n", want: []string{`gw.yml:2: teamz: unknown key "teamz" (did you mean "teams"?)`}},
		{name: "unknown nested key", yaml: "smtp:\n  host: mx\n  pasword: x\n", want: []string{`gw.yml:3: smtp.pasword: unknown key "pasword"`}},
		{name: "bad timezone", yaml: "currency: EUR\ntimezone: Mars/Olympus\n", want: []string{":2: timezone"}},
		{name: "bad schedule", yaml: "schedule: \"61 9 * * MON\"\n", want: []string{":1: schedule"}},
		{name: "bad recipient", yaml: "teams:\n  ml:\n    recipients:\n      - ok@example.org\n      - not-an-address\n",
			want: []string{":5: teams.ml.recipients[1]", "not-an-address"}},
		{name: "team without recipients", yaml: "teams:\n  ml: {}\n", want: []string{":2: teams.ml: no recipients"}},
		{name: "negative price", yaml: "prices:\n  A100: -1\n", want: []string{":2: prices.A100"}},
		{name: "smtp tls mode", yaml: "smtp:\n  host: mx\n  from: a@b.c\n  tls: ssl\n", want: []string{":4: smtp.tls"}},
		{name: "smtp without host", yaml: "smtp:\n  from: a@b.c\n", want: []string{":1: smtp.host: required"}},
		{name: "grafana url", yaml: "grafana:\n  url: grafana.local\n", want: []string{":2: grafana.url"}},
		{name: "wrong type", yaml: "top: many\n", want: []string{"gw.yml:1: top: cannot unmarshal"}},
		{name: "NaN and infinite prices", yaml: "default_price: .nan\nprices:\n  A100: .inf\n", want: []string{"gw.yml:1: default_price: .nan", "gw.yml:3: prices.A100: .inf"}},
		{name: "two documents", yaml: "top: 5\n---\ntop: 6\n", want: []string{"gw.yml:2: more than one YAML document"}},
		{name: "CR/LF in the SMTP host", yaml: "smtp:\n  host: \"mx\\r\\nRCPT TO:<x@y.z>\"\n  from: a@b.c\n", want: []string{"gw.yml:2: smtp.host:"}},
		{name: "every second", yaml: "schedule: \"@every 0s\"\n", want: []string{"gw.yml:1: schedule: @every 0s"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig("gw.yml", []byte(tc.yaml))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if c.Location() == nil || c.Schedule == "" || c.Top == 0 {
					t.Fatalf("defaults not applied: %+v", c)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), "gw.yml") {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

func TestConfigDefaultsAndPrices(t *testing.T) {
	c, err := ParseConfig("x", []byte("timezone: Europe/Berlin\nprices: {A100: 1.5, A100-SXM4-80GB: 2.0, H100: 3}\ndefault_price: 0.5\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Schedule != DefaultSchedule || c.TrendWeeks != 4 || c.Top != 10 {
		t.Errorf("defaults: schedule %q trend %d top %d", c.Schedule, c.TrendWeeks, c.Top)
	}
	if c.Location().String() != "Europe/Berlin" {
		t.Errorf("location %v", c.Location())
	}
	for model, want := range map[string]float64{
		"NVIDIA A100-SXM4-80GB": 2.0, // longest match wins
		"NVIDIA A100-SXM4-40GB": 1.5,
		"NVIDIA H100 80GB HBM3": 3,
		"Tesla T4":              0.5,
	} {
		if got := c.PriceFor(model); got != want {
			t.Errorf("PriceFor(%q) = %v, want %v", model, got, want)
		}
	}
}

func TestWithTimeZone(t *testing.T) {
	for _, tc := range []struct{ spec, tz, want string }{
		{"0 9 * * MON", "Europe/Berlin", "CRON_TZ=Europe/Berlin 0 9 * * MON"},
		{"CRON_TZ=UTC 0 9 * * MON", "Europe/Berlin", "CRON_TZ=UTC 0 9 * * MON"},
		{"0 9 * * MON", "", "0 9 * * MON"},
	} {
		if got := WithTimeZone(tc.spec, tc.tz); got != tc.want {
			t.Errorf("WithTimeZone(%q, %q) = %q, want %q", tc.spec, tc.tz, got, tc.want)
		}
	}
}

func TestPeriods(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		in         string
		start      string
		hours      float64
		wantErr    bool
		prev, days string
	}{
		{in: "2026-W47", start: "2026-11-16T00:00:00+01:00", hours: 168, prev: "2026-W46"},
		{in: "2026-W01", start: "2025-12-29T00:00:00+01:00", hours: 168, prev: "2025-W52"},
		{in: "2026-W53", start: "2026-12-28T00:00:00+01:00", hours: 168, prev: "2026-W52"},
		{in: "2026-W13", start: "2026-03-23T00:00:00+01:00", hours: 167, prev: "2026-W12"}, // DST starts 29 March
		{in: "2027-W53", wantErr: true},
		{in: "2026-W00", wantErr: true},
		{in: "2026-47", wantErr: true},
		{in: "2026-W4x", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			p, err := ParseWeek(tc.in, berlin)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParseWeek(%q) = %+v, want error", tc.in, p)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Start.Format(time.RFC3339); got != tc.start {
				t.Errorf("start %s, want %s", got, tc.start)
			}
			if h := p.End.Sub(p.Start).Hours(); h != tc.hours {
				t.Errorf("length %v h, want %v", h, tc.hours)
			}
			if p.Prev().Label != tc.prev {
				t.Errorf("prev %s, want %s", p.Prev().Label, tc.prev)
			}
			if n := len(p.Days()); n != 7 {
				t.Errorf("%d days", n)
			}
		})
	}
	d, err := ParsePeriod("2026-11-28", berlin)
	if err != nil || d.Kind != Day || d.End.Sub(d.Start) != 24*time.Hour || d.Prev().Label != "2026-11-27" {
		t.Errorf("ParsePeriod(day) = %+v, %v", d, err)
	}
}
