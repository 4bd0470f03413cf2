// Command soak measures the exporter under steady scraping: it starts the
// given exporter command, scrapes /metrics at a fixed rate for a while and
// prints RSS (start, end, peak) and CPU use from /proc. scripts/soak.sh runs
// it on the simulated 8-GPU node with a 1 s collect interval at 20 scrapes/s.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:19400", "exporter address")
	rate := flag.Int("rate", 20, "scrapes per second")
	dur := flag.Duration("duration", 60*time.Second, "how long to scrape")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: soak [flags] -- EXPORTER-COMMAND ARGS...")
		os.Exit(2)
	}
	cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "start:", err)
		os.Exit(1)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	base := "http://" + *addr
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "exporter did not become healthy")
			os.Exit(1)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Warm up, then measure.
	scrape(client, base, *rate, 5*time.Second)
	rss0, _ := status(pid, "VmRSS")
	cpu0 := cpuSeconds(pid)
	t0 := time.Now()
	n, bytes, fails := scrape(client, base, *rate, *dur)
	elapsed := time.Since(t0).Seconds()
	cpu1 := cpuSeconds(pid)
	rss1, _ := status(pid, "VmRSS")
	hwm, _ := status(pid, "VmHWM")
	fmt.Printf("scrapes %d (%.1f/s), failures %d, %.0f KiB per scrape\n", n, float64(n)/elapsed, fails, float64(bytes)/float64(max(n, 1))/1024)
	fmt.Printf("RSS start %.1f MiB, end %.1f MiB, peak %.1f MiB (target < 40 MiB)\n", rss0/1024, rss1/1024, hwm/1024)
	fmt.Printf("CPU %.2f%% of one core (target < 2%%)\n", 100*(cpu1-cpu0)/elapsed)
	if fails > 0 || hwm/1024 >= 40 || 100*(cpu1-cpu0)/elapsed >= 2 {
		os.Exit(1)
	}
}

func scrape(client *http.Client, base string, rate int, d time.Duration) (n, bytes, fails int) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	t := time.NewTicker(time.Second / time.Duration(rate))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		resp, err := client.Get(base + "/metrics")
		if err != nil {
			fails++
			continue
		}
		b, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			fails++
		}
		n++
		bytes += int(b)
	}
}

// status reads a kB field of /proc/PID/status.
func status(pid int, field string) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field+":") {
			f := strings.Fields(line)
			return strconv.ParseFloat(f[1], 64)
		}
	}
	return 0, fmt.Errorf("%s not in status", field)
}

// cpuSeconds is utime+stime of the process, in seconds (USER_HZ = 100 on Linux).
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndex(s, ")")+2:])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}
