// Package testkube gives tests the real Kubernetes control plane that
// test/kubernetes/start.sh runs on loopback (etcd, kube-apiserver with RBAC,
// kube-controller-manager, kwok's fake GPU nodes): an admin client, a
// namespace of their own, and the credentials of a ServiceAccount to act as.
//
// It reads KUBECONFIG and GPUWATCH_KUBE_DIR, which start.sh exports
// (scripts/test.sh evals it), and only uses a KUBECONFIG that lies in that
// folder: a developer's own cluster is never the target of a test that
// evicts pods. Without them the test is skipped, and fails under CI=true.
package testkube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// EnvDir names the variable start.sh sets to its state folder.
const EnvDir = "GPUWATCH_KUBE_DIR"

// Config returns the cluster admin's client configuration.
func Config(t testing.TB) *rest.Config {
	t.Helper()
	cfg, err := config()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the Kubernetes control plane is required under CI=true: %v", err)
		}
		t.Skipf("no Kubernetes control plane (eval \"$(sh test/kubernetes/start.sh)\"): %v", err)
	}
	return cfg
}

func config() (*rest.Config, error) {
	dir, kc := os.Getenv(EnvDir), os.Getenv("KUBECONFIG")
	if dir == "" || kc == "" {
		return nil, fmt.Errorf("%s and KUBECONFIG are not both set", EnvDir)
	}
	if rel, err := filepath.Rel(dir, kc); err != nil || strings.HasPrefix(rel, "..") {
		return nil, fmt.Errorf("KUBECONFIG %s is not start.sh's (in %s): refusing to test on it", kc, dir)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		return nil, err
	}
	// Tests create and list in bursts; client-go's default 5 qps makes them wait.
	cfg.QPS, cfg.Burst = 200, 400
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := cs.Discovery().ServerVersion(); err != nil {
		return nil, fmt.Errorf("the API server does not answer: %w", err)
	}
	return cfg, nil
}

// Client returns a clientset for cfg.
func Client(t testing.TB, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// Admin returns the cluster admin's clientset.
func Admin(t testing.TB) *kubernetes.Clientset {
	t.Helper()
	return Client(t, Config(t))
}

// Nodes names the fake GPU nodes (8 nvidia.com/gpu, 14
// nvidia.com/mig-1g.10gb each). There is no scheduler: a pod names its node.
func Nodes(t testing.TB) []string {
	t.Helper()
	n := strings.Fields(os.Getenv("GPUWATCH_KUBE_NODES"))
	if len(n) == 0 {
		t.Fatal("GPUWATCH_KUBE_NODES is empty: start.sh registers the nodes")
	}
	return n
}

var unsafeName = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a namespace for the test, with labels, deleted when it
// ends, and waits for the controller-manager to give it its default
// ServiceAccount (without which no pod can be created in it).
func Namespace(t testing.TB, cs kubernetes.Interface, labels map[string]string) string {
	t.Helper()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	base := strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(base) > 40 {
		base = strings.TrimRight(base[:40], "-")
	}
	name := base + "-" + hex.EncodeToString(b)
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		// Pods on kwok's nodes go at once; the namespace controller does the rest.
		zero := int64(0)
		_ = cs.CoreV1().Pods(name).DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	testtool.Eventually(t, 60*time.Second, "default ServiceAccount in "+name, func() (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	return name
}

// RunningPod creates pod, bound to node when it names none, and waits until
// kwok reports it Running; it returns the pod as the API server has it then.
func RunningPod(t testing.TB, cs kubernetes.Interface, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	if pod.Spec.NodeName == "" {
		pod.Spec.NodeName = Nodes(t)[0]
	}
	if len(pod.Spec.Containers) == 0 {
		pod.Spec.Containers = []corev1.Container{{Name: "main", Image: "gpuwatch.invalid/train:1"}}
	}
	ctx := context.Background()
	if _, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	return WaitRunning(t, cs, pod.Namespace, pod.Name)
}

// WaitRunning waits until the pod is Running.
func WaitRunning(t testing.TB, cs kubernetes.Interface, ns, name string) *corev1.Pod {
	t.Helper()
	var got *corev1.Pod
	testtool.Eventually(t, 60*time.Second, "pod "+ns+"/"+name+" Running", func() (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = p
		return p.Status.Phase == corev1.PodRunning, nil
	})
	return got
}

// ServiceAccountConfig returns a client configuration that authenticates as
// the ServiceAccount ns/name with a token the API server issued for it
// (TokenRequest), and with no client certificate: every call is authorized
// as that account alone, through RBAC.
func ServiceAccountConfig(t testing.TB, admin *rest.Config, ns, name string) *rest.Config {
	t.Helper()
	cs := Client(t, admin)
	exp := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s/%s: %v", ns, name, err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = tr.Status.Token
	cfg.QPS, cfg.Burst = admin.QPS, admin.Burst
	return cfg
}
