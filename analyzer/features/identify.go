package features

import "github.com/prometheus/common/model"

// Identify returns the device and holder a GPU series describes (host under
// any of the label conventions, UUID, UUID/GI for a MIG instance, model and
// job), or false when the series names no GPU. Without a fetch's evidence
// only a pod named as an exporter's is taken for one.
func Identify(m model.Metric) (GPU, bool) { return identify(m, nil) }
