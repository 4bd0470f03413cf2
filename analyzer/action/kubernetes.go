package action

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Kubernetes reclaims pods: through the Eviction API (so PodDisruptionBudgets
// hold), by scaling the owning Deployment or StatefulSet to zero (so the pod
// is not simply recreated), or by deleting the pod as a last resort.
type Kubernetes struct {
	Client kubernetes.Interface
	// Mode is "evict", "scale_owner" or "delete".
	Mode string
	// DeleteAfterRefusals deletes the pod once this many evictions were
	// refused; 0 never does.
	DeleteAfterRefusals int
}

// ScaledFromAnnotation records an owner's replica count before gpuwatch
// scaled it to zero, so that people can restore it.
const ScaledFromAnnotation = "gpuwatch.io/scaled-down-from"

var dnsName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)

// Name implements Actuator.
func (k *Kubernetes) Name() string { return "kubernetes" }

func (k *Kubernetes) target(req *Request) (string, string, error) {
	ns, pod := req.Finding.Namespace, req.Finding.Pod
	if !dnsName.MatchString(ns) || !dnsName.MatchString(pod) {
		return "", "", fmt.Errorf("pod %q/%q: %w", ns, pod, ErrInvalid)
	}
	return ns, pod, nil
}

// Act implements Actuator for reclaim steps.
func (k *Kubernetes) Act(ctx context.Context, req *Request) (string, error) {
	if req.Step != StepReclaim {
		return "", fmt.Errorf("kubernetes %s: %w", req.Step, ErrUnsupported)
	}
	ns, name, err := k.target(req)
	if err != nil {
		return "", err
	}
	pod, err := k.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("pod %s/%s: %w", ns, name, ErrGone)
	}
	if err != nil {
		return "", fmt.Errorf("get pod %s/%s: %w", ns, name, err)
	}
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return "", fmt.Errorf("pod %s/%s is finishing: %w", ns, name, ErrGone)
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

func (k *Kubernetes) evict(ctx context.Context, req *Request, pod *corev1.Pod) (string, error) {
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}}
	err := k.Client.CoreV1().Pods(pod.Namespace).EvictV1(ctx, ev)
	switch {
	case err == nil:
		return fmt.Sprintf("evicted pod %s/%s", pod.Namespace, pod.Name), nil
	case apierrors.IsTooManyRequests(err):
		if k.DeleteAfterRefusals > 0 && req.Attempt > k.DeleteAfterRefusals {
			return k.delete(ctx, pod, fmt.Sprintf("deleted after %d refused evictions:", req.Attempt-1))
		}
		return "", fmt.Errorf("evict pod %s/%s: disruption budget refused (attempt %d): %w", pod.Namespace, pod.Name, req.Attempt, ErrRetryLater)
	case apierrors.IsNotFound(err):
		return "", fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, ErrGone)
	}
	return "", fmt.Errorf("evict pod %s/%s: %w", pod.Namespace, pod.Name, err)
}

func (k *Kubernetes) delete(ctx context.Context, pod *corev1.Pod, what string) (string, error) {
	err := k.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, ErrGone)
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
func (k *Kubernetes) owner(ctx context.Context, pod *corev1.Pod) (kind, name string, err error) {
	ref := controller(pod.OwnerReferences)
	if ref == nil {
		return "", "", errNoOwner
	}
	switch ref.Kind {
	case "StatefulSet":
		return "StatefulSet", ref.Name, nil
	case "ReplicaSet":
		rs, err := k.Client.AppsV1().ReplicaSets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return "", "", fmt.Errorf("get replicaset %s/%s: %w", pod.Namespace, ref.Name, err)
		}
		if d := controller(rs.OwnerReferences); d != nil && d.Kind == "Deployment" {
			return "Deployment", d.Name, nil
		}
	}
	return "", "", errNoOwner
}

func (k *Kubernetes) scaleOwner(ctx context.Context, pod *corev1.Pod) (string, error) {
	kind, name, err := k.owner(ctx, pod)
	if err != nil {
		return "", err
	}
	ns := pod.Namespace
	zero := int32(0)
	switch kind {
	case "Deployment":
		d, err := k.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("get deployment %s/%s: %w", ns, name, err)
		}
		from := replicas(d.Spec.Replicas)
		annotate(&d.ObjectMeta, from)
		d.Spec.Replicas = &zero
		if _, err := k.Client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
			return "", fmt.Errorf("scale deployment %s/%s to zero: %w", ns, name, err)
		}
		return fmt.Sprintf("scaled deployment %s/%s from %d to 0 replicas", ns, name, from), nil
	default:
		s, err := k.Client.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("get statefulset %s/%s: %w", ns, name, err)
		}
		from := replicas(s.Spec.Replicas)
		annotate(&s.ObjectMeta, from)
		s.Spec.Replicas = &zero
		if _, err := k.Client.AppsV1().StatefulSets(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			return "", fmt.Errorf("scale statefulset %s/%s to zero: %w", ns, name, err)
		}
		return fmt.Sprintf("scaled statefulset %s/%s from %d to 0 replicas", ns, name, from), nil
	}
}

func replicas(p *int32) int32 {
	if p == nil {
		return 1 // the API's default
	}
	return *p
}

func annotate(m *metav1.ObjectMeta, from int32) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	if _, ok := m.Annotations[ScaledFromAnnotation]; !ok {
		m.Annotations[ScaledFromAnnotation] = strconv.Itoa(int(from))
	}
}

// Reconcile implements Reconciler: a reclaim took effect when the pod is gone
// or terminating, or its owner stands at zero replicas.
func (k *Kubernetes) Reconcile(ctx context.Context, req *Request) (Outcome, string, error) {
	ns, name, err := k.target(req)
	if err != nil {
		return 0, "", err
	}
	pod, err := k.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Applied, "pod is gone", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("get pod %s/%s: %w", ns, name, err)
	}
	if pod.DeletionTimestamp != nil {
		return Applied, "pod is terminating", nil
	}
	if k.Mode == "scale_owner" {
		if kind, oname, err := k.owner(ctx, pod); err == nil {
			var r *int32
			if kind == "Deployment" {
				if d, err := k.Client.AppsV1().Deployments(ns).Get(ctx, oname, metav1.GetOptions{}); err == nil {
					r = d.Spec.Replicas
				}
			} else if s, err := k.Client.AppsV1().StatefulSets(ns).Get(ctx, oname, metav1.GetOptions{}); err == nil {
				r = s.Spec.Replicas
			}
			if r != nil && *r == 0 {
				return Applied, "owner " + oname + " is at zero replicas", nil
			}
		}
	}
	return NotApplied, "pod " + ns + "/" + name + " still running", nil
}
