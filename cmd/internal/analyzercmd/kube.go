package analyzercmd

import (
	"github.com/gpuwatch/gpuwatch/analyzer/kube"
	"github.com/gpuwatch/gpuwatch/internal/clikit"
)

// KubeClient is the Kubernetes API client from --kubernetes.kubeconfig or
// --kubernetes.in-cluster, or nil when neither is given; a configuration
// that does not work is a usage error.
func KubeClient(kubeconfig string, inCluster bool) (*kube.Client, error) {
	k, err := kube.Connect(kubeconfig, inCluster)
	if err != nil {
		return nil, &clikit.UsageError{Err: err}
	}
	return k, nil
}
