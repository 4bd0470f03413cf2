package jobview_test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/jobview"
)

// forgedName spells out another user's completed job, with a summary, in
// scontrol's Key=Value text (which prints JobName= first).
const forgedName = "train UserId=victim(2001) Account=ml-infra JobState=COMPLETED NumCPUs=1000 AdminComment=gpuwatch1:forged"

// TestForgedJobNameOnSlurm: on a real Slurm, a job named to pose as
// another user's shows its real owner, state and CPUs in `gpuwatch job`;
// a summary in its AdminComment that names another job and user is
// refused; and `--summary` writes the view of this job id only.
func TestForgedJobNameOnSlurm(t *testing.T) {
	t.Parallel()
	_, mapDir := slurmEnv(t)
	bin := buildGpuwatch(t)
	id, gpus := submit(t, forgedName, "sleep 300")
	prom := startScraping(t, startExporter(t, id, gpus, mapDir))
	awaitJobData(t, prom, id, len(gpus), 5, 4*time.Second)

	view := func(args ...string) (jobview.Report, string, error) {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, append([]string{"job", "--format=json"}, append(args, id)...)...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var r jobview.Report
		if err == nil {
			if jerr := json.Unmarshal(stdout.Bytes(), &r); jerr != nil {
				t.Fatalf("not JSON: %v\n%s", jerr, stdout.String())
			}
		}
		return r, stderr.String(), err
	}
	r, stderr, err := view("--prometheus.url=" + prom)
	if err != nil {
		t.Fatalf("gpuwatch job: %v\n%s", err, stderr)
	}
	if r.User != "root" || r.Account != "physics" || r.State != "running" || r.JobName != forgedName || r.Source == "admin_comment" {
		t.Fatalf("job view: user %q, account %q, state %q, name %q, source %q: the name was read as fields", r.User, r.Account, r.State, r.JobName, r.Source)
	}
	if r.CPU != nil && r.CPU.Allocated == 1000 {
		t.Fatalf("CPUs %d: taken from the name", r.CPU.Allocated)
	}

	// A summary of another job and user, written into this job's
	// AdminComment (as an administrator could, or a copy of another
	// job's): shown nowhere.
	other, err := jobview.EncodeSummary(&jobview.Report{Job: "4242", Scheduler: "slurm", User: "victim", State: "completed",
		Start: time.Unix(1, 0).UTC(), End: time.Unix(7201, 0).UTC()}, "", 1024)
	if err != nil {
		t.Fatal(err)
	}
	run(t, "scontrol", "update", "JobId="+id, "AdminComment="+other)
	_, stderr, err = view("--prometheus.url=http://"+closedAddr(t), "--query.timeout=2s")
	if err == nil || !strings.Contains(stderr, "not this job's") {
		t.Fatalf("a foreign summary was shown (err %v): %s", err, stderr)
	}

	// --summary writes this job's view, whatever the AdminComment held.
	if out, err := exec.Command(bin, "job", "--summary", "--prometheus.url="+prom, "--summary.timeout=10s", id).CombinedOutput(); err != nil {
		t.Fatalf("gpuwatch job --summary: %v\n%s", err, out)
	}
	dec, err := jobview.DecodeSummary(showComment(t, id))
	if err != nil {
		t.Fatal(err)
	}
	if dec.Job != id || dec.User != "root" || dec.JobName != forgedName {
		t.Fatalf("summary written: job %q user %q name %q", dec.Job, dec.User, dec.JobName)
	}
	r, stderr, err = view("--prometheus.url=http://"+closedAddr(t), "--query.timeout=2s")
	if err != nil || r.Source != "admin_comment" || r.Job != id || r.User != "root" {
		t.Fatalf("own summary: %+v %v %s", r, err, stderr)
	}
}
