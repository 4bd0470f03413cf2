package kube_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuwatch/gpuwatch/analyzer/kube"
	"github.com/gpuwatch/gpuwatch/internal/testkube"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// notebookCRD applies Kubeflow's Notebook kind, as a minimal CRD
// (testdata/notebook-crd.json), and waits until it is served. The CRD is
// cluster-wide and the same for every test, so it stays.
func notebookCRD(t *testing.T, cs *kubernetes.Clientset) {
	t.Helper()
	body, err := os.ReadFile("testdata/notebook-crd.json")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	err = cs.CoreV1().RESTClient().Post().AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions").
		SetHeader("Content-Type", "application/json").Body(body).Do(ctx).Error()
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create Notebook CRD: %v", err)
	}
	testtool.Eventually(t, 30*time.Second, "kubeflow.org/v1 served", func() (bool, error) {
		_, err := cs.Discovery().ServerResourcesForGroupVersion("kubeflow.org/v1")
		return err == nil, nil
	})
}

// createNotebook creates Notebook name in ns and returns its UID.
func createNotebook(t *testing.T, cs *kubernetes.Clientset, ns, name string) string {
	t.Helper()
	body := fmt.Sprintf(`{"apiVersion":"kubeflow.org/v1","kind":"Notebook","metadata":{"name":%q},"spec":{}}`, name)
	raw, err := cs.CoreV1().RESTClient().Post().AbsPath("/apis/kubeflow.org/v1/namespaces", ns, "notebooks").
		SetHeader("Content-Type", "application/json").Body([]byte(body)).Do(context.Background()).Raw()
	if err != nil {
		t.Fatalf("create Notebook %s/%s: %v", ns, name, err)
	}
	var nb struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &nb); err != nil || nb.Metadata.UID == "" {
		t.Fatalf("Notebook %s/%s: no uid in %s (%v)", ns, name, raw, err)
	}
	return string(nb.Metadata.UID)
}

// TestNotebookKindOnRealAPI: a Notebook (kubeflow.org/v1) owns a
// StatefulSet, as Kubeflow's notebook controller makes one, whose
// controller-made pod is named train-job-7: the API server's owner chain
// makes it a notebook, interactive, where its name says batch.
func TestNotebookKindOnRealAPI(t *testing.T) {
	t.Parallel()
	cs := testkube.Admin(t)
	ctx := context.Background()
	notebookCRD(t, cs)
	ns := testkube.Namespace(t, cs, nil)
	uid := createNotebook(t, cs, ns, "nb-1")
	yes := true
	replicas := int32(8)
	labels := map[string]string{"notebook-name": "nb-1"}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "train-job", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "kubeflow.org/v1", Kind: "Notebook", Name: "nb-1", UID: types.UID(uid), Controller: &yes, BlockOwnerDeletion: &yes}}},
		Spec: appsv1.StatefulSetSpec{Replicas: &replicas, PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{NodeName: testkube.Nodes(t)[0],
					Containers: []corev1.Container{{Name: "notebook", Image: "gpuwatch.invalid/notebook:1"}}}}}}
	if _, err := cs.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The StatefulSet controller makes the pods; kwok runs them.
	testtool.Eventually(t, 60*time.Second, "pod train-job-7 Running", func() (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "train-job-7", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && p.Status.Phase == corev1.PodRunning, err
	})
	c, err := kube.New(testkube.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	src := &kube.Facts{Core: c.Core, Apps: c.Apps, Batch: c.Batch, PageSize: 2}
	fs, err := src.Lookup(ctx, []string{ns + "/train-job-7"})
	if err != nil {
		t.Fatal(err)
	}
	f := fs[ns+"/train-job-7"]
	if f == nil {
		t.Fatalf("no facts for %s/train-job-7: %v", ns, fs)
	}
	want := "owner Notebook kubeflow.org/v1 " + ns + "/nb-1"
	if k, ok, why := f.Value(schema.AttrKind); !ok || k != schema.KindInteractive || f.KindSource != want {
		t.Errorf("train-job-7: kind %q (%v %s) from %q, want %q from %q", k, ok, why, f.KindSource, schema.KindInteractive, want)
	}
}
