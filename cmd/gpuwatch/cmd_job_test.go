package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestJobCommand(t *testing.T) {
	from := time.Now().Add(-3 * time.Hour).Truncate(time.Minute)
	dir := analyzeStore(t, from)
	var stderr bytes.Buffer
	out := captureStdout(t, func() {
		if code := run([]string{"job", "4242", "--tsdb.path=" + dir, "--format=json", "--slurm.squeue="}, &stderr); code != 0 {
			t.Errorf("exit %d: %s", code, stderr.String())
		}
	})
	var r struct {
		Job      string `json:"job"`
		Hostname string `json:"hostname"`
		GPUs     []struct {
			UtilMean *float64 `json:"util_mean_percent"`
		} `json:"gpus"`
		Findings []struct {
			Pattern string `json:"pattern"`
			Advice  string `json:"advice"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if r.Job != "4242" || r.Hostname != "node-7" || len(r.GPUs) != 1 || r.GPUs[0].UtilMean == nil || *r.GPUs[0].UtilMean != 0 ||
		len(r.Findings) != 1 || r.Findings[0].Pattern != "cpu_only" || !strings.Contains(r.Findings[0].Advice, "CPU partition") {
		t.Fatalf("job view %+v\n%s", r, out)
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"job", "x;y", "--tsdb.path=" + dir}, "Slurm job id"},
		{[]string{"job", "4242"}, "exactly one of"},
		{[]string{"job", "4242", "--tsdb.path=" + dir, "--lookback=soon"}, "--lookback"},
		{[]string{"job", "ns/pod", "--tsdb.path=" + dir, "--summary"}, "--summary needs a Slurm job id"},
	} {
		stderr.Reset()
		if code := run(tc.args, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.msg) {
			t.Errorf("%v: exit %d, %s", tc.args, code, stderr.String())
		}
	}
}
