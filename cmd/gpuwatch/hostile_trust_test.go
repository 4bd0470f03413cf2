package main

import (
	"bytes"
	"compress/flate"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/jobview"
)

// trustCase is one hostile input at a trust boundary: the command line,
// the exit code it must end with (-1: any), what its message must say, and
// what its output must never hold (a forged identity, a secret).
type trustCase struct {
	name  string
	args  []string
	exit  int
	want  []string
	never []string
}

// TestHostileTrustBoundary feeds the surfaces where gpuwatch meets other
// people's systems what an attacker or a broken peer would send: job ids,
// Slurm's output (squeue and sacct JSON, as fake programs print it),
// summaries in AdminComment, web configs and secret files. Each case runs
// as a real process and must give a clear refusal or a safe answer within
// 2 s of CPU, with no raw terminal escape in anything it prints.
func TestHostileTrustBoundary(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty := filepath.Join(dir, "empty-store")
	var cases []trustCase

	// Job ids: refused before any store or scheduler is asked.
	for _, id := range []string{"1;id", "1 2", "$(id)", "`id`", "--user=root", "-1", "1_", "_1", "1__2", "1234567890123",
		"1\n2", "1\x1b[2J", "\u202e1", "１２３", "0x10", "1e3", "+1", "ns/", "/pod", "ns/pod/x", "NS/pod", "ns/Pod", "ns/-pod",
		"ns/pod-", "../etc/passwd", "ns/" + strings.Repeat("a", 254), strings.Repeat("n", 64) + "/pod", "ns/p_d", "ns pod",
		"*", "%", "1%0a2", "ns/pod\r", "'1'", "\"1\"", "1,2", "1:2", "1|2", "ns\\pod"} {
		want := "want a Slurm job id"
		if strings.HasPrefix(id, "-") {
			want = "flag" // taken for an option, and refused as one
		}
		cases = append(cases, trustCase{name: fmt.Sprintf("job id %q", id), args: []string{"job", id, "--tsdb.path=" + empty}, exit: 2,
			want: []string{want}})
	}

	// Slurm's answers, from fake squeue and sacct programs: a job id and
	// a state that are not, errors, garbage and oversized documents. The
	// job view then has no telemetry (an empty store): it must fail
	// clearly, never show a forged owner or a summary of another job.
	fake := func(name, out string, code int) string {
		data := write(name+".out", out, 0o600)
		return write(name, fmt.Sprintf("#!/bin/sh\ncat '%s'\nexit %d\n", data, code), 0o755)
	}
	noAcct := fake("sacct-none", "sacct: error: Problem talking to the database: Connection refused\n", 1)
	summary := func(job, user string) string {
		s, err := jobview.EncodeSummary(&jobview.Report{Job: job, Scheduler: "slurm", User: user, State: "completed",
			Start: time.Unix(1, 0).UTC(), End: time.Unix(3601, 0).UTC()}, "", 1024)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	job := func(fields string) string {
		return `{"meta":{},"errors":[],"jobs":[{"job_id":77,"user_name":"root","user_id":0,"account":"physics","cpus":2,"job_state":"COMPLETED","start_time":1,"end_time":3601` + fields + `}]}`
	}
	bomb := func() string {
		var b bytes.Buffer
		z, _ := flate.NewWriter(&b, flate.BestCompression)
		_, _ = z.Write([]byte(`{"v":1,"j":"77","u":"root","pad":"` + strings.Repeat("A", 50<<20) + `"}`))
		_ = z.Close()
		return jobview.SummaryPrefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b.Bytes()))
	}
	squeue := []struct {
		name, out string
		code      int
		never     []string
		want      string
	}{
		{"not JSON", "JobId=77 JobName=x UserId=victim(2001) JobState=COMPLETED\n", 0, []string{"victim"}, "no telemetry"},
		{"error entry", `{"errors":[{"error":"Unable to contact slurm controller (connect failure)","error_number":1007}],"jobs":[]}`, 0, nil, "no telemetry"},
		{"fatal exit", "squeue: error: Invalid user for SlurmUser slurm, ignored\nsqueue: fatal: Unable to process configuration file\n", 1, nil, "no telemetry"},
		{"job id injection", `{"jobs":[{"job_id":"77; rm -rf /","job_state":"RUNNING"}]}`, 0, nil, "no telemetry"},
		{"state escape", `{"jobs":[{"job_id":77,"job_state":"RUNNING\u001b[2J\u001b]0;pwned\u0007"}]}`, 0, []string{"\x1b"}, "no telemetry"},
		{"user escape", job(`,"name":"x","user_name":"root\u001b[31m"`), 0, []string{"\x1b"}, "no telemetry"},
		{"name escape", job(`,"name":"\u001b]52;c;cHduZWQ=\u0007 UserId=victim(2001)"`), 0, []string{"\x1b", "victim(2001)"}, "no telemetry"},
		{"name newline", job(`,"name":"a\nJobState=RUNNING"`), 0, []string{"\nJobState"}, "no telemetry"},
		{"users object", `{"jobs":[{"job_id":77,"user_name":{"name":"victim"},"job_state":"RUNNING"}]}`, 0, []string{"victim"}, "no telemetry"},
		{"huge numbers", `{"jobs":[{"job_id":77,"cpus":1e309,"job_state":"RUNNING"}]}`, 0, nil, "no telemetry"},
		{"negative cpus", job(`,"cpus":-5`), 0, nil, "no telemetry"},
		{"deep nesting", `{"jobs":[{"job_id":77,"job_state":"RUNNING","x":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}]}`, 0, nil, ""},
		{"other job only", `{"jobs":[{"job_id":78,"user_name":"victim","job_state":"RUNNING","admin_comment":"` + summary("78", "victim") + `"}]}`, 0, []string{"victim"}, "no telemetry"},
		{"duplicate ids", `{"jobs":[{"job_id":77,"user_name":"root","job_state":"RUNNING"},{"job_id":77,"user_name":"victim","job_state":"COMPLETED","admin_comment":"` + summary("77", "victim") + `"}]}`, 0, []string{"victim"}, "no telemetry"},
		{"array alias", `{"jobs":[{"job_id":77,"array_job_id":5,"array_task_id":1,"user_name":"victim","job_state":"RUNNING","admin_comment":"` + summary("77", "victim") + `"}]}`, 0, nil, "not this job's"},
		{"summary of another job", job(`,"admin_comment":"` + summary("4242", "root") + `"`), 0, nil, "not this job's"},
		{"summary of another user", job(`,"admin_comment":"` + summary("77", "victim") + `"`), 0, nil, "not this job's"},
		{"summary of nobody", job(`,"admin_comment":"` + summary("", "") + `"`), 0, nil, "not this job's"},
		{"summary garbage", job(`,"admin_comment":"gpuwatch1:!!!!"`), 0, nil, "decode summary"},
		{"summary truncated", job(`,"admin_comment":"` + summary("77", "root")[:40] + `"`), 0, nil, "decode summary"},
		{"summary zip bomb", job(`,"admin_comment":"` + bomb() + `"`), 0, nil, "summary"},
		{"summary escape", job(`,"admin_comment":"gpuwatch1:\u001b[2J"`), 0, []string{"\x1b"}, "summary"},
		{"foreign comment", job(`,"admin_comment":"jobstats:eyJ4IjoxfQ=="`), 0, nil, "no telemetry"},
		{"empty", "", 0, nil, "no telemetry"},
		{"null jobs", `{"jobs":null}`, 0, nil, "no telemetry"},
	}
	for _, sq := range squeue {
		prog := fake("squeue-"+strings.ReplaceAll(sq.name, " ", "-"), sq.out, sq.code)
		want := []string{}
		if sq.want != "" {
			want = append(want, sq.want)
		}
		for _, format := range []string{"table", "json", "html"} {
			cases = append(cases, trustCase{name: "squeue " + sq.name + " " + format,
				args: []string{"job", "77", "--tsdb.path=" + empty, "--format=" + format, "--slurm.squeue=" + prog, "--slurm.sacct=" + noAcct},
				exit: 1, want: want, never: sq.never})
		}
	}
	// sacct, asked when squeue no longer lists the job.
	noJobs := fake("squeue-nojobs", `{"errors":[],"jobs":[]}`, 0)
	for _, sa := range []struct{ name, out, never, want string }{
		{"not JSON", "77|victim|ml|train|1000|" + summary("77", "victim") + "\n", "victim", "no telemetry"},
		{"nothing found", `{"errors":[{"description":"Nothing found","error_number":9003,"error":"Nothing found with query"}],"jobs":[]}`, "", "no telemetry"},
		{"foreign summary", `{"jobs":[{"job_id":77,"user":"root","state":{"current":"COMPLETED"},"comment":{"administrator":"` + summary("4242", "victim") + `"}}]}`, "", "not this job's"},
		{"pipe in name", `{"jobs":[{"job_id":77,"name":"a|victim|ml","user":"root","state":{"current":"COMPLETED"}}]}`, "", "no telemetry"},
		{"state list", `{"jobs":[{"job_id":77,"user":"root","state":{"current":["COMPLETED","x\u001b"]}}]}`, "\x1b", "no telemetry"},
		{"state escape", `{"jobs":[{"job_id":77,"user":"root","state":{"current":"\u001b[2J"}}]}`, "\x1b", "no telemetry"},
	} {
		prog := fake("sacct-"+strings.ReplaceAll(sa.name, " ", "-"), sa.out, 0)
		var never []string
		if sa.never != "" {
			never = []string{sa.never}
		}
		for _, format := range []string{"table", "json"} {
			cases = append(cases, trustCase{name: "sacct " + sa.name + " " + format,
				args: []string{"job", "77", "--tsdb.path=" + empty, "--format=" + format, "--slurm.squeue=" + noJobs, "--slurm.sacct=" + prog},
				exit: 1, want: []string{sa.want}, never: never})
		}
	}

	// Web configs: screened before exporter-toolkit parses them, for
	// check-config and for every listener's start.
	aliasBomb := func(levels, width int) string {
		var b strings.Builder
		b.WriteString("a0: &a0 [" + strings.TrimSuffix(strings.Repeat(`"lol",`, width), ",") + "]\n")
		for l := 1; l < levels; l++ {
			fmt.Fprintf(&b, "a%d: &a%d [%s]\n", l, l, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d,", l-1), width), ","))
		}
		fmt.Fprintf(&b, "tls_server_config: *a%d\n", levels-1)
		return b.String()
	}
	webFifo := filepath.Join(dir, "web.fifo")
	if err := syscall.Mkfifo(webFifo, 0o600); err != nil {
		t.Fatal(err)
	}
	webs := map[string]string{
		"bomb 9x9":            aliasBomb(9, 9),
		"bomb 6x20":           aliasBomb(6, 20),
		"bomb 12x4":           aliasBomb(12, 4),
		"bomb 3x1000":         aliasBomb(3, 1000),
		"bomb in basic auth":  "x: &x {a: b}\ny: &y [*x,*x,*x,*x,*x,*x,*x,*x,*x,*x]\nz: &z [*y,*y,*y,*y,*y,*y,*y,*y,*y,*y]\nw: &w [*z,*z,*z,*z,*z,*z,*z,*z,*z,*z]\nv: &v [*w,*w,*w,*w,*w,*w,*w,*w,*w,*w]\nu: &u [*v,*v,*v,*v,*v,*v,*v,*v,*v,*v]\nbasic_auth_users: *u\n",
		"two documents":       "basic_auth_users: {a: b}\n---\ntls_server_config: {}\n",
		"unknown key":         "basic_auth_userz: {a: b}\n",
		"bad bcrypt":          "basic_auth_users:\n  admin: change-me\n",
		"missing cert":        "tls_server_config:\n  cert_file: /nonexistent/cert.pem\n  key_file: /nonexistent/key.pem\n",
		"cert without key":    "tls_server_config:\n  cert_file: /etc/hostname\n",
		"not a map":           "- a\n- b\n",
		"undefined alias":     "basic_auth_users: *nothere\n",
		"tab indent":          "basic_auth_users:\n\tadmin: x\n",
		"nan":                 "http_server_config:\n  http2: .nan\n",
		"min version garbage": "tls_server_config:\n  min_version: TLS09\n",
		"client auth garbage": "tls_server_config:\n  client_auth_type: Sometimes\n",
		"headers injection":   "http_server_config:\n  headers:\n    \"X-A\\r\\nSet-Cookie\": v\n",
		"cipher garbage":      "tls_server_config:\n  cipher_suites: [TLS_NULL_WITH_NULL_NULL]\n",
		"big":                 "# " + strings.Repeat("x", 2<<20) + "\n",
		"binary":              "\x00\x01\x02\xff\xfe",
		"escape in key":       "\x1b[2J: 1\n",
		"deep nesting":        strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "\n",
		"merge key bomb":      "a: &a {x: 1}\nb: &b {<<: [*a,*a,*a,*a,*a,*a,*a,*a]}\nc: &c {<<: [*b,*b,*b,*b,*b,*b,*b,*b]}\nd: &d {<<: [*c,*c,*c,*c,*c,*c,*c,*c]}\ne: &e {<<: [*d,*d,*d,*d,*d,*d,*d,*d]}\nf: &f {<<: [*e,*e,*e,*e,*e,*e,*e,*e]}\ng: &g {<<: [*f,*f,*f,*f,*f,*f,*f,*f]}\n",
	}
	i := 0
	for name, body := range webs {
		p := write(fmt.Sprintf("web-%d.yml", i), body, 0o600)
		i++
		cases = append(cases,
			trustCase{name: "web config " + name + " check-config", args: []string{"check-config", "--web.config.file=" + p}, exit: 2, want: []string{p}},
			trustCase{name: "web config " + name + " exporter", args: []string{"exporter", "--source=sim", "--web.listen-address=127.0.0.1:0", "--web.config.file=" + p}, exit: 2, want: []string{p}})
	}
	for name, p := range map[string]string{"FIFO": webFifo, "/dev/zero": "/dev/zero", "folder": dir, "missing": filepath.Join(dir, "absent.yml")} {
		cases = append(cases, trustCase{name: "web config " + name, args: []string{"check-config", "--web.config.file=" + p}, exit: 2, want: []string{p}})
	}

	// Secret files: the Hub token, read at start through the config-file
	// checks; and the SMTP password file of a report config.
	tokFifo := filepath.Join(dir, "token.fifo")
	if err := syscall.Mkfifo(tokFifo, 0o600); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join("..", "..", "deploy", "examples", "policy.yaml")
	for name, p := range map[string]string{
		"FIFO": tokFifo, "/dev/zero": "/dev/zero", "/dev/urandom": "/dev/urandom", "folder": dir, "missing": filepath.Join(dir, "no-token"),
		"empty":      write("tok-empty", "", 0o600),
		"blank":      write("tok-blank", " \n\n", 0o600),
		"two tokens": write("tok-two", "aaaa\nbbbb\n", 0o600),
		"spaced":     write("tok-spaced", "aaaa bbbb\n", 0o600),
		"big":        write("tok-big", strings.Repeat("a", 8192), 0o600),
	} {
		cases = append(cases, trustCase{name: "hub token " + name,
			args: []string{"analyzer", "--policy.file", policy, "--storage.path", filepath.Join(dir, "s.db"), "--jupyterhub.url=http://127.0.0.1:1",
				"--jupyterhub.token-file=" + p, "--kubernetes.kubeconfig=" + filepath.Join(dir, "kubeconfig")},
			exit: 2, want: []string{"--jupyterhub.token-file"}})
	}
	for _, u := range []string{"file:///etc/passwd", "http://", "gopher://hub:70", "http://hub:8081\r\nX: y", "hub:8081", "//hub", "http://[::1"} {
		cases = append(cases, trustCase{name: fmt.Sprintf("hub url %q", u),
			args: []string{"analyzer", "--policy.file", policy, "--jupyterhub.url=" + u, "--jupyterhub.token-file=" + write("tok-ok", "tok3n\n", 0o600),
				"--kubernetes.kubeconfig=" + filepath.Join(dir, "kubeconfig")}, exit: 2, want: []string{"--jupyterhub.url"}})
	}

	// A Prometheus (or a proxy in front of it) whose errors carry
	// terminal escapes and echo credentials: analyze and job print neither.
	for name, answer := range map[string]func(w http.ResponseWriter, r *http.Request){
		"API error with escapes": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"status":"error","errorType":"bad_data","error":"\u001b[2J\u001b]0;owned\u0007parse error \u202egnp"}`)
		},
		"HTML error echoing headers": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprintf(w, "<h1>\x1b[31mbad gateway</h1>Authorization: Bearer sekr1t-0123456789abcdef\n")
		},
		"warnings with escapes": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"status":"success","warnings":["\u001b[2Jwarn"],"data":{"resultType":"vector","result":[{"metric":{"__name__":"x","hostname":"\u001b[2J"},"value":[1,"1"]}]}}`)
		},
		"redirect loop": func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, r.URL.String(), http.StatusFound) },
	} {
		srv := httptest.NewServer(http.HandlerFunc(answer))
		t.Cleanup(srv.Close)
		cases = append(cases,
			trustCase{name: "prometheus " + name + " analyze", args: []string{"analyze", "--prometheus.url=" + srv.URL, "--from=-1h"}, exit: -1, want: []string{"127.0.0.1"}, never: []string{"sekr1t"}},
			trustCase{name: "prometheus " + name + " job", args: []string{"job", "77", "--prometheus.url=" + srv.URL, "--slurm.squeue="}, exit: -1, never: []string{"sekr1t"}})
	}

	if len(cases) < 150 {
		t.Fatalf("only %d cases, want at least 150", len(cases))
	}
	t.Logf("%d hostile trust-boundary cases", len(cases))
	if err := os.MkdirAll(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var worst time.Duration
	logRaceSample(t, len(cases))
	for i, tc := range cases {
		if !inRaceSample(i) {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(self, tc.args...)
			cmd.Env = append(os.Environ(), asMain+"=1", "GOMAXPROCS=2")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("still running after 20s: %s", stderr.String())
			}
			took := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			worst = max(worst, took)
			out := stdout.String() + stderr.String()
			if code := cmd.ProcessState.ExitCode(); tc.exit >= 0 && code != tc.exit {
				t.Errorf("exit %d, want %d: %s", code, tc.exit, out)
			}
			if took > hostileTime {
				t.Errorf("took %v of CPU, more than %v", took, hostileTime)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("message lacks %q: %s", w, out)
				}
			}
			for _, n := range append(tc.never, "\x1b", "\x07", "\u202e") {
				if strings.Contains(out, n) {
					t.Errorf("output holds %q: %q", n, out)
				}
			}
			if strings.Contains(out, "\"source\": \"admin_comment\"") || strings.Contains(out, "Source: admin_comment") {
				var r jobview.Report
				if json.Unmarshal(stdout.Bytes(), &r) == nil && (r.Job != "77" || r.User != "root") {
					t.Errorf("a foreign summary was shown: job %q user %q", r.Job, r.User)
				}
			}
		})
	}
	t.Logf("slowest case %v of CPU", worst)
}
