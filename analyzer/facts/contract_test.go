package facts_test

import (
	"context"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/kube"
	"github.com/gpuwatch/gpuwatch/exporter/attribution/teams"
	"github.com/gpuwatch/gpuwatch/schema"
)

// recorded replays a command's recorded output.
type recorded []byte

func (r recorded) Run(context.Context, string, ...string) ([]byte, error) { return r, nil }

// TestEveryAttributeIsFilled: each attribute a policy may match is filled,
// for each scheduler its spec names, by that scheduler's source (Slurm's
// from squeue 22.05's recorded --json output, Kubernetes' from the fake
// clientset) with a teams file. A match key nothing fills cannot exist.
func TestEveryAttributeIsFilled(t *testing.T) {
	out, err := os.ReadFile("testdata/squeue-22.05.json")
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	c := fake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ml", Labels: map[string]string{"env": "dev"}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ml", Labels: map[string]string{"team": "vision"},
			Annotations:     map[string]string{schema.ExemptKey: "false"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Job", Name: "j", Controller: &yes}}}})
	tm, err := teams.Parse([]byte("team: {podLabel: team, default: unassigned}\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := &facts.Resolver{Teams: tm, Sources: map[string]facts.Source{
		schema.SchedulerSlurm:      &facts.SlurmSource{Runner: recorded(out)},
		schema.SchedulerKubernetes: &kube.Facts{Core: c.CoreV1()}}}
	fs := []finding.Finding{{Job: "1228", Scheduler: "slurm"}, {Job: "ml/p", Pod: "p", Namespace: "ml", Scheduler: "kubernetes"}}
	got := r.Resolve(context.Background(), fs)
	for _, s := range schema.MatchAttrs() {
		for _, sch := range s.Sources {
			fa := got[0]
			if sch == schema.SchedulerKubernetes {
				fa = got[1]
			}
			var filled bool
			var why string
			if s.Map {
				m, ok, w := fa.Map(s.Attr)
				filled, why = ok && len(m) > 0, w
			} else {
				v, ok, w := fa.Value(s.Attr)
				filled, why = ok && v != "", w
			}
			// qos and account are empty on a cluster without accounting,
			// as the recording's is; they are present, not missing.
			if !filled && !(sch == schema.SchedulerSlurm && (s.Attr == schema.AttrQoS || s.Attr == schema.AttrAccount) && why == "") {
				t.Errorf("%s: %s not filled (%s)", sch, s.Attr, why)
			}
		}
	}
	if v, _, _ := got[0].Value(schema.AttrJobName); v != "train-resnet" {
		t.Errorf("job name %q", v)
	}
	if v, _, _ := got[1].Value(schema.AttrOwner); v != "Job" {
		t.Errorf("owner %q", v)
	}
}
