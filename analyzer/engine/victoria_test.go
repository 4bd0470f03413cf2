package engine

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/query/promapi"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

func vmAvailable() bool {
	_, err := exec.LookPath("victoria-metrics")
	return err == nil
}

// victoria is a real VictoriaMetrics single-node server on a free port.
type victoria struct {
	url  string
	cmd  *exec.Cmd
	log  *os.File
	buf  bytes.Buffer
	sent int
}

// startVictoria starts victoria-metrics with its data in dir. Its search
// options make freshly imported history queryable at once.
func startVictoria(t testing.TB, dir string) (*victoria, error) {
	addr := testtool.FreeAddr(t)
	logf, err := os.Create(filepath.Join(dir, "victoria.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("victoria-metrics", "-storageDataPath="+filepath.Join(dir, "vm"), "-httpListenAddr="+addr,
		"-retentionPeriod=100y", "-search.disableCache", "-search.latencyOffset=0s", "-search.maxSamplesPerQuery=1000000000",
		"-search.maxPointsPerTimeseries=1000000")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start victoria-metrics: %w", err)
	}
	v := &victoria{url: "http://" + addr, cmd: cmd, log: logf}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(v.url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return v, nil
			}
		}
		if time.Now().After(deadline) {
			v.stop()
			b, _ := os.ReadFile(logf.Name())
			return nil, fmt.Errorf("victoria-metrics not ready at %s: %v\n%s", v.url, err, tail(b))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// shutdown stops victoria-metrics as its operators do (SIGINT), which
// writes what it holds in memory to its data folder.
func (v *victoria) shutdown() error {
	if err := v.cmd.Process.Signal(os.Interrupt); err != nil {
		return err
	}
	err := v.cmd.Wait()
	v.log.Close()
	if err != nil {
		b, _ := os.ReadFile(v.log.Name())
		return fmt.Errorf("victoria-metrics shutdown: %w\n%s", err, tail(b))
	}
	return nil
}

func (v *victoria) stop() {
	_ = v.cmd.Process.Kill()
	_ = v.cmd.Wait()
	v.log.Close()
}

// sink writes one collection in the Prometheus text format with
// millisecond timestamps, which /api/v1/import/prometheus takes, and posts
// it in batches.
func (v *victoria) sink(t time.Time, fams []*dto.MetricFamily) error {
	ts := strconv.FormatInt(t.UnixMilli(), 10)
	for _, f := range fams {
		for _, m := range f.Metric {
			v.buf.WriteString(f.GetName())
			v.buf.WriteByte('{')
			for i, l := range m.GetLabel() {
				if i > 0 {
					v.buf.WriteByte(',')
				}
				v.buf.WriteString(l.GetName())
				v.buf.WriteString(`="`)
				v.buf.WriteString(simload.Escape(l.GetValue()))
				v.buf.WriteByte('"')
			}
			val := m.GetGauge().GetValue()
			if m.Counter != nil {
				val = m.GetCounter().GetValue()
			}
			v.buf.WriteString("} ")
			v.buf.WriteString(strconv.FormatFloat(val, 'g', -1, 64))
			v.buf.WriteByte(' ')
			v.buf.WriteString(ts)
			v.buf.WriteByte('\n')
		}
	}
	if v.buf.Len() >= 8<<20 {
		return v.flush()
	}
	return nil
}

func (v *victoria) flush() error {
	if v.buf.Len() == 0 {
		return nil
	}
	resp, err := http.Post(v.url+"/api/v1/import/prometheus", "text/plain", &v.buf)
	if err != nil {
		return fmt.Errorf("import into victoria-metrics: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("import into victoria-metrics: %s", resp.Status)
	}
	v.sent++
	v.buf.Reset()
	return nil
}

// ready makes everything imported searchable.
func (v *victoria) ready() error {
	if err := v.flush(); err != nil {
		return err
	}
	resp, err := http.Get(v.url + "/internal/force_flush")
	if err != nil {
		return fmt.Errorf("victoria-metrics force_flush: %w", err)
	}
	resp.Body.Close()
	return nil
}

// TestCorpusVictoriaMetricsDCP scores the stock DCP variant (honor_labels:
// false, exporter restarts, 60 s scrapes, an outage) imported into a real
// VictoriaMetrics and requires the embedded path's findings.
func TestCorpusVictoriaMetricsDCP(t *testing.T) {
	if !vmAvailable() {
		testtool.Missing(t, "victoria-metrics not installed; .ci/run installs it")
	}
	f := getFixture(t)
	if f.vm == nil {
		t.Fatal("fixture imported nothing into VictoriaMetrics")
	}
	c, err := promapi.New(f.vm.url, promapi.Options{Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	viaVM := scoreStock(t, c, f.c)
	viaEmb := analyze(t, f.dcp, f.c)
	if d := diffFindingsWithin(viaEmb, viaVM, dcpFormat.Interval); d != "" {
		t.Errorf("VictoriaMetrics and embedded findings differ:\n%s", d)
	}
}
