package web

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
)

// benchFindings: a large fleet's worth of current findings (2,000), spread
// over 8 teams and 250 nodes.
func benchFindings() []finding.Finding {
	base := fixtureFindings()
	out := make([]finding.Finding, 0, 2000)
	for i := 0; i < 2000; i++ {
		f := base[i%len(base)]
		f.Job = fmt.Sprintf("%d", 500000+i)
		f.Team = fmt.Sprintf("team-%d", i%8)
		f.Hostname = fmt.Sprintf("gpu-node-%03d", i%250)
		f.WastedGPUHours = float64(i%97) + 0.5
		out = append(out, f)
	}
	return out
}

func BenchmarkFindingsPage(b *testing.B) {
	h := Handler(Options{Findings: fakeFindings{fs: benchFindings()}})
	for _, target := range []string{"/", "/?team=team-3&node=gpu-node-011"} {
		b.Run(target, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, target, nil)
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatal(rec.Code)
				}
			}
		})
	}
}
