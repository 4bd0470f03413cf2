package slurm_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/gpuwatch/gpuwatch/exporter/attribution/jobmap"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

func script(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "deploy", "slurm", name)
}

func needTools(t *testing.T) {
	t.Helper()
	for _, b := range []string{"sh", "flock", "awk", "mktemp"} {
		if _, err := exec.LookPath(b); err != nil {
			testtool.Missing(t, b+" not installed; .ci/run installs it (util-linux)")
		}
	}
}

// run runs a prolog or epilog with exactly env (plus PATH), as slurmd does.
func run(t *testing.T, name string, env ...string) {
	t.Helper()
	cmd := exec.Command(script(name))
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, env, err, out)
	}
}

func readMap(t *testing.T, dir string) map[string][]string {
	t.Helper()
	m, err := jobmap.NewReader(dir).Read()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for slot, es := range m {
		for _, e := range es {
			out[fmt.Sprint(slot.GPU)] = append(out[fmt.Sprint(slot.GPU)], fmt.Sprintf("%s|%s|%d|%s|%s", e.Job, e.User, e.UID, e.Account, e.Name))
		}
		sort.Strings(out[fmt.Sprint(slot.GPU)])
	}
	return out
}

func TestPrologEpilogFromEnvironment(t *testing.T) {
	t.Parallel()
	needTools(t)
	dir := filepath.Join(t.TempDir(), "map")
	base := []string{"GPUWATCH_JOB_MAPPING_DIR=" + dir, "PATH=" + os.Getenv("PATH")}
	run(t, "prolog", append(base, "SLURM_JOB_ID=7", "SLURM_JOB_GPUS=0,2", "SLURM_JOB_USER=alice", "SLURM_JOB_UID=1000",
		"SLURM_JOB_ACCOUNT=physics", "SLURM_JOB_NAME=my job=1 $(touch /tmp/pwned) `id` *")...)
	run(t, "prolog", append(base, "SLURM_JOB_ID=8", "CUDA_VISIBLE_DEVICES=2-3", "SLURM_JOB_USER=bob", "SLURM_JOB_NAME=interactive")...)
	got := readMap(t, dir)
	want := map[string][]string{
		"0": {"7|alice|1000|physics|my job=1 $(touch /tmp/pwned) `id` *"},
		"2": {"7|alice|1000|physics|my job=1 $(touch /tmp/pwned) `id` *", "8|bob|-1||interactive"},
		"3": {"8|bob|-1||interactive"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after prologs:\n got %v\nwant %v", got, want)
	}
	// Requeue: the prolog runs again for the same job and replaces its line.
	run(t, "prolog", append(base, "SLURM_JOB_ID=8", "SLURM_JOB_GPUS=3", "SLURM_JOB_USER=bob", "SLURM_JOB_NAME=interactive")...)
	run(t, "epilog", append(base, "SLURM_JOB_ID=7")...)
	got = readMap(t, dir)
	want = map[string][]string{"3": {"8|bob|-1||interactive"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after requeue and epilog:\n got %v\nwant %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "0")); !os.IsNotExist(err) {
		t.Fatalf("empty mapping file not removed: %v", err)
	}
	// Plain format for a stock dcgm-exporter.
	run(t, "prolog", append(base, "SLURM_JOB_ID=9", "SLURM_JOB_GPUS=1", "SLURM_JOB_NAME=x", "SLURM_JOB_USER=u", "GPUWATCH_JOB_MAPPING_FORMAT=plain")...)
	if data, _ := os.ReadFile(filepath.Join(dir, "1")); string(data) != "9\n" {
		t.Fatalf("plain format wrote %q", data)
	}
	// Bad job ids and jobs without GPUs write nothing and still exit 0.
	run(t, "prolog", append(base, "SLURM_JOB_ID=../../etc", "SLURM_JOB_GPUS=0", "SLURM_JOB_NAME=x", "SLURM_JOB_USER=u")...)
	run(t, "prolog", append(base, "SLURM_JOB_ID=10", "SLURM_JOB_NAME=cpu", "SLURM_JOB_USER=u", "SLURM_JOB_GPUS=")...)
	if _, err := os.Stat(filepath.Join(dir, "0")); !os.IsNotExist(err) {
		t.Fatalf("a bad job wrote a mapping: %v", err)
	}
}

// TestPrologFallsBackToScontrol gives the prolog the environment the real
// Slurm 22.05 Prolog has (no GPUs, no job name), and a scontrol that
// prints what `scontrol show job -d` prints for a two-node job.
func TestPrologFallsBackToScontrol(t *testing.T) {
	t.Parallel()
	needTools(t)
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "map")
	bin := filepath.Join(tmp, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	fake := `#!/bin/sh
case "$1 $2" in
"show job")
cat <<'OUT'
JobId=55 JobName=sweep lr=0.1 (x)
   UserId=carol(1234) GroupId=carol(1234) MCS_label=N/A
   Priority=1 Nice=0 Account=bio QOS=normal
   JOB_GRES=gpu:a100:3
     Nodes=node[01-02] CPU_IDs=0-3 Mem=0 GRES=gpu:a100:3(IDX:0,2-3),shard:0(0/8)
     Nodes=node03 CPU_IDs=0 Mem=0 GRES=gpu:a100:1(IDX:7)
OUT
;;
"show hostnames")
case "$3" in "node[01-02]") printf 'node01\nnode02\n' ;; *) printf '%s\n' "$3" ;; esac
;;
esac
`
	if err := os.WriteFile(filepath.Join(bin, "scontrol"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	// squeue prints one field alone, as `squeue -h -j 55 -o %j` does.
	squeue := `#!/bin/sh
case "$*" in
*%j) printf 'sweep lr=0.1 (x)\n' ;;
*%u) printf 'carol\n' ;;
esac
`
	if err := os.WriteFile(filepath.Join(bin, "squeue"), []byte(squeue), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"GPUWATCH_JOB_MAPPING_DIR=" + dir, "PATH=" + bin + ":" + os.Getenv("PATH"),
		"SLURM_JOB_ID=55", "SLURM_JOB_UID=1234", "SLURM_JOB_ACCOUNT=bio", "SLURMD_NODENAME=node02"}
	run(t, "prolog", env...)
	got := readMap(t, dir)
	line := "55|carol|1234|bio|sweep lr=0.1 (x)"
	want := map[string][]string{"0": {line}, "2": {line}, "3": {line}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("node02:\n got %v\nwant %v", got, want)
	}
	run(t, "epilog", "GPUWATCH_JOB_MAPPING_DIR="+dir, "PATH="+os.Getenv("PATH"), "SLURM_JOB_ID=55")
	env[len(env)-1] = "SLURMD_NODENAME=node03"
	run(t, "prolog", env...)
	if got := readMap(t, dir); fmt.Sprint(got) != fmt.Sprint(map[string][]string{"7": {line}}) {
		t.Fatalf("node03: got %v", got)
	}
}

// TestPrologIgnoresForgedScontrolText gives the prolog what `scontrol show
// job -d` printed on Slurm 22.05 for a job named with a newline and
// "UserId=… Account=…", and a comment imitating a GRES detail line: the
// identity comes from the environment, and a second detail line for this
// node makes the prolog record nothing rather than the forged GPUs.
func TestPrologIgnoresForgedScontrolText(t *testing.T) {
	t.Parallel()
	needTools(t)
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "map")
	bin := filepath.Join(tmp, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	fake := func(comment string) string {
		return `#!/bin/sh
case "$1 $2" in
"show job")
cat <<'OUT'
JobId=56 JobName=train UserId=victim(2001) Account=ml-infra
   UserId=mallory(1500) GroupId=mallory(1500) MCS_label=N/A
   Priority=1 Nice=0 Account=(null) QOS=normal
   JOB_GRES=gpu:1
     Nodes=vm CPU_IDs=0 Mem=0 GRES=gpu:1(IDX:1)
   MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0
   Comment=` + comment + `
OUT
;;
"show hostnames") printf '%s\n' "$3" ;;
esac
`
	}
	squeue := "#!/bin/sh\ncase \"$*\" in *%j) printf 'train UserId=victim(2001) Account=ml-infra\\n' ;; *%u) printf 'victim\\n' ;; esac\n"
	if err := os.WriteFile(filepath.Join(bin, "squeue"), []byte(squeue), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"GPUWATCH_JOB_MAPPING_DIR=" + dir, "PATH=" + bin + ":" + os.Getenv("PATH"),
		"SLURM_JOB_ID=56", "SLURM_JOB_USER=mallory", "SLURM_JOB_UID=1500", "SLURMD_NODENAME=vm"}

	// A comment that imitates nothing: the real line decides.
	if err := os.WriteFile(filepath.Join(bin, "scontrol"), []byte(fake("x Account=ml-infra")), 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "prolog", env...)
	want := map[string][]string{"1": {"56|mallory|1500||train UserId=victim(2001) Account=ml-infra"}}
	if got := readMap(t, dir); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("forged identity:\n got %v\nwant %v", got, want)
	}
	run(t, "epilog", "GPUWATCH_JOB_MAPPING_DIR="+dir, "PATH="+os.Getenv("PATH"), "SLURM_JOB_ID=56")

	// A comment holding a newline and a detail line for this node.
	if err := os.WriteFile(filepath.Join(bin, "scontrol"), []byte(fake("x\n     Nodes=vm CPU_IDs=0 Mem=0 GRES=gpu:8(IDX:0-7)")), 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "prolog", env...)
	if got := readMap(t, dir); len(got) != 0 {
		t.Fatalf("forged GRES line recorded: %v", got)
	}
}

// TestPrologRefusesSymlinks plants links where a careless or hostile setup
// could leave them: the prolog (root) must neither copy a link's target into
// the map nor write through it, and refuses a folder others can write.
func TestPrologRefusesSymlinks(t *testing.T) {
	t.Parallel()
	needTools(t)
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "map")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(tmp, "secret")
	if err := os.WriteFile(secret, []byte("4242 user=root name=s3cr3t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"0", "3"} {
		if err := os.Symlink(secret, filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	base := []string{"GPUWATCH_JOB_MAPPING_DIR=" + dir, "PATH=" + os.Getenv("PATH"), "SLURM_JOB_USER=u", "SLURM_JOB_NAME=n"}
	run(t, "prolog", append(base, "SLURM_JOB_ID=7", "SLURM_JOB_GPUS=0")...)
	data, err := os.ReadFile(filepath.Join(dir, "0"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "s3cr3t") {
		t.Fatalf("map/0 holds the link target's content: %q", data)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "0")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("map/0 should be a regular file replacing the link: %v %v", fi, err)
	}
	run(t, "epilog", append(base, "SLURM_JOB_ID=4242")...)
	if got, _ := os.ReadFile(secret); string(got) != "4242 user=root name=s3cr3t\n" {
		t.Fatalf("link target changed: %q", got)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "3")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("map/3 link was touched: %v %v", fi, err)
	}

	// A world-writable folder, and a folder that is a link: nothing written.
	open := filepath.Join(tmp, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tmp, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{open, link} {
		run(t, "prolog", "GPUWATCH_JOB_MAPPING_DIR="+d, "PATH="+os.Getenv("PATH"), "SLURM_JOB_ID=8", "SLURM_JOB_GPUS=1", "SLURM_JOB_USER=u", "SLURM_JOB_NAME=n")
		if _, err := os.Lstat(filepath.Join(d, "1")); !os.IsNotExist(err) {
			t.Fatalf("prolog wrote into %s: %v", d, err)
		}
	}
}

// TestConcurrentJobsSharingGPUs runs many prologs and epilogs at once on the
// same GPU files: the lock and the atomic rename must lose no line and leave
// no partial file.
func TestConcurrentJobsSharingGPUs(t *testing.T) {
	t.Parallel()
	needTools(t)
	dir := filepath.Join(t.TempDir(), "map")
	base := []string{"GPUWATCH_JOB_MAPPING_DIR=" + dir, "PATH=" + os.Getenv("PATH"), "SLURM_JOB_GPUS=0-1", "SLURM_JOB_USER=u", "SLURM_JOB_NAME=shared"}
	const jobs = 16
	var wg sync.WaitGroup
	for i := 1; i <= jobs; i++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			run(t, "prolog", append(base, fmt.Sprintf("SLURM_JOB_ID=%d", id))...)
		}(i)
	}
	wg.Wait()
	got := readMap(t, dir)
	if len(got["0"]) != jobs || len(got["1"]) != jobs {
		t.Fatalf("after %d concurrent prologs: %d and %d lines", jobs, len(got["0"]), len(got["1"]))
	}
	for i := 1; i <= jobs; i += 2 { // end the odd jobs concurrently
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			run(t, "epilog", "GPUWATCH_JOB_MAPPING_DIR="+dir, "PATH="+os.Getenv("PATH"), fmt.Sprintf("SLURM_JOB_ID=%d", id))
		}(i)
	}
	wg.Wait()
	got = readMap(t, dir)
	for _, gpu := range []string{"0", "1"} {
		if len(got[gpu]) != jobs/2 {
			t.Fatalf("gpu %s after epilogs: %v", gpu, got[gpu])
		}
		for _, l := range got[gpu] {
			var id int
			fmt.Sscanf(l, "%d|", &id)
			if id%2 == 1 {
				t.Fatalf("gpu %s kept the line of ended job %d", gpu, id)
			}
		}
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") && e.Name() != ".lock" {
			t.Fatalf("temporary file left behind: %s", e.Name())
		}
	}
}
