// Package slurm_test runs the exporter's attribution against a real
// single-node Slurm started by test/slurm/start.sh, with the shipped
// deploy/slurm prolog and epilog writing the job-mapping folder.
//
//	eval "$(test/slurm/start.sh)"
//	go test ./test/slurm/
//	test/slurm/stop.sh
package slurm_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/exporter/attribution"
	"github.com/gpuwatch/gpuwatch/exporter/attribution/jobmap"
	"github.com/gpuwatch/gpuwatch/exporter/collector"
	"github.com/gpuwatch/gpuwatch/exporter/source"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// need skips, or fails under CI, when the Slurm test bed is missing.
func need(t *testing.T) (conf, mapDir string) {
	t.Helper()
	missing := ""
	if _, err := exec.LookPath("sbatch"); err != nil {
		missing = "sbatch not installed; .ci/run installs it (slurm-wlm munge) and starts test/slurm/start.sh"
	} else if conf = os.Getenv("GPUWATCH_SLURM_CONF"); conf == "" {
		missing = "GPUWATCH_SLURM_CONF not set; run eval \"$(test/slurm/start.sh)\" first, as .ci/run does"
	}
	if missing != "" {
		testtool.Missing(t, missing)
	}
	mapDir = os.Getenv("GPUWATCH_JOB_MAPPING_DIR")
	if mapDir == "" {
		mapDir = filepath.Join(filepath.Dir(filepath.Dir(conf)), "job-mapping")
	}
	return conf, mapDir
}

// fakeSource reports n GPUs whose indexes match the fake GPUs of gres.conf,
// and the GPU processes the test sets.
type fakeSource struct {
	n     int
	mu    sync.Mutex
	procs []source.Process
}

func gpuUUID(i int) string { return fmt.Sprintf("GPU-5e1f0000-0000-0000-0000-%012d", i) }

func (s *fakeSource) Name() string { return "fake" }
func (s *fakeSource) Close() error { return nil }
func (s *fakeSource) Collect(context.Context) (*source.Snapshot, error) {
	snap := &source.Snapshot{Hostname: "slurm-test"}
	for i := 0; i < s.n; i++ {
		snap.Devices = append(snap.Devices, source.Device{Index: i, UUID: gpuUUID(i), PCIBusID: fmt.Sprintf("00000000:%02X:00.0", i+1),
			Model: "fake", Up: true, Samples: []source.Sample{{Metric: schema.GPUUtil, Value: 0}}})
	}
	s.mu.Lock()
	snap.Processes = append(snap.Processes, s.procs...)
	s.mu.Unlock()
	return snap, nil
}

func (s *fakeSource) setProcs(p ...source.Process) {
	s.mu.Lock()
	s.procs = p
	s.mu.Unlock()
}

func slurm(t *testing.T, conf string, args ...string) string {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// view is what the rendered series say about jobs.
type view struct {
	hpcJob map[string]string // gpu -> hpc_job label of DCGM_FI_DEV_GPU_UTIL
	info   map[string]string // gpu -> "job user account job_name kind" of gpuwatch_allocation_info
	procs  map[string]string // pid -> job_id of gpuwatch_process_gpu_memory_bytes
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func render(t *testing.T, col *collector.Collector) view {
	t.Helper()
	e, err := col.CollectOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	v := view{hpcJob: map[string]string{}, info: map[string]string{}, procs: map[string]string{}}
	for _, mf := range e.Families {
		for _, m := range mf.GetMetric() {
			l := labels(m)
			switch mf.GetName() {
			case schema.GPUUtil.Name:
				v.hpcJob[l[schema.LabelGPU]] = l[schema.LabelHPCJob]
			case schema.AllocationInfo.Name:
				v.info[l[schema.LabelGPU]] += strings.Join([]string{l[schema.LabelJob], l[schema.LabelUser], l[schema.LabelAccount], l[schema.LabelJobName], l[schema.LabelKind]}, " ")
			case schema.ProcessMemory.Name:
				v.procs[l[schema.LabelPID]] = l[schema.LabelJob] + " " + l[schema.LabelUser]
			}
		}
	}
	return v
}

// gpusOf returns the GPUs whose hpc_job label is job, sorted.
func (v view) gpusOf(job string) []string {
	var g []string
	for gpu, j := range v.hpcJob {
		if j == job {
			g = append(g, gpu)
		}
	}
	sort.Strings(g)
	return g
}

// waitFor renders the collector's view until ok holds, and returns it; on
// a timeout the last view is logged.
func waitFor(t *testing.T, col *collector.Collector, what string, ok func(view) bool) view {
	t.Helper()
	var v view
	seen := false
	defer func() {
		if !seen {
			t.Logf("last view while waiting for %s: %+v", what, v)
		}
	}()
	testtool.Eventually(t, 45*time.Second, what, func() (bool, error) {
		v = render(t, col)
		return ok(v), nil
	})
	seen = true
	return v
}

func TestSlurmJobsOnSeries(t *testing.T) {
	conf, mapDir := need(t)
	ngpus := 8 // start.sh's default
	if n, err := strconv.Atoi(os.Getenv("GPUWATCH_SLURM_GPUS")); err == nil && n >= 4 {
		ngpus = n
	}
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	src := &fakeSource{n: ngpus}
	chain, err := attribution.New(attribution.Options{JobMapDir: mapDir})
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Close()
	col, err := collector.New(collector.Options{Source: src, Attributors: []source.Attributor{chain}, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := chain.Register(col.Registry()); err != nil {
		t.Fatal(err)
	}

	// Two jobs of two GPUs each: one of ours, one run as nobody.
	a := slurm(t, conf, "sbatch", "--parsable", "--gres=gpu:2", "-A", "physics", "-J", "train-a", "-D", os.TempDir(), "-o", "/dev/null", "--wrap", "sleep 120")
	b := slurm(t, conf, "sbatch", "--parsable", "--uid=nobody", "--gres=gpu:2", "-A", "chem", "-J", "interactive-b", "-D", os.TempDir(), "-o", "/dev/null", "--wrap", "sleep 6")
	defer func() {
		cmd := exec.Command("scancel", a, b)
		cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
		_ = cmd.Run()
	}()
	v := waitFor(t, col, "both jobs on the series", func(v view) bool {
		return len(v.gpusOf(a)) == 2 && len(v.gpusOf(b)) == 2
	})
	for _, gpu := range v.gpusOf(a) {
		if want := a + " " + me.Username + " physics train-a batch"; v.info[gpu] != want {
			t.Errorf("gpu %s allocation info = %q, want %q", gpu, v.info[gpu], want)
		}
	}
	for _, gpu := range v.gpusOf(b) {
		if want := b + " nobody chem interactive-b interactive"; v.info[gpu] != want {
			t.Errorf("gpu %s allocation info = %q, want %q", gpu, v.info[gpu], want)
		}
	}

	// The job's own processes, reported as GPU processes, are tied to it
	// (through SLURM_JOB_ID: proctrack/linuxproc makes no cgroups).
	var pids []int
	testtool.Eventually(t, 15*time.Second, "scontrol listpids "+a+" to list processes", func() (bool, error) {
		// Right after the job starts, slurmstepd may list its task as pid -1,
		// or scontrol may find no step yet and exit 1: both mean "not yet".
		listpids := exec.Command("scontrol", "listpids", a)
		listpids.Env = append(os.Environ(), "SLURM_CONF="+conf)
		out, err := listpids.CombinedOutput()
		if err != nil && !strings.Contains(string(out), "no steps") {
			return false, fmt.Errorf("scontrol listpids %s: %v\n%s", a, err, out)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n")[1:] {
			if f := strings.Fields(line); len(f) > 0 {
				if pid, err := strconv.Atoi(f[0]); err == nil && pid > 0 {
					pids = append(pids, pid)
				}
			}
		}
		return len(pids) > 0, nil
	})
	gpuA, _ := strconv.Atoi(v.gpusOf(a)[0])
	src.setProcs(source.Process{DeviceKey: gpuUUID(gpuA), PID: pids[0], Type: source.Compute, MemoryBytes: 1 << 30})
	v = render(t, col)
	if want := a + " " + me.Username; v.procs[strconv.Itoa(pids[0])] != want {
		t.Errorf("process %d = %q, want %q", pids[0], v.procs[strconv.Itoa(pids[0])], want)
	}
	src.setProcs()

	// Job b ends by itself, job a is cancelled: the epilog removes each
	// job's lines and its labels go, while the other job's stay.
	v = waitFor(t, col, "job "+b+" gone after it ended", func(v view) bool { return len(v.gpusOf(b)) == 0 })
	if len(v.gpusOf(a)) != 2 {
		t.Fatalf("job %s lost its GPUs when %s ended: %+v", a, b, v)
	}
	slurm(t, conf, "scancel", a)
	v = waitFor(t, col, "job "+a+" gone after scancel", func(v view) bool { return len(v.gpusOf(a)) == 0 })
	// Other test packages may run jobs on the same Slurm: only ours must be gone.
	for gpu, info := range v.info {
		if j := strings.Fields(info); len(j) > 0 && (j[0] == a || j[0] == b) {
			t.Fatalf("gpu %s allocation info left after the job ended: %q", gpu, info)
		}
	}
}

// TestHostileJobTextOnRealSlurm submits jobs whose name and comment imitate
// other fields of `scontrol show job -d`: the shipped prolog must record the
// submitter (not the named victim) and the job's real GPUs, or nothing at
// all when a forged GRES line makes the real one ambiguous.
func TestHostileJobTextOnRealSlurm(t *testing.T) {
	conf, mapDir := need(t)
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	submit := func(name, comment string) (id, started string) {
		started = filepath.Join(dir, fmt.Sprintf("started-%d", time.Now().UnixNano()))
		id = slurm(t, conf, "sbatch", "--parsable", "--hold", "--gres=gpu:1", "-J", name, "--comment", comment,
			"-D", os.TempDir(), "-o", "/dev/null", "--wrap", "touch "+started+"; sleep 60")
		t.Cleanup(func() {
			cmd := exec.Command("scancel", id)
			cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
			_ = cmd.Run()
		})
		return id, started
	}
	waitStarted := func(path string) {
		t.Helper()
		// The job's script runs only after the prolog finished.
		testtool.Eventually(t, 45*time.Second, "the job to start ("+path+")", func() (bool, error) {
			_, err := os.Stat(path)
			return err == nil, nil
		})
	}
	lines := func(job string) []string {
		// The planted link is refused (an error naming it); other files count.
		m, err := jobmap.NewReader(mapDir).Read()
		if err != nil && !strings.Contains(err.Error(), "99: not a regular file") {
			t.Fatal(err)
		}
		var out []string
		for slot, es := range m {
			for _, e := range es {
				if e.Job == job {
					out = append(out, fmt.Sprintf("%d %s %s %s", slot.GPU, e.User, e.Account, e.Name))
				}
			}
		}
		return out
	}

	name := "train UserId=victim(2001) Account=ml-infra"
	a, startedA := submit(name, "Account=ml-infra UserId=victim(2001)")
	// A link planted in the folder, to a root-only file that holds a line of
	// this job: neither the prolog nor the epilog may read or replace it.
	secret := filepath.Join(dir, "secret")
	secretText := a + " user=root name=TOPSECRET\n"
	if err := os.WriteFile(secret, []byte(secretText), 0o600); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(mapDir, "99")
	if err := os.Symlink(secret, planted); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(planted) })
	slurm(t, conf, "scontrol", "release", a)
	waitStarted(startedA)
	node := slurm(t, conf, "squeue", "-h", "-j", a, "-o", "%N")
	forged := "\n     Nodes=" + node + " CPU_IDs=0 Mem=0 GRES=gpu:8(IDX:0-7)"
	b, startedB := submit("sweep", "x"+forged)
	slurm(t, conf, "scontrol", "release", b)
	waitStarted(startedB)
	if out := slurm(t, conf, "scontrol", "show", "job", "-d", b); strings.Count(out, "Nodes="+node+" ") != 2 {
		t.Fatalf("the forged comment did not print a second detail line:\n%s", out)
	}

	got := lines(a)
	if len(got) != 1 {
		t.Fatalf("job %s: want one GPU line, got %q", a, got)
	}
	// The account is the one Slurm gave the job (its user's default, with
	// accounting), never the one its name and comment forge.
	account := strings.TrimPrefix(slurm(t, conf, "squeue", "-h", "-j", a, "-o", "%a"), "(null)")
	if f := strings.SplitN(got[0], " ", 4); f[1] != me.Username || f[2] != account || account == "ml-infra" || f[3] != name {
		t.Fatalf("job %s recorded as %q, want user %s, account %q, name %q", a, got[0], me.Username, account, name)
	}
	if got := lines(b); len(got) != 0 {
		t.Fatalf("job %s with a forged GRES line recorded on GPUs %q", b, got)
	}
	slurm(t, conf, "scancel", a)
	testtool.Eventually(t, 45*time.Second, "the epilog to remove job "+a, func() (bool, error) { return len(lines(a)) == 0, nil })
	if fi, err := os.Lstat(planted); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("planted link replaced: %v %v", fi, err)
	}
	if got, _ := os.ReadFile(secret); string(got) != secretText {
		t.Fatalf("link target changed: %q", got)
	}
}
