package features

import (
	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/schema"
)

// Identify returns the device and holder a GPU series describes (host under
// any of the label conventions, UUID, UUID/GI for a MIG instance, model and
// job), or false when the series names no GPU. Without a fetch's evidence
// only a pod named as an exporter's is taken for one.
func Identify(m model.Metric) (GPU, bool) { return identify(m, nil) }

// Cluster returns the cluster a series names, "" where it names none. Like
// the holder's labels, exported_cluster comes first: with honor_labels off
// Prometheus renames the series' own cluster label when the scrape
// configuration sets one too, and the series' own is where its GPU is.
func Cluster(m model.Metric) string {
	if c := lv(m, ExportedPrefix+schema.LabelCluster); c != "" {
		return c
	}
	return lv(m, schema.LabelCluster)
}
