package kube

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/target"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Reclaim is the Kubernetes actuator: it reclaims pods through the Eviction
// API (so PodDisruptionBudgets hold), by scaling the owning Deployment or
// StatefulSet to zero (so the pod is not simply recreated), or by deleting
// the pod as a last resort.
type Reclaim struct {
	// Core gets, evicts and deletes pods; Apps reads ReplicaSets and scales
	// Deployments and StatefulSets. Nothing else of the API is used.
	Core corev1client.CoreV1Interface
	Apps appsv1client.AppsV1Interface
	// Mode is "evict", "scale_owner" or "delete".
	Mode string
	// DeleteAfterRefusals deletes the pod once this many evictions were
	// refused; 0 never does.
	DeleteAfterRefusals int
}

// dnsName is what a namespace, pod or node name must be before it is sent
// to the API server: a finding's names come from its telemetry.
var dnsName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)

// validPod refuses a finding's pod whose names the API could not hold.
func validPod(ns, pod string) error {
	if !dnsName.MatchString(ns) || !dnsName.MatchString(pod) {
		return fmt.Errorf("pod %q/%q: %w", ns, pod, action.ErrInvalid)
	}
	return nil
}

// Name implements action.Actuator.
func (k *Reclaim) Name() string { return schema.SchedulerKubernetes }

func (k *Reclaim) target(req *action.Request) (string, string, error) {
	ns, pod := req.Finding.Namespace, req.Finding.Pod
	if err := validPod(ns, pod); err != nil {
		return "", "", err
	}
	return ns, pod, nil
}

// Act implements action.Actuator for reclaim steps.
func (k *Reclaim) Act(ctx context.Context, req *action.Request) (string, error) {
	if req.Step != action.StepReclaim {
		return "", fmt.Errorf("kubernetes %s: %w", req.Step, action.ErrUnsupported)
	}
	ns, name, err := k.target(req)
	if err != nil {
		return "", err
	}
	pod, err := k.Core.Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("pod %s/%s: %w", ns, name, action.ErrGone)
	}
	if err != nil {
		return "", fmt.Errorf("get pod %s/%s: %w", ns, name, err)
	}
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return "", fmt.Errorf("pod %s/%s is finishing: %w", ns, name, action.ErrGone)
	}
	if err := proven(req, pod); err != nil {
		return "", err
	}
	if err := k.notUndone(ctx, pod); err != nil {
		return "", err
	}
	switch k.Mode {
	case "scale_owner":
		detail, err := k.scaleOwner(ctx, pod)
		if !errors.Is(err, errNoOwner) {
			return detail, err
		}
		// A bare pod has nothing to scale: evicting it is the next safest.
		return k.evict(ctx, req, pod)
	case "delete":
		return k.delete(ctx, pod, "deleted")
	default:
		return k.evict(ctx, req, pod)
	}
}

// proven checks, on the pod as the API server reports it now, the proof
// the step was decided on: same node, created before the evidence, and
// the UID the proof recorded. A step without a proof is refused.
func proven(req *action.Request, pod *corev1.Pod) error {
	id := pod.Namespace + "/" + pod.Name
	if req.Target == nil || !req.Target.OK() || req.Target.UID == "" {
		return fmt.Errorf("pod %s: no proof that it is the workload the evidence came from: %w", id, action.ErrRefused)
	}
	if string(pod.UID) != req.Target.UID {
		return fmt.Errorf("pod %s is uid %s, the evidence's was %s (recreated under its name): %w", id, pod.UID, req.Target.UID, action.ErrRefused)
	}
	fa := &facts.Facts{Scheduler: schema.SchedulerKubernetes, State: string(pod.Status.Phase), Identity: Identity(pod)}
	if p := target.Prove(&req.Finding, fa, ""); !p.OK() {
		return fmt.Errorf("pod %s as the API server reports it: %s: %w", id, p.Why, action.ErrRefused)
	}
	return nil
}

// uidIs makes a delete or eviction conditional on the pod's UID: a pod
// recreated under the name between the read and the write is not touched.
func uidIs(pod *corev1.Pod) *metav1.DeleteOptions {
	uid := pod.UID
	return &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
}

func (k *Reclaim) evict(ctx context.Context, req *action.Request, pod *corev1.Pod) (string, error) {
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}, DeleteOptions: uidIs(pod)}
	err := k.Core.Pods(pod.Namespace).EvictV1(ctx, ev)
	switch {
	case err == nil:
		return fmt.Sprintf("evicted pod %s/%s", pod.Namespace, pod.Name), nil
	case apierrors.IsTooManyRequests(err):
		if k.DeleteAfterRefusals > 0 && req.Attempt > k.DeleteAfterRefusals {
			return k.delete(ctx, pod, fmt.Sprintf("deleted after %d refused evictions:", req.Attempt-1))
		}
		return "", fmt.Errorf("evict pod %s/%s: disruption budget refused (attempt %d): %w", pod.Namespace, pod.Name, req.Attempt, action.ErrRetryLater)
	case apierrors.IsNotFound(err):
		return "", fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, action.ErrGone)
	case apierrors.IsConflict(err):
		return "", fmt.Errorf("evict pod %s/%s: no longer uid %s: %w", pod.Namespace, pod.Name, pod.UID, action.ErrRefused)
	}
	return "", fmt.Errorf("evict pod %s/%s: %w", pod.Namespace, pod.Name, err)
}

func (k *Reclaim) delete(ctx context.Context, pod *corev1.Pod, what string) (string, error) {
	err := k.Core.Pods(pod.Namespace).Delete(ctx, pod.Name, *uidIs(pod))
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, action.ErrGone)
	}
	if apierrors.IsConflict(err) {
		return "", fmt.Errorf("delete pod %s/%s: no longer uid %s: %w", pod.Namespace, pod.Name, pod.UID, action.ErrRefused)
	}
	if err != nil {
		return "", fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return fmt.Sprintf("%s pod %s/%s", what, pod.Namespace, pod.Name), nil
}

var errNoOwner = errors.New("no scalable owner")

func controller(refs []metav1.OwnerReference) *metav1.OwnerReference {
	for i := range refs {
		if refs[i].Controller != nil && *refs[i].Controller {
			return &refs[i]
		}
	}
	return nil
}

// owner finds the Deployment (through its ReplicaSet) or StatefulSet that
// controls pod.
func (k *Reclaim) owner(ctx context.Context, pod *corev1.Pod) (kind, name string, err error) {
	ref := controller(pod.OwnerReferences)
	if ref == nil {
		return "", "", errNoOwner
	}
	switch ref.Kind {
	case "StatefulSet":
		return "StatefulSet", ref.Name, nil
	case "ReplicaSet":
		rs, err := k.Apps.ReplicaSets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return "", "", fmt.Errorf("get replicaset %s/%s: %w", pod.Namespace, ref.Name, err)
		}
		if d := controller(rs.OwnerReferences); d != nil && d.Kind == "Deployment" {
			return "Deployment", d.Name, nil
		}
	}
	return "", "", errNoOwner
}

func (k *Reclaim) scaleOwner(ctx context.Context, pod *corev1.Pod) (string, error) {
	kind, name, err := k.owner(ctx, pod)
	if err != nil {
		return "", err
	}
	ns := pod.Namespace
	// Through the scale subresource only: the role needs get and update on
	// deployments/scale and statefulsets/scale, never on the objects
	// themselves. The previous replica count goes into the audit record.
	//
	// The controller manager writes the owner's status while it runs, and
	// every such write moves the resourceVersion the update is guarded by;
	// a conflict is therefore read again and retried, with client-go's
	// backoff, rather than reported as a failed reclaim.
	s := k.scales(kind, ns)
	var from int32
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sc, err := s.GetScale(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get %s %s/%s scale: %w", strings.ToLower(kind), ns, name, err)
		}
		from = sc.Spec.Replicas
		sc.Spec.Replicas = 0
		if _, err := s.UpdateScale(ctx, name, sc, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("scale %s %s/%s to zero: %w", strings.ToLower(kind), ns, name, err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("scaled %s %s/%s from %d to 0 replicas", strings.ToLower(kind), ns, name, from), nil
}

// scaler is the scale subresource of a Deployment or StatefulSet.
type scaler interface {
	GetScale(ctx context.Context, name string, opts metav1.GetOptions) (*autoscalingv1.Scale, error)
	UpdateScale(ctx context.Context, name string, scale *autoscalingv1.Scale, opts metav1.UpdateOptions) (*autoscalingv1.Scale, error)
}

func (k *Reclaim) scales(kind, ns string) scaler {
	if kind == "Deployment" {
		return k.Apps.Deployments(ns)
	}
	return k.Apps.StatefulSets(ns)
}

// Reconcile implements action.Reconciler: a reclaim took effect when the
// pod is gone or terminating, or its owner stands at zero replicas.
func (k *Reclaim) Reconcile(ctx context.Context, req *action.Request) (action.Outcome, string, error) {
	ns, name, err := k.target(req)
	if err != nil {
		return 0, "", err
	}
	pod, err := k.Core.Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return action.Applied, "pod is gone", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("get pod %s/%s: %w", ns, name, err)
	}
	if pod.DeletionTimestamp != nil {
		return action.Applied, "pod is terminating", nil
	}
	if k.Mode == "scale_owner" {
		if kind, oname, err := k.owner(ctx, pod); err == nil {
			if sc, err := k.scales(kind, ns).GetScale(ctx, oname, metav1.GetOptions{}); err == nil && sc.Spec.Replicas == 0 {
				return action.Applied, "owner " + oname + " is at zero replicas", nil
			}
		}
	}
	return action.NotApplied, "pod " + ns + "/" + name + " still running", nil
}

// notUndone refuses a pod whose controller is itself run by another
// controller gpuwatch cannot stop (Kubeflow's Notebook owns the
// StatefulSet of a notebook server): an eviction is undone at once, and a
// scale to zero is reset by the owner. Such a workload is stopped through
// its owner (a notebook's culling, its user), so the step is skipped and
// the notices already sent stand. A chain that cannot be read is refused
// too: a fact that cannot be had never makes a harsher step.
func (k *Reclaim) notUndone(ctx context.Context, pod *corev1.Pod) error {
	ref := controller(pod.OwnerReferences)
	if ref == nil {
		return nil
	}
	id := pod.Namespace + "/" + pod.Name
	var up *metav1.OwnerReference
	switch ref.Kind {
	case "StatefulSet":
		sts, err := k.Apps.StatefulSets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("pod %s: its StatefulSet %s's owner cannot be read (%v), so a reclaim might be undone: %w", id, ref.Name, err, action.ErrUnsupported)
		}
		up = controller(sts.OwnerReferences)
	case "ReplicaSet":
		rs, err := k.Apps.ReplicaSets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("pod %s: its ReplicaSet %s's owner cannot be read (%v), so a reclaim might be undone: %w", id, ref.Name, err, action.ErrUnsupported)
		}
		if up = controller(rs.OwnerReferences); up != nil && up.Kind == "Deployment" {
			return nil // scale_owner scales the Deployment; its pods are its own.
		}
	case "Job", "DaemonSet":
		return nil
	default:
		// A custom controller runs the pod itself.
		up = ref
	}
	if up == nil {
		return nil
	}
	o := &Owner{Kind: up.Kind, APIVersion: up.APIVersion, Namespace: pod.Namespace, Name: up.Name}
	return fmt.Errorf("pod %s is run by %s, which starts it again: evicting or scaling it would be undone, so it is not reclaimed; stop it through its owner: %w",
		id, o, action.ErrUnsupported)
}
