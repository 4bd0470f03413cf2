package slurm

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/execrun"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// forged is a job name that spells out another user's job in
// scontrol's Key=Value text.
const forged = "train UserId=victim(2001) Account=ml-infra JobState=COMPLETED NumCPUs=1000 AdminComment=gpuwatch1:forged|x|y"

// recorded answers from files squeue and sacct of Slurm 22.05 wrote.
type recorded map[string]string

func (r recorded) Run(_ context.Context, name string, _ ...string) ([]byte, error) {
	f, ok := r[name]
	if !ok {
		return nil, errors.New(name + ": not found")
	}
	return os.ReadFile(f)
}

func TestRecordedJSONIsTheScheduler(t *testing.T) {
	c := &Client{Runner: recorded{"squeue": "testdata/squeue-22.05-forged-name.json", "sacct": "testdata/sacct-22.05-forged-name.json"}}
	jobs, err := c.Jobs(context.Background())
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Jobs: %v %v", jobs, err)
	}
	j := jobs[0]
	if j.Name != forged || j.User != "root" || j.UserID != 0 || j.Account == "ml-infra" || j.State != "RUNNING" || j.CPUs != 2 ||
		j.TimeLimit != 90*time.Minute || j.AdminComment != "" || !j.End.IsZero() || j.Start.IsZero() {
		t.Fatalf("job %+v: identity must come from the JSON fields, not the name", j)
	}
	// Where and in which cluster the job runs: what proves a finding's target.
	if j.Nodes != "vm" || j.Cluster != "gpuwatch" {
		t.Fatalf("job nodes %q cluster %q, want vm gpuwatch", j.Nodes, j.Cluster)
	}
	acct, err := c.Accounted(context.Background(), j.ID)
	if err != nil || acct == nil {
		t.Fatalf("Accounted: %v %v", acct, err)
	}
	if acct.Name != forged || acct.User != "root" || acct.State != "CANCELLED" || acct.CPUs != 2 || acct.End.IsZero() ||
		acct.Nodes != "vm" || acct.Cluster != "gpuwatch" {
		t.Fatalf("accounting %+v", acct)
	}
	none := &Client{Runner: recorded{"sacct": "testdata/sacct-22.05-nothing.json"}}
	if j, err := none.Accounted(context.Background(), "999999"); j != nil || err != nil {
		t.Fatalf("nothing found: %v %v", j, err)
	}
}

func TestRefusedBeforeAnyCommand(t *testing.T) {
	c := &Client{Runner: recorded{}}
	ctx := context.Background()
	for _, id := range []string{"", "1 2", "--user=root", "1;rm", "12345678901234", "1_", "_1", "1\n2", "-1"} {
		if _, err := c.Job(ctx, id); !errors.Is(err, ErrInvalid) {
			t.Errorf("Job(%q): %v", id, err)
		}
		if err := c.Cancel(ctx, id); !errors.Is(err, ErrInvalid) {
			t.Errorf("Cancel(%q): %v", id, err)
		}
	}
	for _, sig := range []string{"", "9", "SIGKILL;x", "--full", "USR1 "} {
		if err := c.Signal(ctx, "1", sig); !errors.Is(err, ErrInvalid) && sig != "" {
			t.Errorf("Signal(%q): %v", sig, err)
		}
	}
	for _, cm := range []string{"", "a b", strings.Repeat("x", MaxCommentBytes+1), "a\nb"} {
		if err := c.SetAdminComment(ctx, "1", cm); !errors.Is(err, ErrInvalid) {
			t.Errorf("SetAdminComment(%q): %v", cm, err)
		}
	}
}

func TestMalformedJSON(t *testing.T) {
	for name, doc := range map[string]string{
		"not json":       `squeue: error: slurm_load_jobs error: Unable to contact slurm controller`,
		"error entry":    `{"errors":[{"error":"Unable to contact slurm controller","error_number":1007}],"jobs":[]}`,
		"id not an id":   `{"jobs":[{"job_id":"1;rm -rf","job_state":"RUNNING"}]}`,
		"state not word": `{"jobs":[{"job_id":1,"job_state":"RUNNING\u001b[2J"}]}`,
		"user is object": `{"jobs":[{"job_id":1,"user_name":{"x":1},"job_state":"RUNNING"}]}`,
	} {
		if _, err := decodeSqueue([]byte(doc)); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	// Slurm 23.02+ shapes: numbers as {set, infinite, number}, the state a list.
	jobs, err := decodeSqueue([]byte(`{"jobs":[{"job_id":7,"user_name":"ana","job_state":["RUNNING"],"cpus":{"set":true,"number":8},
		"time_limit":{"set":true,"infinite":true,"number":0},"start_time":{"set":true,"number":1700000000},"array_job_id":{"set":true,"number":0}}]}`))
	if err != nil || len(jobs) != 1 || jobs[0].State != "RUNNING" || jobs[0].CPUs != 8 || jobs[0].TimeLimit != 0 || jobs[0].Start.Unix() != 1700000000 {
		t.Fatalf("23.02 shapes: %+v %v", jobs, err)
	}
}

// cluster needs the Slurm of test/slurm/start.sh, as .ci/run starts it.
func cluster(tb testing.TB) {
	tb.Helper()
	conf := os.Getenv("GPUWATCH_SLURM_CONF")
	if conf == "" {
		testtool.Missing(tb, "GPUWATCH_SLURM_CONF not set: run eval \"$(test/slurm/start.sh)\" first, as .ci/run does")
	}
	tb.Setenv("SLURM_CONF", conf)
}

// TestForgedJobNameOnSlurm submits a job whose name spells out another
// user's completed job and reads it back through the adapter from a real
// slurmctld and slurmdbd.
func TestForgedJobNameOnSlurm(t *testing.T) {
	cluster(t)
	out, err := exec.Command("sbatch", "--parsable", "--hold", "-c", "2", "-t", "90", "-J", forged, "-D", os.TempDir(), "-o", "/dev/null", "--wrap", "sleep 600").CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch: %v: %s", err, out)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	t.Cleanup(func() { _ = exec.Command("scancel", id).Run() })
	c := &Client{Runner: execrun.Exec{Timeout: 10 * time.Second}}
	j, err := c.Job(context.Background(), id)
	if err != nil || j == nil {
		t.Fatalf("Job(%s): %v %v", id, j, err)
	}
	if j.ID != id || j.Name != forged || j.User != "root" || j.Account == "ml-infra" || j.State != "PENDING" || j.CPUs != 2 || strings.HasPrefix(j.AdminComment, "gpuwatch1:") {
		t.Fatalf("job %+v: the name was taken for fields", j)
	}
	// scontrol's own text shows why it is never parsed: the forged keys
	// come first.
	sc, _ := exec.Command("scontrol", "--oneliner", "show", "job", id).Output()
	if !strings.Contains(string(sc), "JobName=train UserId=victim(2001)") {
		t.Logf("scontrol prints: %s", sc)
	}
	if err := c.SetAdminComment(context.Background(), id, "gpuwatch-test"); err != nil {
		t.Fatal(err)
	}
	if j, err := c.Job(context.Background(), id); err != nil || j.AdminComment != "gpuwatch-test" {
		t.Fatalf("AdminComment after write: %+v %v", j, err)
	}
	if err := c.Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := c.State(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if !Active(st) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %s after scancel", st)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
