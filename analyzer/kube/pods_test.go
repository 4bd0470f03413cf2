package kube

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
)

// TestPodsAnnotations: the JupyterHub actuator's lookup answers with the
// pod's annotations as the API server holds them, ErrGone for a pod that
// does not exist, and ErrInvalid, asking nothing, for names the API could
// not hold.
func TestPodsAnnotations(t *testing.T) {
	t.Parallel()
	c := fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "jupyter-alice", Namespace: "jhub",
		Annotations: map[string]string{action.AnnotationHubUser: "alice"}}})
	p := &Pods{Core: c.CoreV1()}
	ctx := context.Background()
	ann, err := p.Annotations(ctx, "jhub", "jupyter-alice")
	if err != nil || ann[action.AnnotationHubUser] != "alice" {
		t.Fatalf("annotations %v %v", ann, err)
	}
	if _, err := p.Annotations(ctx, "jhub", "jupyter-bob"); !errors.Is(err, action.ErrGone) {
		t.Errorf("missing pod: %v, want ErrGone", err)
	}
	n := len(c.Actions())
	if _, err := p.Annotations(ctx, "jhub", "Bad_Name"); !errors.Is(err, action.ErrInvalid) {
		t.Errorf("bad name: %v, want ErrInvalid", err)
	}
	if len(c.Actions()) != n {
		t.Errorf("an invalid name reached the API: %v", c.Actions()[n:])
	}
}
