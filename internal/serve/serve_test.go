package serve

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
)

// start serves testHandler on a real loopback socket under lim.
func start(t *testing.T, lim Limits) string {
	t.Helper()
	return startHandler(t, lim, testHandler())
}

// startHandler serves h on a real loopback socket under lim.
func startHandler(t *testing.T, lim Limits, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	empty := ""
	flags := &web.FlagConfig{WebListenAddresses: &[]string{l.Addr().String()}, WebSystemdSocket: new(bool), WebConfigFile: &empty}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serveLimited(ctx, []net.Listener{l}, h, flags, slog.New(slog.DiscardHandler), lim)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return l.Addr().String()
}

const testBody = "gpu_up 1\n"

// testHandler answers every path with testBody.
func testHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, testBody)
	})
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedWithin reports whether the server closes c within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	return err == nil // EOF: the server closed it; a timeout is an error
}

func scrape(t *testing.T, addr string, timeout time.Duration) {
	t.Helper()
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), testBody) {
		t.Fatalf("scrape: %d %.100s", resp.StatusCode, body)
	}
}

// TestScrapeDuringSlowConnections holds 300 connections that send half a
// request and stop (slowloris): a normal scrape still succeeds at once, and
// the slow ones are cut off by the header timeout.
func TestScrapeDuringSlowConnections(t *testing.T) {
	lim := DefaultLimits
	lim.ReadHeaderTimeout = 2 * time.Second
	addr := start(t, lim)
	slow := make([]net.Conn, 300)
	for i := range slow {
		slow[i] = dial(t, addr)
		if _, err := io.WriteString(slow[i], "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: "); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	scrape(t, addr, 2*time.Second)
	t.Logf("scrape during 300 slow connections took %v", time.Since(began))
	for i, c := range slow {
		if !closedWithin(c, 5*time.Second) {
			t.Fatalf("slow connection %d still open after the header timeout", i)
		}
	}
}

// TestConnectionCap: past MaxConnections, while every slot serves a
// request, the listener accepts nothing until one finishes; a request in
// flight is never cut off to make room.
func TestConnectionCap(t *testing.T) {
	lim := DefaultLimits
	lim.MaxConnections = 4
	release := make(chan struct{})
	var entered sync.WaitGroup
	entered.Add(lim.MaxConnections)
	addr := startHandler(t, lim, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			entered.Done()
			<-release
		}
		_, _ = io.WriteString(w, testBody)
	}))
	busy := make([]net.Conn, lim.MaxConnections)
	for i := range busy {
		busy[i] = dial(t, addr)
		if _, err := io.WriteString(busy[i], "GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	entered.Wait()
	extra := dial(t, addr)
	if _, err := io.WriteString(extra, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = extra.SetReadDeadline(time.Now().Add(400 * time.Millisecond))
	if n, _ := extra.Read(make([]byte, 1)); n > 0 {
		t.Fatal("a connection past the cap was served while every slot served a request")
	}
	close(release)
	for i, c := range busy { // none was cut off
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("request %d in flight was cut off: %v", i, err)
		}
		resp.Body.Close()
	}
	_ = extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(extra), nil)
	if err != nil {
		t.Fatalf("queued connection never served: %v", err)
	}
	resp.Body.Close()
}

// TestSilentConnectionsYieldFirst: at the cap, the connection that has
// sent nothing for longest is closed to make room, before any idle
// keep-alive (even an older one) and before any request in flight.
func TestSilentConnectionsYieldFirst(t *testing.T) {
	lim := DefaultLimits
	lim.MaxConnections = 4
	addr := start(t, lim)
	var idle []*bufio.Reader
	var idleConns []net.Conn
	for i := 0; i < 2; i++ { // the oldest: keep-alives, idle after one request
		c := dial(t, addr)
		if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		idle, idleConns = append(idle, br), append(idleConns, c)
	}
	time.Sleep(50 * time.Millisecond)
	silent := []net.Conn{dial(t, addr), dial(t, addr)} // then two that say nothing
	time.Sleep(lim.ReadHeaderTimeout/silentGraceDivisor + 100*time.Millisecond)
	// Two newcomers, each kept open after its answer (idle, the newest):
	// each takes a silent connection's slot, the oldest first.
	for i := range silent {
		c := dial(t, addr)
		if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("newcomer %d not served: %v", i, err)
		}
		resp.Body.Close()
		if !closedWithin(silent[i], 2*time.Second) {
			t.Fatalf("silent connection %d was not closed to make room", i)
		}
	}
	for i, c := range idleConns { // the keep-alives, older, still serve
		if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatalf("idle %d: %v", i, err)
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		resp, err := http.ReadResponse(idle[i], nil)
		if err != nil {
			t.Fatalf("idle keep-alive %d was closed before the silent ones: %v", i, err)
		}
		resp.Body.Close()
	}
}

// TestSilentConnectionClosedAtHeaderTimeout: a connection that sends no
// request at all is closed by the header timeout, as a half-sent one is.
func TestSilentConnectionClosedAtHeaderTimeout(t *testing.T) {
	lim := DefaultLimits
	lim.ReadHeaderTimeout = 500 * time.Millisecond
	addr := start(t, lim)
	c := dial(t, addr)
	began := time.Now()
	if !closedWithin(c, 5*time.Second) {
		t.Fatal("a silent connection outlived the header timeout")
	}
	if took := time.Since(began); took < lim.ReadHeaderTimeout/2 {
		t.Fatalf("closed after %v, before the header timeout", took)
	}
}

// TestIdleAndSlowBodyTimeouts: an idle keep-alive connection and a POST
// whose body trickles in are both closed by the server.
func TestIdleAndSlowBodyTimeouts(t *testing.T) {
	lim := DefaultLimits
	lim.IdleTimeout = 500 * time.Millisecond
	lim.ReadTimeout = time.Second
	addr := start(t, lim)

	idle := dial(t, addr)
	if _, err := io.WriteString(idle, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(idle)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	began := time.Now()
	_ = idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle keep-alive connection: %v, want closed", err)
	}
	t.Logf("idle connection closed after %v", time.Since(began))

	body := dial(t, addr)
	if _, err := io.WriteString(body, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	began = time.Now()
	stop := time.After(10 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			t.Fatal("slow-body POST still open after 10s")
		case <-tick.C:
		}
		if _, err := body.Write([]byte("x")); err != nil {
			t.Logf("slow-body POST closed after %v", time.Since(began))
			return
		}
		_ = body.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := body.Read(make([]byte, 4096)); err == io.EOF {
			t.Logf("slow-body POST closed after %v", time.Since(began))
			if time.Since(began) > 5*time.Second {
				t.Fatalf("slow-body POST held %v", time.Since(began))
			}
			return
		}
	}
}

// TestIdleKeepAlivesYieldToScrape: 600 idle keep-alive connections (more
// than the 512 slots) do not lock out a scrape: it succeeds within a
// second, because the connection idle longest is closed to make room.
func TestIdleKeepAlivesYieldToScrape(t *testing.T) {
	addr := start(t, DefaultLimits)
	var held []net.Conn
	for i := 0; i < 600; i++ {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		// One request each, then the connection stays open, idle.
		if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	// Read the answers of the first 512 (the rest wait for a slot).
	for _, c := range held[:512] {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("keep-alive request: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	time.Sleep(200 * time.Millisecond)
	began := time.Now()
	scrape(t, addr, time.Second)
	t.Logf("scrape with 600 idle keep-alive connections took %v", time.Since(began))
	if took := time.Since(began); took > time.Second {
		t.Fatalf("scrape took %s", took)
	}
}
