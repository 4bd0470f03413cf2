package analyzercmd

import (
	"fmt"

	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpuwatch/gpuwatch/internal/clikit"
)

// Kube holds a client for each API group the analyzer calls, and no other:
// client-go's full clientset would link every group of the API into the
// binary. The three share one HTTP client, so one connection pool and one
// rate limiter, as the clientset's groups do.
type Kube struct {
	// Core: pods, namespaces and nodes (facts, eviction, cordon, the Hub's
	// pod lookups, node pools).
	Core corev1client.CoreV1Interface
	// Apps: ReplicaSets and the scale subresource of Deployments and
	// StatefulSets (facts' owners, scale to zero).
	Apps appsv1client.AppsV1Interface
	// Coordination: the leader election's Lease.
	Coordination coordinationv1client.CoordinationV1Interface
}

// NewKube builds the group clients on one rest.Config.
func NewKube(rc *rest.Config) (*Kube, error) {
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, err
	}
	core, err := corev1client.NewForConfigAndClient(rc, hc)
	if err != nil {
		return nil, err
	}
	apps, err := appsv1client.NewForConfigAndClient(rc, hc)
	if err != nil {
		return nil, err
	}
	coord, err := coordinationv1client.NewForConfigAndClient(rc, hc)
	if err != nil {
		return nil, err
	}
	return &Kube{Core: core, Apps: apps, Coordination: coord}, nil
}

// KubeClient is the Kubernetes API client from a kubeconfig file or the
// pod's service account, or nil when neither is given.
func KubeClient(kubeconfig string, inCluster bool) (*Kube, error) {
	if kubeconfig == "" && !inCluster {
		return nil, nil
	}
	var rc *rest.Config
	var err error
	if inCluster {
		rc, err = rest.InClusterConfig()
	} else {
		rc, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if err != nil {
		return nil, &clikit.UsageError{Err: fmt.Errorf("kubernetes client: %w", err)}
	}
	k, err := NewKube(rc)
	if err != nil {
		return nil, &clikit.UsageError{Err: fmt.Errorf("kubernetes client: %w", err)}
	}
	return k, nil
}
