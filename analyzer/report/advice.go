package report

import (
	"github.com/gpuwatch/gpuwatch/analyzer/detect"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
)

// Advise writes concrete advice for one finding: the change that would have
// avoided the waste, with the numbers that justify it. Each pattern's
// advice lives beside its detector, which knows the evidence it writes.
func Advise(f *finding.Finding) string { return detect.Advise(f) }
