package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
)

// CordonReasonAnnotation holds why gpuwatch cordoned a node; it stays
// after an operator uncordons it, as the node's history.
const CordonReasonAnnotation = "gpuwatch.io/cordon-reason"

// Cordon is the Kubernetes actuator of the out_of_service action: it
// cordons the fault finding's node (spec.unschedulable, as kubectl cordon
// does): running pods stay, no new pod is scheduled there. It never
// evicts: draining the pods is the operator's call.
type Cordon struct {
	// Core gets and patches nodes; nothing else of the API is used.
	Core corev1client.CoreV1Interface
}

// Name implements action.Actuator.
func (k *Cordon) Name() string { return action.KubernetesCordonName }

func (k *Cordon) target(req *action.Request) (string, error) {
	n := req.Finding.Hostname
	if !dnsName.MatchString(n) {
		return "", fmt.Errorf("node %q: %w", n, action.ErrInvalid)
	}
	return n, nil
}

// Act implements action.Actuator for drain steps.
func (k *Cordon) Act(ctx context.Context, req *action.Request) (string, error) {
	if req.Step != action.StepDrain {
		return "", fmt.Errorf("kubernetes cordon %s: %w", req.Step, action.ErrUnsupported)
	}
	name, err := k.target(req)
	if err != nil {
		return "", err
	}
	reason := action.OutOfServiceReason(req, "kubectl uncordon "+name)
	// The node's status is written by its kubelet all the time, and each
	// write moves the resourceVersion the patch is guarded by. A conflict is
	// read again, so an operator's cordon made meanwhile is seen (and left
	// alone) rather than overwritten, and a heartbeat is not a failed step.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		return k.cordon(ctx, name, reason)
	})
	if apierrors.IsConflict(err) {
		return "", fmt.Errorf("cordon node %s: changed while cordoning: %w", name, action.ErrRetryLater)
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("cordoned node %s: %s", name, reason), nil
}

// cordon reads the node and patches it unschedulable, guarded by the
// resourceVersion it read.
func (k *Cordon) cordon(ctx context.Context, name, reason string) error {
	node, err := k.Core.Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("node %s: %w", name, action.ErrGone)
	}
	if err != nil {
		return fmt.Errorf("get node %s: %w", name, err)
	}
	if node.Spec.Unschedulable {
		return fmt.Errorf("node %s is already cordoned: %w", name, action.ErrAlready)
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": node.ResourceVersion,
			"annotations": map[string]string{CordonReasonAnnotation: reason}},
		"spec": map[string]any{"unschedulable": true},
	})
	if err != nil {
		return err
	}
	after, err := k.Core.Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("node %s: %w", name, action.ErrGone)
	case apierrors.IsConflict(err):
		return err
	case err != nil:
		return fmt.Errorf("cordon node %s: %w", name, err)
	case !after.Spec.Unschedulable:
		return errors.New("node " + name + " still schedulable after the patch")
	}
	return nil
}

// Reconcile implements action.Reconciler: a cordon took effect when the
// node is unschedulable or gone.
func (k *Cordon) Reconcile(ctx context.Context, req *action.Request) (action.Outcome, string, error) {
	name, err := k.target(req)
	if err != nil {
		return 0, "", err
	}
	node, err := k.Core.Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return action.Applied, "the node is gone", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("get node %s: %w", name, err)
	}
	if node.Spec.Unschedulable {
		return action.Applied, "node " + name + " is cordoned", nil
	}
	return action.NotApplied, "node " + name + " is schedulable", nil
}
