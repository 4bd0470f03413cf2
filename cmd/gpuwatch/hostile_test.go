package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// asMain makes the test binary the gpuwatch binary when re-executed by
// TestHostileInput, so the cases run a real process (own exit code, own
// memory) without a separate build.
const asMain = "GPUWATCH_TEST_AS_MAIN"

// peakFile names where the re-executed process writes the peak memory it
// allocated (KiB) before it exits: VmHWM less the file pages mapped (the
// binary's own text, about 60 MiB of a 100 MB binary, which no input
// changes), and no less than the Go runtime's Sys. rusage's ru_maxrss
// cannot serve: a child started with vfork reports the parent's high-water mark.
const peakFile = "GPUWATCH_TEST_PEAK_FILE"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		code := run(os.Args[1:], os.Stderr)
		if p := os.Getenv(peakFile); p != "" {
			_ = os.WriteFile(p, []byte(strconv.FormatInt(allocatedPeakKiB(), 10)), 0o600)
		}
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// hostileCase is one bad input: the command line, and what the message
// must name (for a file: its path, the line and the key).
type hostileCase struct {
	name string
	args []string
	want []string
}

// allocatedPeakKiB is this process' peak memory less its mapped files.
func allocatedPeakKiB() int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	field := func(name string) int64 {
		for _, l := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(l, name+":"); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				return n
			}
		}
		return 0
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return max(field("VmHWM")-field("RssFile"), int64(ms.Sys>>10))
}

// Limits every hostile input must stay under. The time is the process's
// own CPU time (user + system): refusing bad input must not spin or
// allocate its way through it, and CPU time, unlike wall time, does not
// grow with the other tests sharing the machine.
const (
	hostileTime  = 2 * time.Second
	hostileRSSKB = 64 << 10
)

// raceStride thins the hostile tables under the race detector: every
// case is a process of the test binary, and a race-instrumented one costs
// about ten times the CPU to start and refuse its input (the tables were a
// minute and a half of the race step). Under -race every raceStride-th
// case runs, a spread over every surface of each table, so the refusals'
// paths are still race-checked; scripts/test.sh runs the whole tables
// without -race beside the corpus week, where the CPU and memory bounds
// also measure a production-like binary.
const raceStride = 8

// inRaceSample reports whether case i of a hostile table runs in this
// mode: all of them without the race detector, every raceStride-th with it.
func inRaceSample(i int) bool { return !testtool.Race || i%raceStride == 0 }

// logRaceSample says how much of a table of total cases runs in this mode.
func logRaceSample(t *testing.T, total int) {
	t.Helper()
	if testtool.Race {
		t.Logf("race detector on: %d of the %d cases (every %dth); scripts/test.sh runs them all without -race", (total+raceStride-1)/raceStride, total, raceStride)
	}
}

// TestHostileInput feeds every file loader and many flags bad and hostile
// input, as an attacker or a careless operator would: each must exit 2 with
// a message naming the file, line and key (or the flag), within 2 s and
// 64 MiB, measured on the process (wall clock, and its peak RSS, VmHWM).
func TestHostileInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Every file flag of check-config, with a number key where the file has one.
	loaders := []struct {
		flag, numKey string
	}{
		{"--policy.file", ""}, {"--analyzer.config", "min_coverage"}, {"--report.config", "default_price"},
		{"--teams.file", ""}, {"--web.config.file", ""}, {"--sim.scenario", ""},
	}
	var cases []hostileCase
	for li, l := range loaders {
		name := strings.TrimPrefix(l.flag, "--")
		for k := 0; k < 16; k++ {
			// An unknown key after k comment lines: the message names line k+1.
			key := fmt.Sprintf("zz_unknown_%d", k)
			p := write(fmt.Sprintf("%d-unknown-%d.yml", li, k), strings.Repeat("# note\n", k)+key+": 1\n")
			cases = append(cases, hostileCase{name + "/unknown key at line " + strconv.Itoa(k+1), []string{"check-config", l.flag, p}, []string{p, strconv.Itoa(k + 1), key}})
		}
		for k, body := range []string{"a: [1, 2\n", "a: {b: 1\n", "\"unterminated\n", "a:\n\t- tab\n", "a: 1\n a: 2\n", "- a\nb: c\n", "? [a, b]\n: c\n: d\n", "a: *undefined\n"} {
			p := write(fmt.Sprintf("%d-syntax-%d.yml", li, k), body)
			cases = append(cases, hostileCase{fmt.Sprintf("%s/syntax %d", name, k), []string{"check-config", l.flag, p}, []string{p}})
		}
		for k, body := range []string{"zz_a: 1\n---\nzz_b: 2\n", "---\nzz_a: 1\n---\n", "zz_a: 1\n...\n---\nzz_b: 1\n"} {
			p := write(fmt.Sprintf("%d-docs-%d.yml", li, k), body)
			cases = append(cases, hostileCase{fmt.Sprintf("%s/two documents %d", name, k), []string{"check-config", l.flag, p}, []string{p}})
		}
		for k, body := range []string{"- 1\n- 2\n", "just a string\n", "42\n", "[a, b]\n"} {
			p := write(fmt.Sprintf("%d-shape-%d.yml", li, k), body)
			cases = append(cases, hostileCase{fmt.Sprintf("%s/not a map %d", name, k), []string{"check-config", l.flag, p}, []string{p, "1"}})
		}
		if l.numKey != "" {
			for k, v := range []string{".nan", ".NaN", ".inf", "-.inf", "+.Inf", "1e999"} {
				p := write(fmt.Sprintf("%d-nan-%d.yml", li, k), "# c\n"+l.numKey+": "+v+"\n")
				cases = append(cases, hostileCase{fmt.Sprintf("%s/%s", name, v), []string{"check-config", l.flag, p}, []string{p, "2", l.numKey}})
			}
		}
		fifo := filepath.Join(dir, fmt.Sprintf("%d.fifo", li))
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		big := write(fmt.Sprintf("%d-big.yml", li), "# "+strings.Repeat("x", 2<<20)+"\n")
		link := filepath.Join(dir, fmt.Sprintf("%d-zero.yml", li))
		if err := os.Symlink("/dev/zero", link); err != nil {
			t.Fatal(err)
		}
		for what, p := range map[string]string{"/dev/zero": "/dev/zero", "/dev/urandom": "/dev/urandom", "FIFO": fifo, "folder": dir,
			"2 MiB": big, "missing": filepath.Join(dir, "absent.yml"), "link to /dev/zero": link} {
			cases = append(cases, hostileCase{name + "/" + what, []string{"check-config", l.flag, p}, []string{p}})
		}
	}

	policy := filepath.Join("..", "..", "deploy", "examples", "policy.yaml")
	db := filepath.Join(dir, "state.db")
	flags := []hostileCase{
		{"schedule @every 0s", []string{"analyzer", "--policy.file", policy, "--storage.path", db, "--schedule", "@every 0s"}, []string{"--schedule"}},
		{"schedule @every -1s", []string{"analyzer", "--policy.file", policy, "--storage.path", db, "--schedule", "@every -1s"}, []string{"--schedule"}},
		{"schedule @every 1ms", []string{"analyzer", "--policy.file", policy, "--storage.path", db, "--schedule", "@every 1ms"}, []string{"--schedule"}},
		{"schedule @file", []string{"analyzer", "--policy.file", policy, "--storage.path", db, "--schedule", "@/etc/passwd"}, []string{"--schedule"}},
		{"schedule garbage", []string{"analyzer", "--policy.file", policy, "--storage.path", db, "--schedule", "every day"}, []string{"--schedule"}},
		{"command timeout -1s", []string{"analyzer", "--policy.file", policy, "--command.timeout=-1s"}, []string{"--command.timeout"}},
		{"command timeout 0s", []string{"analyzer", "--policy.file", policy, "--command.timeout=0s"}, []string{"--command.timeout"}},
		{"analyzer without policy", []string{"analyzer"}, []string{"policy.file"}},
		{"retention -1h", []string{"agent", "--tsdb.retention=-1h"}, []string{"--tsdb.retention"}},
		{"retention 0s", []string{"agent", "--tsdb.retention=0s"}, []string{"--tsdb.retention"}},
		{"store interval 0s", []string{"agent", "--tsdb.interval=0s"}, []string{"--tsdb.interval"}},
		{"store interval -5s", []string{"agent", "--tsdb.interval=-5s"}, []string{"--tsdb.interval"}},
		{"store interval 10ms", []string{"agent", "--tsdb.interval=10ms"}, []string{"--tsdb.interval"}},
		{"audit limit -1", []string{"audit", "--limit=-1"}, []string{"--limit"}},
		{"audit limit huge negative", []string{"audit", "--limit=-9223372036854775808"}, []string{"--limit"}},
		{"audit limit not a number", []string{"audit", "--limit=ten"}, []string{"limit"}},
		{"audit since negative", []string{"audit", "--since=-1h"}, []string{"--since"}},
		{"audit format", []string{"audit", "--format=xml"}, []string{"format"}},
		{"demo length 100 years", []string{"demo", "--length=876000h"}, []string{"--length"}},
		{"demo length negative", []string{"demo", "--length=-1h"}, []string{"--length"}},
		{"demo length 9 weeks", []string{"demo", "--length=1512h"}, []string{"--length"}},
		{"demo step negative", []string{"demo", "--step=-1s"}, []string{"--step"}},
		{"demo copies 0", []string{"demo", "--fleet.copies=0"}, []string{"--fleet.copies"}},
		{"demo copies negative", []string{"demo", "--fleet.copies=-3"}, []string{"--fleet.copies"}},
		{"exporter interval garbage", []string{"exporter", "--collect-interval=soon"}, []string{"collect-interval"}},
		{"exporter interval 1ms", []string{"exporter", "--source=sim", "--collect-interval=1ms"}, []string{"--collect-interval"}},
		{"exporter source", []string{"exporter", "--source=gpu"}, []string{"source"}},
		{"unknown flag", []string{"exporter", "--no-such-flag"}, []string{"no-such-flag"}},
		{"unknown command", []string{"frobnicate"}, []string{"frobnicate"}},
		{"check-config nothing", []string{"check-config"}, []string{"nothing to check"}},
		{"log level", []string{"--log.level=loud", "audit"}, []string{"log.level"}},
		{"log format", []string{"--log.format=xml", "audit"}, []string{"log.format"}},
	}
	for _, w := range []string{"0000-W01", "0001-W01", "1969-W52", "2026-W00", "2026-W54", "2026-W1", "26-W01", "2026W01", "W01", "2026-13-01", "0000-01-01", "1969-12-31", "2026-02-30", "yesterday", "2026-W01-1", "-2026-W01"} {
		flags = append(flags, hostileCase{"report week " + w, []string{"report", "--storage.path", db, "--week=" + w}, []string{"--week"}})
	}
	for _, d := range []string{"-1s", "0s", "soon", "1x", "9999999999999h"} {
		flags = append(flags,
			hostileCase{"agent retention " + d, []string{"agent", "--tsdb.retention=" + d}, []string{"tsdb.retention"}},
			hostileCase{"analyzer timeout " + d, []string{"analyzer", "--policy.file", policy, "--command.timeout=" + d}, []string{"command.timeout"}})
	}
	// Nested keys of the policy and the scenario: NaN, infinities, bad
	// durations and near-miss keys, each named by file:line: key.path.
	nested := []struct {
		flag, prefix, numKey, durKey, path string
		numLine, durLine                   string
		before                             string // the line the duration goes before
	}{
		{"--policy.file", "tiers:\n  - name: a\n    rules:\n      - pattern: stuck\n        steps: [{action: warn}]\n",
			"        min_wasted_gpu_hours", "        min_duration", "tiers[0].rules[0].", "6", "5", "        steps:"},
		{"--sim.scenario", "fleet: [{hostname: n1, model: A100-SXM4-80GB, gpus: 1}]\nworkloads:\n  - id: x\n    user: u\n    node: n1\n    gpus: [0]\n    behaviour: low_util\n    params:\n",
			"      util", "    duration", "workloads[0].", "9", "8", "    params:"},
	}
	for ni, n := range nested {
		num, dur := strings.TrimSpace(n.numKey), strings.TrimSpace(n.durKey)
		numPath := n.path + num
		if n.flag == "--sim.scenario" {
			numPath = n.path + "params." + num
		}
		for k, v := range []string{".nan", ".NaN", ".inf", "-.Inf", "+.inf"} {
			p := write(fmt.Sprintf("nested-%d-nan-%d.yml", ni, k), n.prefix+n.numKey+": "+v+"\n")
			flags = append(flags, hostileCase{fmt.Sprintf("%s/nested %s", n.flag, v), []string{"check-config", n.flag, p}, []string{p, n.numLine, numPath, "NaN and infinities are refused"}})
		}
		for k, v := range []string{"soon", "1.5d", "2 weeks", "1w1w", "-"} {
			body := strings.Replace(n.prefix, n.before, n.durKey+": \""+v+"\"\n"+n.before, 1)
			p := write(fmt.Sprintf("nested-%d-dur-%d.yml", ni, k), body)
			flags = append(flags, hostileCase{fmt.Sprintf("%s/duration %q", n.flag, v), []string{"check-config", n.flag, p}, []string{p, n.durLine, n.path + dur}})
		}
	}
	// SMTP hosts with CR/LF, spaces and other garbage, through the report config.
	for k, h := range []string{`"mx\r\nRCPT TO:<evil@example.org>"`, `"mx\nDATA"`, `"mx example"`, `"mx\u0000"`, `"user@mx"`, `"mx/evil"`, `"\t"`} {
		p := write(fmt.Sprintf("smtp-%d.yml", k), "smtp:\n  host: "+h+"\n  from: gpuwatch@example.org\n")
		flags = append(flags, hostileCase{fmt.Sprintf("smtp host %d", k), []string{"check-config", "--report.config", p}, []string{p, "2", "smtp.host"}})
	}
	cases = append(cases, flags...)
	if len(cases) < 300 {
		t.Fatalf("only %d hostile cases, want at least 300", len(cases))
	}
	t.Logf("%d hostile cases", len(cases))

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var worstTime time.Duration
	var worstRSS int64 // KiB
	logRaceSample(t, len(cases))
	for i, tc := range cases {
		if !inRaceSample(i) {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			peak := filepath.Join(dir, fmt.Sprintf("peak-%d", i))
			cmd := exec.Command(self, tc.args...)
			cmd.Env = append(os.Environ(), asMain+"=1", peakFile+"="+peak, "GOMAXPROCS=2")
			cmd.Dir = "."
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			began := time.Now()
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("still running after 10s: %s", stderr.String())
			}
			took := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			b, err := os.ReadFile(peak)
			if err != nil {
				t.Fatalf("no peak RSS written: %v; stderr: %s", err, stderr.String())
			}
			rss, err := strconv.ParseInt(string(b), 10, 64)
			if err != nil {
				t.Fatalf("peak RSS %q: %v", b, err)
			}
			worstTime, worstRSS = max(worstTime, took), max(worstRSS, rss)
			if code := cmd.ProcessState.ExitCode(); code != 2 {
				t.Errorf("exit %d, want 2; stderr: %s", code, stderr.String())
			}
			if took > hostileTime {
				t.Errorf("took %v of CPU, more than %v (wall %v)", took, hostileTime, time.Since(began))
			}
			if rss > hostileRSSKB {
				t.Errorf("allocated %d KiB at peak, more than %d KiB", rss, hostileRSSKB)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("message lacks %q: %s", w, stderr.String())
				}
			}
			if len(tc.want) >= 2 && strings.HasPrefix(tc.want[0], dir) {
				// file, line, key: "file:LINE:" as every loader writes it.
				if !strings.Contains(stderr.String(), tc.want[0]+":"+tc.want[1]+":") && !strings.Contains(stderr.String(), "line "+tc.want[1]+":") {
					t.Errorf("message does not locate line %s of %s: %s", tc.want[1], tc.want[0], stderr.String())
				}
			}
		})
	}
	t.Logf("slowest case %v of CPU, largest peak allocation %d KiB", worstTime, worstRSS)
}
