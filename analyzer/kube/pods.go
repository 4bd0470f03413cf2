package kube

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
)

// Pods is the JupyterHub actuator's action.PodLookup: it reads a pod's
// annotations, where KubeSpawner names the Hub user and server, from the
// API server at decision time.
type Pods struct {
	// Core gets pods; nothing else of the API is used.
	Core corev1client.CoreV1Interface
}

// Annotations implements action.PodLookup.
func (p *Pods) Annotations(ctx context.Context, ns, name string) (map[string]string, error) {
	if err := validPod(ns, name); err != nil {
		return nil, err
	}
	pod, err := p.Core.Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("pod %s/%s: %w", ns, name, action.ErrGone)
	}
	if err != nil {
		return nil, fmt.Errorf("get pod %s/%s: %w", ns, name, err)
	}
	return pod.Annotations, nil
}
