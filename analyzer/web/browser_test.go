package web

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// The page is checked in the browser people use it with: headless Chromium
// (Debian package chromium) loads it from a real HTTP server. Set
// GPUWATCH_UPDATE_SCREENSHOTS=1 to rewrite docs/web-findings.png.

const screenshotPath = "../../docs/web-findings.png"

func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testtool.Missing(t, "chromium not installed; .ci/run installs it")
	return ""
}

func runChromium(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.Bytes()
}

func TestBrowserFindingsAndFilters(t *testing.T) {
	t.Parallel()
	bin := chromiumPath(t)
	srv := httptest.NewServer(fixtureHandler())
	t.Cleanup(srv.Close) // after the parallel subtests
	cases := []struct {
		path string
		rows int
		want []string
	}{
		{"/", 9, []string{"481920", "ml-serving/embedder-7d9f", "Orphan process", "177.5"}},
		// What the filter form submits (method GET, these field names).
		{"/?team=vision&pattern=&node=", 3, []string{"resnet-sweep", "diffusion-xl"}},
		{"/?team=&pattern=stuck&node=gpu-h100-01", 1, []string{"llm-pretrain-7b", "26.0"}},
		{"/audit", 0, []string{"scancel --signal=USR1 --full 481777", "smtp: connection refused"}},
		{"/reports", 0, []string{"Fleet (administrators)", "2026-W47"}},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			t.Parallel() // each its own Chromium and profile
			dom := string(runChromium(t, bin, "--dump-dom", srv.URL+c.path))
			if got := strings.Count(dom, `<tr class="finding"`); got != c.rows {
				t.Errorf("browser shows %d finding rows, want %d", got, c.rows)
			}
			for _, w := range c.want {
				if !strings.Contains(dom, w) {
					t.Errorf("browser DOM lacks %q", w)
				}
			}
		})
	}
}

func TestBrowserScreenshot(t *testing.T) {
	t.Parallel()
	bin := chromiumPath(t)
	srv := httptest.NewServer(fixtureHandler())
	defer srv.Close()
	out := filepath.Join(t.TempDir(), "shot.png")
	runChromium(t, bin, "--screenshot="+out, "--window-size=1280,900", srv.URL+"/")
	img := decodePNG(t, out)
	checkScreenshot(t, img)
	if os.Getenv("GPUWATCH_UPDATE_SCREENSHOTS") != "" {
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(screenshotPath, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The committed screenshot must be a real one of this page.
	checkScreenshot(t, decodePNG(t, screenshotPath))
}

func decodePNG(t *testing.T, p string) image.Image {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return img
}

// checkScreenshot: the right size, the dark header at the top, and a page
// that is not blank (many distinct colours: text, pills, bars).
func checkScreenshot(t *testing.T, img image.Image) {
	t.Helper()
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 900 {
		t.Fatalf("screenshot is %dx%d, want 1280x900", b.Dx(), b.Dy())
	}
	r, g, b, _ := img.At(640, 10).RGBA()
	if r>>8 > 40 || g>>8 > 40 || b>>8 > 60 {
		t.Errorf("header pixel %d,%d,%d is not the dark header", r>>8, g>>8, b>>8)
	}
	colours := map[uint32]bool{}
	for y := 0; y < 900; y += 3 {
		for x := 0; x < 1280; x += 3 {
			r, g, b, _ := img.At(x, y).RGBA()
			colours[(r>>8)<<16|(g>>8)<<8|b>>8] = true
		}
	}
	if len(colours) < 200 {
		t.Errorf("screenshot has only %d colours: a blank or error page?", len(colours))
	}
}

// probePage loads path into a frame of the given width and writes, into
// the dumped DOM, the tables whose last column cannot be seen: past the
// frame's right edge with no scrolling box around it to reach it.
func probePage(path string, width int) string {
	return `<!DOCTYPE html><html><body><iframe id="f" src="` + path + `" style="width:` + strconv.Itoa(width) + `px;height:900px;border:0"></iframe>
<pre id="result">pending</pre>
<script>
document.getElementById("f").onload = function () {
  var d = this.contentDocument, w = d.documentElement.clientWidth, cut = [];
  d.querySelectorAll("table").forEach(function (t) {
    var cells = t.querySelectorAll("tr:first-child > *"), last = cells[cells.length - 1];
    if (!last || last.getBoundingClientRect().right <= w + 1) { return; }
    for (var el = t.parentElement; el; el = el.parentElement) {
      var o = d.defaultView.getComputedStyle(el).overflowX;
      if ((o === "auto" || o === "scroll") && el.getBoundingClientRect().right <= w + 1) { return; }
    }
    cut.push((t.id || "table") + " ends at " + Math.round(last.getBoundingClientRect().right) + " px");
  });
  document.getElementById("result").textContent = "cut: " + (cut.join("; ") || "none");
};
</script></body></html>`
}

// TestBrowserTablesReachable: every table's last column can be read in a
// 1,400 px wide window (and a 900 px one): it fits, or its box scrolls. The
// reports table was cut at 1,400 px.
func TestBrowserTablesReachable(t *testing.T) {
	t.Parallel()
	bin := chromiumPath(t)
	mux := http.NewServeMux()
	// The page forbids framing (frame-ancestors 'none'); the probe frames a
	// copy served without that header, the page itself unchanged.
	h := fixtureHandler()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		w.Header().Set("Content-Type", rec.Header().Get("Content-Type"))
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	})
	for _, width := range []int{1400, 900} {
		for _, path := range []string{"/", "/reports", "/audit"} {
			probe := "/probe-" + strconv.Itoa(width) + strings.ReplaceAll(path, "/", "_")
			mux.HandleFunc(probe, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/html; charset=utf-8")
				io.WriteString(w, probePage(path, width))
			})
		}
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	for _, width := range []int{1400, 900} {
		for _, path := range []string{"/", "/reports", "/audit"} {
			t.Run(strconv.Itoa(width)+path, func(t *testing.T) {
				t.Parallel()
				probe := "/probe-" + strconv.Itoa(width) + strings.ReplaceAll(path, "/", "_")
				dom := string(runChromium(t, bin, "--virtual-time-budget=5000", "--window-size=1600,1000", "--dump-dom", srv.URL+probe))
				m := regexp.MustCompile(`<pre id="result">([^<]*)</pre>`).FindStringSubmatch(dom)
				if m == nil || m[1] != "cut: none" {
					t.Errorf("%s at %d px: %v", path, width, m)
				}
			})
		}
	}
}
