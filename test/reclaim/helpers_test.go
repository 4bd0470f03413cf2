package reclaim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/internal/execrun"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// need skips (or, under CI, fails) a test whose external binary is missing.
func need(t *testing.T, why string) {
	t.Helper()
	testtool.Missing(t, why)
}

func lookPath(names ...string) string {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
		for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin"} {
			if p := filepath.Join(dir, n); fileExists(p) {
				return p
			}
		}
	}
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

var slurmOnce sync.Once
var slurmConf, slurmErr string

// slurm makes sure a Slurm cluster is up and SLURM_CONF names it, and
// holds gpus of this package's share of the cluster's GPUs until the test
// ends: as many as the test holds jobs at once (each takes one GPU).
//
// SLURM_CONF is set for the whole process, once, before the first test
// uses it, and never changed: every test of the package uses the same
// cluster, so the tests may run in parallel (t.Setenv forbids that).
func slurm(t *testing.T, gpus int64) {
	t.Helper()
	if lookPath("sbatch") == "" || lookPath("slurmctld") == "" || lookPath("munged") == "" {
		need(t, "slurm not installed; .ci/run installs it (slurm-wlm munge) and starts test/slurm/start.sh")
	}
	slurmOnce.Do(func() {
		if c := os.Getenv("GPUWATCH_SLURM_CONF"); c != "" {
			slurmConf = c
			return
		}
		if os.Getuid() != 0 {
			slurmErr = "GPUWATCH_SLURM_CONF not set and not root: run eval \"$(test/slurm/start.sh)\" first, as .ci/run does"
			return
		}
		dir, err := os.MkdirTemp("", "gpuwatch-reclaim-slurm")
		if err != nil {
			slurmErr = err.Error()
			return
		}
		cmd := exec.Command("../slurm/start.sh")
		// The shipped prolog and epilog write the job map, as on a real node.
		cmd.Env = append(os.Environ(), "GPUWATCH_SLURM_DIR="+dir, "GPUWATCH_SLURMCTLD_PORT=16847", "GPUWATCH_SLURMD_PORT=16848")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			slurmErr = fmt.Sprintf("start.sh: %v\n%s", err, errb.String())
			return
		}
		slurmConf = filepath.Join(dir, "etc", "slurm.conf")
		privateSlurmDir = dir
	})
	if slurmErr != "" {
		if strings.Contains(slurmErr, "not root") {
			need(t, slurmErr)
		}
		t.Fatal(slurmErr)
	}
	slurmEnvOnce.Do(func() {
		if err := os.Setenv("SLURM_CONF", slurmConf); err != nil {
			slurmEnvErr = err
		}
	})
	if slurmEnvErr != nil {
		t.Fatal(slurmEnvErr)
	}
	holdGPUs(t, gpus)
}

var (
	slurmEnvOnce sync.Once
	slurmEnvErr  error
)

// The tests of this package hold at most half the cluster's GPUs and one
// more at once (at least three): TestOwnersFactsEndToEnd's three jobs for
// two minutes and a test of two jobs beside it, while the other packages
// sharing the cluster find room for theirs, and no job of ours waits
// behind a long test of ours past its submit timeout.
var (
	gpuShareOnce sync.Once
	gpuShare     *semaphore.Weighted
	gpuShareSize int64
)

func holdGPUs(t *testing.T, n int64) {
	t.Helper()
	gpuShareOnce.Do(func() {
		gpus := int64(8) // start.sh's default
		if v, err := strconv.ParseInt(os.Getenv("GPUWATCH_SLURM_GPUS"), 10, 64); err == nil && v > 0 {
			gpus = v
		}
		gpuShareSize = max(3, gpus/2+1)
		gpuShare = semaphore.NewWeighted(gpuShareSize)
	})
	if n == 0 {
		return
	}
	if n > gpuShareSize {
		t.Fatalf("a test holds %d GPUs, more than the package's share of %d", n, gpuShareSize)
	}
	if err := gpuShare.Acquire(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gpuShare.Release(n) })
}

var privateSlurmDir string

func TestMain(m *testing.M) {
	// Invoked through a link named scancel, the test binary is the scancel
	// wrapper of TestAnalyzerBinary (before the testing flags are parsed).
	if filepath.Base(os.Args[0]) == "scancel" {
		os.Exit(scancelWrapper(os.Args[1:]))
	}
	code := m.Run()
	if privateSlurmDir != "" {
		cmd := exec.Command("../slurm/stop.sh")
		cmd.Env = append(os.Environ(), "GPUWATCH_SLURM_DIR="+privateSlurmDir)
		_ = cmd.Run()
		_ = os.RemoveAll(privateSlurmDir)
	}
	os.Exit(code)
}

// partitions makes sure the cluster has these partitions (on every node),
// as an administrator would with scontrol; existing ones are kept.
func partitions(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		out, err := exec.Command("scontrol", "create", "PartitionName="+n, "Nodes=ALL", "State=UP", "MaxTime=INFINITE").CombinedOutput()
		if err != nil && exec.Command("scontrol", "show", "partition", n).Run() != nil {
			t.Fatalf("scontrol create partition %s: %v: %s", n, err, out)
		}
	}
}

// submit runs a job in the default partition that traps the checkpoint
// signal and records it in marker.
func submit(t *testing.T, dir, name string) (id, marker string) {
	t.Helper()
	return submitTo(t, dir, name, "")
}

// submitTo is submit into a partition ("" for the default).
func submitTo(t *testing.T, dir, name, partition string) (id, marker string) {
	t.Helper()
	var args []string
	if partition != "" {
		args = append(args, "--partition="+partition)
	}
	id, marker = testtool.SubmitSignalJob(t, dir, name, args...)
	waitState(t, id, "RUNNING")
	return id, marker
}

func jobState(t *testing.T, id string) string {
	t.Helper()
	s := &action.Slurm{Runner: execrun.Exec{Timeout: 10 * time.Second}}
	st, err := s.JobState(context.Background(), id)
	if err != nil {
		t.Fatalf("job %s state: %v", id, err)
	}
	return st
}

func waitState(t *testing.T, id string, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		st := jobState(t, id)
		for _, w := range want {
			if st == w {
				return st
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is %q, want one of %v", id, st, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func waitFile(t *testing.T, path, want string) {
	t.Helper()
	if err := waitFileErr(path, want); err != nil {
		t.Fatal(err)
	}
}

func waitFileErr(path, want string) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), want) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s holds %q, want %q", path, b, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// countingRunner logs every scancel to a file shared by all processes of a
// test, so "exactly one cancel" is counted across a crash and a restart.
type countingRunner struct {
	log string
	// before runs before each plain cancel (scancel ID), after after it.
	before, after func()
}

func (c countingRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	isCancel := filepath.Base(name) == "scancel" && len(args) == 1
	if isCancel && c.before != nil {
		c.before()
	}
	out, err := execrun.Exec{Timeout: 30 * time.Second}.Run(ctx, name, args...)
	if filepath.Base(name) == "scancel" {
		f, ferr := os.OpenFile(c.log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if ferr == nil {
			fmt.Fprintf(f, "%s\n", strings.Join(args, " "))
			f.Close()
		}
	}
	if isCancel && c.after != nil {
		c.after()
	}
	return out, err
}

func lines(path string) []string {
	b, _ := os.ReadFile(path)
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// plainCancels is the job ids a fake scancel logged for cancels, its
// signals (--signal=...) left out.
func plainCancels(log string) []string {
	var out []string
	for _, l := range lines(log) {
		if !strings.HasPrefix(l, "--signal") {
			out = append(out, l)
		}
	}
	return out
}

// auditCommand reads job's audit as an operator would, through
// `gpuwatch audit --format=json` on the store the flag names
// (--storage.path=... or --storage.url=...).
func auditCommand(t *testing.T, bin, store, job string) []audit.Event {
	t.Helper()
	js, err := exec.Command(bin, "audit", "--format=json", store, "--job="+job).Output()
	if err != nil {
		t.Fatalf("gpuwatch audit: %v", err)
	}
	var evs []audit.Event
	if err := json.Unmarshal(js, &evs); err != nil {
		t.Fatalf("audit json: %v\n%s", err, js)
	}
	return evs
}
