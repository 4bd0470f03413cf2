package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/clikit"
	"github.com/gpuwatch/gpuwatch/internal/testpg"
)

// secretCase is one hostile input where a secret or someone else's text
// meets gpuwatch: the command line, extra environment, the exit code
// (-1: any), what the message must say, and what no output may hold.
type secretCase struct {
	name  string
	args  []string
	env   []string
	exit  int
	want  []string
	never []string
}

// hostileSecret is in every secret these cases hand gpuwatch: no output
// may ever hold it.
const hostileSecret = "Zq9SECRETzq9"

// TestHostileSecretsAndText feeds the surfaces where gpuwatch holds a
// secret what a careless operator or an attacker would give it: secret
// files others can read (the Hub token, the SMTP password, the storage
// URL), URLs with a token in their path, query or user info that are
// refused, storage URLs that are not PostgreSQL. Each case runs as a real
// process: a clear refusal naming the flag or file, and the secret never
// in anything it prints.
func TestHostileSecretsAndText(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// As root, a group-readable file is refused only when root does not
	// own it: hand those to nobody.
	notRoot := func(p string) string {
		if os.Getuid() == 0 {
			if err := os.Chown(p, 65534, -1); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	var cases []secretCase
	policy := filepath.Join("..", "..", "deploy", "examples", "policy.yaml")
	findings := write("findings.json", "[]", 0o600)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	db := filepath.Join(dir, "s.db")

	// Secret files whose mode lets others read or change them.
	type loose struct {
		name  string
		mode  os.FileMode
		owned bool // owned by someone other than root
	}
	modes := []loose{{"0644", 0o644, false}, {"0604", 0o604, false}, {"0666", 0o666, false}, {"0602", 0o602, false},
		{"0601", 0o601, false}, {"0777", 0o777, false}, {"0444", 0o444, false}, {"0646", 0o646, false},
		{"0640 not root's", 0o640, true}, {"0660 not root's", 0o660, true}, {"0620 not root's", 0o620, true},
		{"0440 not root's", 0o440, true}, {"0660 root's", 0o660, false}}
	for i, m := range modes {
		file := func(prefix, content string) string {
			p := write(fmt.Sprintf("%s-%d", prefix, i), content, m.mode)
			if m.owned {
				notRoot(p)
			}
			return p
		}
		tok := file("tok", hostileSecret+"\n")
		cases = append(cases, secretCase{name: "hub token mode " + m.name,
			args: []string{"analyzer", "--policy.file", policy, "--storage.path", db, "--jupyterhub.url=http://127.0.0.1:1",
				"--jupyterhub.token-file=" + tok, "--kubernetes.kubeconfig=" + kubeconfig},
			exit: 2, want: []string{"--jupyterhub.token-file", tok, "chmod"}})
		url := file("url", "postgres://gpuwatch:"+hostileSecret+"@127.0.0.1:1/x\n")
		cases = append(cases, secretCase{name: "storage url file mode " + m.name,
			args: []string{"audit", "--storage.url-file=" + url}, exit: 2, want: []string{"--storage.url-file", url, "chmod"}})
		pw := file("pw", hostileSecret+"\n")
		rep := write(fmt.Sprintf("report-%d.yml", i), "smtp:\n  host: 127.0.0.1\n  port: 1\n  from: gpuwatch@example.org\n  username: gpuwatch\n  password_file: "+pw+"\n", 0o600)
		cases = append(cases, secretCase{name: "smtp password file mode " + m.name,
			args: []string{"analyzer", "--policy.file", policy, "--storage.path", db, "--findings.file", findings, "--once", "--report.config", rep},
			exit: 2, want: []string{"password_file", pw, "chmod"}})
	}

	// The storage URL from a file: anything but one PostgreSQL URL.
	for name, content := range map[string]string{
		"sqlite path":  filepath.Join(dir, "x.db") + "?" + hostileSecret + "\n",
		"mysql":        "mysql://root:" + hostileSecret + "@db/x\n",
		"file url":     "file:///etc/passwd?pw=" + hostileSecret + "\n",
		"two lines":    "postgres://u:" + hostileSecret + "@h/x\npostgres://v@h/y\n",
		"empty":        "",
		"escape":       "\x1b[2Jpostgres://u:" + hostileSecret + "@h/x\n",
		"http":         "http://u:" + hostileSecret + "@h/x\n",
		"token in url": "sqlserver://h/x?password=" + hostileSecret + "\n",
	} {
		p := write("url-"+strings.ReplaceAll(name, " ", "-"), content, 0o600)
		cases = append(cases, secretCase{name: "storage url file " + name, args: []string{"report", "--storage.url-file=" + p}, exit: 2,
			want: []string{"--storage.url"}})
	}
	okURL := write("url-ok", "postgres://u:"+hostileSecret+"@127.0.0.1:1/x\n", 0o600)
	cases = append(cases,
		secretCase{name: "storage url and url file", args: []string{"audit", "--storage.url=postgres://a@h/x", "--storage.url-file=" + okURL}, exit: 2, want: []string{"give one"}},
		secretCase{name: "storage url file missing", args: []string{"audit", "--storage.url-file=" + filepath.Join(dir, "absent")}, exit: 2, want: []string{"--storage.url-file"}},
		secretCase{name: "storage url file FIFO-free device", args: []string{"audit", "--storage.url-file=/dev/zero"}, exit: 2, want: []string{"not a regular file"}},
		// Unreachable: the error names no password.
		secretCase{name: "storage url file unreachable", args: []string{"audit", "--storage.url-file=" + okURL}, exit: 1},
		secretCase{name: "storage url env unreachable", args: []string{"audit"}, env: []string{"GPUWATCH_STORAGE_URL=postgres://u:" + hostileSecret + "@127.0.0.1:1/x"}, exit: 1},
	)
	// The storage URL on the command line, refused: never echoed.
	for _, u := range []string{"mysql://root:" + hostileSecret + "@db/x", "sqlite:///x.db?key=" + hostileSecret, "https://u:" + hostileSecret + "@db/",
		"postgres//u:" + hostileSecret + "@db/x", " postgres://u:" + hostileSecret + "@db/x"} {
		cases = append(cases, secretCase{name: fmt.Sprintf("storage url %.12q", u), args: []string{"audit", "--storage.url=" + u}, exit: 2,
			want: []string{"--storage.url"}})
	}

	// URLs refused with a token in their path, query, fragment or user
	// info: the message names the host at most.
	hookURLs := []string{
		"ftp://hooks.slack.com/services/T0/B0/" + hostileSecret,
		"hooks.slack.com/services/T0/B0/" + hostileSecret,
		"gopher://mm.example/hooks/" + hostileSecret,
		"file:///hooks/" + hostileSecret,
		"ws://u:" + hostileSecret + "@teams.example/webhookb2/x",
		"teams.example/workflows?sig=" + hostileSecret,
		"javascript:alert('" + hostileSecret + "')",
		"https:///" + hostileSecret,
		"//chat.example/hooks/" + hostileSecret,
		"http:" + hostileSecret,
	}
	for i, u := range hookURLs {
		for _, ch := range []string{"webhook", "alertmanager"} {
			body := "channels:\n  " + ch + ":\n    url: " + fmt.Sprintf("%q", u) + "\n"
			p := write(fmt.Sprintf("policy-%s-%d.yml", ch, i), body, 0o600)
			cases = append(cases, secretCase{name: fmt.Sprintf("%s url %d", ch, i), args: []string{"check-config", "--policy.file=" + p}, exit: 2,
				want: []string{"url"}})
		}
	}
	for i, u := range []string{"ftp://u:" + hostileSecret + "@hub:8081/", "hub:8081/?token=" + hostileSecret, "gopher://hub/" + hostileSecret,
		"http://hub:8081\r\n" + hostileSecret} {
		tok := write(fmt.Sprintf("hub-ok-%d", i), "tok3n\n", 0o600)
		cases = append(cases, secretCase{name: fmt.Sprintf("hub url %d", i), args: []string{"analyzer", "--policy.file", policy,
			"--jupyterhub.url=" + u, "--jupyterhub.token-file=" + tok, "--kubernetes.kubeconfig=" + kubeconfig}, exit: 2, want: []string{"--jupyterhub.url"}})
	}
	for i, u := range []string{"ftp://u:" + hostileSecret + "@prom:9090/", "prom:9090/api?token=" + hostileSecret, "gopher://prom/" + hostileSecret} {
		cases = append(cases, secretCase{name: fmt.Sprintf("prometheus url %d", i), args: []string{"analyze", "--prometheus.url=" + u, "--from=-1h"},
			exit: 2, want: []string{"--prometheus.url"}})
	}

	if len(cases) < 80 {
		t.Fatalf("only %d cases", len(cases))
	}
	t.Logf("%d hostile secret cases", len(cases))
	runSecretCases(t, cases)
}

// runSecretCases runs each case as the gpuwatch binary (this test binary
// re-executed as main).
func runSecretCases(t *testing.T, cases []secretCase) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(self, tc.args...)
			cmd.Env = append(append(slices.DeleteFunc(os.Environ(), func(e string) bool {
				return strings.HasPrefix(e, "GPUWATCH_STORAGE_URL=")
			}), asMain+"=1", "GOMAXPROCS=2"), tc.env...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
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
				t.Fatalf("still running after 20s: %s", out.String())
			}
			s := out.String()
			if code := cmd.ProcessState.ExitCode(); tc.exit >= 0 && code != tc.exit {
				t.Errorf("exit %d, want %d: %s", code, tc.exit, s)
			}
			for _, w := range tc.want {
				if !strings.Contains(s, w) {
					t.Errorf("message lacks %q: %s", w, s)
				}
			}
			for _, n := range append(tc.never, hostileSecret, "\x1b", "\u202e") {
				if strings.Contains(s, n) {
					t.Errorf("output holds %q: %q", n, s)
				}
			}
		})
	}
}

// daemon is a gpuwatch process started by a test, and its log.
type daemon struct {
	cmd *exec.Cmd
	log *syncBuffer
}

type syncBuffer struct {
	mu chan struct{}
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu <- struct{}{}
	defer func() { <-s.mu }()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu <- struct{}{}
	defer func() { <-s.mu }()
	return s.b.String()
}

// startDaemon starts gpuwatch args and waits until its log holds ready.
func startDaemon(t *testing.T, env []string, ready string, args ...string) *daemon {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{cmd: exec.Command(self, args...), log: &syncBuffer{mu: make(chan struct{}, 1)}}
	d.cmd.Env = append(append(slices.DeleteFunc(os.Environ(), func(e string) bool {
		return strings.HasPrefix(e, "GPUWATCH_STORAGE_URL=")
	}), asMain+"=1"), env...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = d.cmd.Process.Kill()
		_ = d.cmd.Wait()
	})
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(d.log.String(), ready); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) || d.cmd.ProcessState != nil {
			t.Fatalf("%v: no %q after 60s: %s", args, ready, d.log.String())
		}
	}
	return d
}

// listenAddr is the first address the daemon's start line names.
var listenAddr = regexp.MustCompile(`listen="?\[?([0-9.:]+)`)

// TestStorageURLNeverInProcessList: given through --storage.url-file or
// $GPUWATCH_STORAGE_URL, the database password is in neither the process
// list (/proc/PID/cmdline, what ps shows every user) nor the log; given on
// the command line, the analyzer warns that it is there. Against the real
// PostgreSQL (whose trust authentication ignores the password).
func TestStorageURLNeverInProcessList(t *testing.T) {
	base := testpg.URL(t)
	withPW := strings.Replace(base, "://", "://gpuwatch:"+hostileSecret+"@", 1)
	if strings.Contains(base, "@") {
		withPW = regexp.MustCompile(`://([^:@/]+)(:[^@/]*)?@`).ReplaceAllString(base, "://${1}:"+hostileSecret+"@")
	}
	dir := t.TempDir()
	urlFile := filepath.Join(dir, "storage-url")
	if err := os.WriteFile(urlFile, []byte(withPW+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	findings := filepath.Join(dir, "findings.json")
	if err := os.WriteFile(findings, []byte("[]"), 0o600); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join("..", "..", "deploy", "examples", "policy.yaml")
	args := []string{"analyzer", "--policy.file", policy, "--findings.file", findings, "--web.listen-address=127.0.0.1:0", "--schedule=@every 1h"}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		warn bool
	}{
		{"file", nil, []string{"--storage.url-file=" + urlFile}, false},
		{"environment", []string{"GPUWATCH_STORAGE_URL=" + withPW}, nil, false},
		{"command line", nil, []string{"--storage.url=" + withPW}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startDaemon(t, tc.env, "analyzer started", append(slices.Clone(args), tc.args...)...)
			cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", d.cmd.Process.Pid))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(string(cmdline), hostileSecret); got != tc.warn {
				t.Errorf("password in the process list: %v, want %v", got, tc.warn)
			}
			log := d.log.String()
			if strings.Contains(log, hostileSecret) {
				t.Errorf("the log holds the password: %s", log)
			}
			if got := strings.Contains(log, "process list"); got != tc.warn {
				t.Errorf("warning about the process list: %v, want %v: %s", got, tc.warn, log)
			}
		})
	}
}

// TestAnalyzerWarnsWhenListeningWithoutAuth: the analyzer says once, at
// start, that it listens beyond loopback without authentication; on
// loopback it says nothing.
func TestAnalyzerWarnsWhenListeningWithoutAuth(t *testing.T) {
	dir := t.TempDir()
	findings := filepath.Join(dir, "findings.json")
	if err := os.WriteFile(findings, []byte("[]"), 0o600); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join("..", "..", "deploy", "examples", "policy.yaml")
	for i, tc := range []struct {
		listen string
		warn   bool
	}{{"127.0.0.1:0", false}, {"0.0.0.0:0", true}, {":0", true}} {
		t.Run(tc.listen, func(t *testing.T) {
			d := startDaemon(t, nil, "analyzer started", "analyzer", "--policy.file", policy, "--findings.file", findings,
				"--storage.path", filepath.Join(dir, fmt.Sprintf("s%d.db", i)), "--web.listen-address="+tc.listen, "--schedule=@every 1h")
			log := d.log.String()
			if n := strings.Count(log, clikit.OpenListenerWarning); n != map[bool]int{true: 1, false: 0}[tc.warn] {
				t.Errorf("%d warnings, want warn=%v: %s", n, tc.warn, log)
			}
		})
	}
}

// TestSilentConnectionsDoNotDelayScrape: 600 connections that never send
// a request (more than the 512 slots) used to hold every slot until the
// header timeout, and /metrics waited 9 s. Against the real exporter, the
// scrape behind them takes at most 20 times a calibration scrape of the
// same exporter in the same run.
func TestSilentConnectionsDoNotDelayScrape(t *testing.T) {
	d := startDaemon(t, nil, "gpuwatch exporter started", "exporter", "--source=sim", "--web.listen-address=127.0.0.1:0")
	m := listenAddr.FindStringSubmatch(d.log.String())
	if m == nil {
		t.Fatalf("no address in %s", d.log.String())
	}
	addr := m[1]
	scrape := func() time.Duration {
		began := time.Now()
		c, err := net.DialTimeout("tcp", addr, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(body, []byte("DCGM_FI_DEV_GPU_UTIL")) {
			t.Fatalf("scrape: %d %.200s", resp.StatusCode, body)
		}
		return time.Since(began)
	}
	scrape() // warm
	var cal []time.Duration
	for range 5 {
		cal = append(cal, scrape())
	}
	slices.Sort(cal)
	calibration := cal[len(cal)/2]
	silent := make([]net.Conn, 0, 600)
	t.Cleanup(func() {
		for _, c := range silent {
			c.Close()
		}
	})
	for range 600 {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, c)
	}
	// Past the grace (a tenth of the 10 s header timeout) they are silent.
	time.Sleep(1500 * time.Millisecond)
	took := scrape()
	t.Logf("scrape behind 600 silent connections: %v, calibration %v (%.1fx)", took, calibration, float64(took)/float64(calibration))
	if took > 20*calibration {
		t.Errorf("scrape behind 600 silent connections took %v, %.0f times the calibration %v", took, float64(took)/float64(calibration), calibration)
	}
}
