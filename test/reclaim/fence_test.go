package reclaim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/internal/testpg"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// fencePolicy is the policy of both analyzers; only the webhook differs,
// so that each delivery names the process that made it.
const fencePolicy = `
dry_run: false
min_warning: 1s
stale_after: 1h
retry: {initial_backoff: 0s}
channels:
  webhook: {url: %q}
tiers:
  - name: development
    match: {partitions: [debug]}
    reclaim: true
    rules:
      - pattern: cpu_only
        steps:
          - {action: notify, after: 0s}
          - {action: warn, after: 0s}
          - {action: reclaim, after: 2s}
`

// senders counts webhook deliveries by the path each analyzer posts to.
type senders struct {
	mu  sync.Mutex
	got map[string][]string // path -> steps, in order
	srv *httptest.Server
}

func newSenders(t *testing.T) *senders {
	s := &senders{got: map[string][]string{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p action.WebhookPayload
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.got[r.URL.Path] = append(s.got[r.URL.Path], p.Step)
		s.mu.Unlock()
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *senders) of(path string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got[path]...)
}

// fifoFeeder serves an analyzer's --findings.file through a named pipe:
// each cycle's read blocks until the feeder writes, so the test knows the
// process is between its leadership check and its acts. On request it
// stops the process (SIGSTOP) right there, before handing it the findings.
type fifoFeeder struct {
	path string
	mu   sync.Mutex
	body []byte
	pid  int
	// stopNext: SIGSTOP the reader at its next read; stopped is closed
	// once it is, and the feeder waits for continued (the stopped reader
	// still holds the pipe open: another write would join its read).
	stopNext  bool
	stopped   chan struct{}
	continued chan struct{}
	reads     int
}

func (f *fifoFeeder) set(body []byte, pid int) {
	f.mu.Lock()
	f.body, f.pid = body, pid
	f.mu.Unlock()
}

func (f *fifoFeeder) served() int { f.mu.Lock(); defer f.mu.Unlock(); return f.reads }

// serve answers each read until ctx ends. A non-blocking open succeeds
// only while a reader has the pipe open: the analyzer is inside its read.
func (f *fifoFeeder) serve(ctx context.Context, t *testing.T) {
	for ctx.Err() == nil {
		w, err := os.OpenFile(f.path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			if !errors.Is(err, syscall.ENXIO) {
				t.Errorf("open %s: %v", f.path, err)
				return
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		f.mu.Lock()
		body, pid, stop := f.body, f.pid, f.stopNext
		f.stopNext = false
		f.reads++
		f.mu.Unlock()
		if stop {
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Errorf("SIGSTOP %d: %v", pid, err)
			}
			close(f.stopped)
		}
		if _, err := w.Write(body); err != nil {
			t.Errorf("write %s: %v", f.path, err)
		}
		w.Close()
		if stop {
			select {
			case <-f.continued:
			case <-ctx.Done():
				return
			}
		}
		// The reader reads to the end and closes within milliseconds; an
		// open before that would feed the same read twice. Cycles are a
		// second apart.
		time.Sleep(300 * time.Millisecond)
	}
}

// The acceptance, with the real binary, the real PostgreSQL and
// the real Slurm: analyzer a leads; it is stopped (SIGSTOP) after its
// cycle checked leadership and before it read its findings, for longer
// than its lease. Analyzer b takes over, notifies, warns and cancels the
// job (scancel), and closes the episode once the job is gone. a is then
// continued (SIGCONT) with findings that still show the job idle: it
// sends nothing, cancels nothing and opens no episode (its lease
// generation is refused and its renew deadline is past); every step is
// audited once, intended before done.
//
// It stays serial: its leader must renew a 3 s lease every 1 s cycle while
// the standby watches, a margin that the load of the other tests could
// eat (the standby would take over early and act).
func TestPausedAnalyzerProcessCannotAct(t *testing.T) {
	slurm(t, 1)
	bin := gpuwatchBinary(t)
	url := testpg.URL(t)
	dir := t.TempDir()
	hooks := newSenders(t)
	job, _ := submit(t, dir, "fence")
	if err := os.Symlink(os.Args[0], filepath.Join(dir, "scancel")); err != nil {
		t.Fatal(err)
	}
	idleJob, err := json.Marshal([]finding.Finding{jobFinding(t, job, time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	start := func(name, findings string) (*exec.Cmd, *syncBuf) {
		policyFile := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(policyFile, []byte(fmt.Sprintf(fencePolicy, hooks.srv.URL+"/"+name)), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "analyzer", "--storage.url="+url, "--lease.duration=3s", "--schedule=@every 1s",
			"--policy.file="+policyFile, "--findings.file="+findings, "--slurm.scancel="+filepath.Join(dir, "scancel"),
			"--web.listen-address="+testtool.FreeAddr(t))
		cmd.Env = append(os.Environ(), "GPUWATCH_SCANCEL_LOG="+filepath.Join(dir, "cancels-"+name))
		out := &syncBuf{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("%s's output:\n%s", name, out)
			}
		})
		return cmd, out
	}
	// a leads, reading its findings (none yet) through the pipe.
	fifo := filepath.Join(dir, "a.findings")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	feed := &fifoFeeder{path: fifo, stopped: make(chan struct{}), continued: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	var feeding sync.WaitGroup
	defer func() { cancel(); feeding.Wait() }()
	a, aOut := start("a", fifo)
	feed.set([]byte("[]"), a.Process.Pid)
	feeding.Add(1)
	go func() { defer feeding.Done(); feed.serve(ctx, t) }()
	testtool.Eventually(t, 30*time.Second, "a to lead", func() (bool, error) { return feed.served() >= 2, nil })
	// b stands by, with the job idle in its findings.
	bFindings := filepath.Join(dir, "b.json")
	if err := os.WriteFile(bFindings, idleJob, 0o644); err != nil {
		t.Fatal(err)
	}
	_, bOut := start("b", bFindings)
	time.Sleep(2 * time.Second)
	if got := hooks.of("/b"); len(got) != 0 {
		t.Fatalf("b sent %v while a leads\n%s", got, bOut)
	}
	// a checks its leadership, then stops before it sees the idle job.
	feed.mu.Lock()
	feed.body, feed.stopNext = idleJob, true
	feed.mu.Unlock()
	select {
	case <-feed.stopped:
	case <-time.After(30 * time.Second):
		t.Fatalf("a never read its findings again\n%s", aOut)
	}
	stoppedAt := time.Now()
	// b takes over: notify, warn, then the cancel; then the job is gone
	// and b closes the episode.
	testtool.Eventually(t, 60*time.Second, "b to cancel the job", func() (bool, error) {
		return len(plainCancels(filepath.Join(dir, "cancels-b"))) == 1, nil
	})
	if err := os.WriteFile(bFindings, []byte("[]"), 0o644); err != nil {
		t.Fatal(err)
	}
	testtool.Eventually(t, 30*time.Second, "the job to end", func() (bool, error) {
		st := jobState(t, job)
		return st != "RUNNING" && st != "PENDING", nil
	})
	st, err := store.OpenURL(url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	episodes := func() int {
		var n int
		if err := st.DB().QueryRow(`SELECT COUNT(*) FROM escalations`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	testtool.Eventually(t, 30*time.Second, "b to close the episode", func() (bool, error) { return episodes() == 0, nil })
	if held := time.Since(stoppedAt); held < 3*time.Second {
		t.Fatalf("a was stopped only %s, less than its lease", held)
	}
	// a wakes up with the idle job in hand.
	before := len(hooks.of("/b"))
	if err := a.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	close(feed.continued)
	// Its resumed cycle ends: refused, or (were it not fenced) having acted.
	testtool.Eventually(t, 30*time.Second, "a's resumed cycle to end", func() (bool, error) {
		return strings.Contains(aOut.String(), "leadership lost during the cycle") || len(hooks.of("/a")) > 0 ||
			len(lines(filepath.Join(dir, "cancels-a"))) > 0, nil
	})
	time.Sleep(4 * time.Second) // a few more of a's cycles, as standby
	if got := hooks.of("/a"); len(got) != 0 {
		t.Errorf("a sent %v after it woke", got)
	}
	if got := lines(filepath.Join(dir, "cancels-a")); len(got) != 0 {
		t.Errorf("a ran scancel %v after it woke", got)
	}
	if n := episodes(); n != 0 {
		t.Errorf("%d episodes opened after a woke", n)
	}
	if got := hooks.of("/b"); strings.Join(got, " ") != "notify warn" || len(got) != before {
		t.Errorf("b's deliveries %v, want one notify and one warn", got)
	}
	if got := plainCancels(filepath.Join(dir, "cancels-b")); len(got) != 1 || got[0] != job {
		t.Errorf("b's cancels %v, want exactly one of job %s", got, job)
	}
	var got []string
	for _, e := range auditCommand(t, bin, "--storage.url="+url, job) {
		switch e.Step {
		case action.StepNotify, action.StepWarn, action.StepCheckpoint, action.StepReclaim:
			got = append(got, e.Step+":"+string(e.State))
		}
	}
	want := "notify:intended notify:done warn:intended warn:done reclaim:intended reclaim:done"
	if strings.Join(got, " ") != want {
		t.Errorf("audit of job %s:\n got %s\nwant %s", job, strings.Join(got, " "), want)
	}
}

// syncBuf collects a process's output while the test reads it.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
