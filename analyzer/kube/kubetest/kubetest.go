// Package kubetest helps tests of the Kubernetes actuators against
// client-go's fake clientset: Evictions lists what was evicted, and
// ScaleSubresource fills a gap of the fake. The fake does not implement the
// scale subresource (a GetScale answers with the Deployment itself), so
// ScaleSubresource adds reactors that serve deployments/scale and
// statefulsets/scale from the fake's object tracker, as the API server does.
package kubetest

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// ScaleSubresource installs get and update reactors for the scale
// subresource of Deployments and StatefulSets on c.
func ScaleSubresource(c *fake.Clientset) {
	for _, resource := range []string{"deployments", "statefulsets"} {
		gvr := appsv1.SchemeGroupVersion.WithResource(resource)
		c.PrependReactor("get", resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() != "scale" {
				return false, nil, nil
			}
			name := a.(k8stesting.GetAction).GetName()
			obj, err := c.Tracker().Get(gvr, a.GetNamespace(), name)
			if err != nil {
				return true, nil, err
			}
			return true, scaleOf(obj), nil
		})
		c.PrependReactor("update", resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() != "scale" {
				return false, nil, nil
			}
			sc, ok := a.(k8stesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
			if !ok {
				return true, nil, fmt.Errorf("update %s/scale: not a Scale", resource)
			}
			obj, err := c.Tracker().Get(gvr, a.GetNamespace(), sc.Name)
			if err != nil {
				return true, nil, err
			}
			r := sc.Spec.Replicas
			switch o := obj.(type) {
			case *appsv1.Deployment:
				o.Spec.Replicas = &r
			case *appsv1.StatefulSet:
				o.Spec.Replicas = &r
			}
			if err := c.Tracker().Update(gvr, obj, a.GetNamespace()); err != nil {
				return true, nil, err
			}
			return true, scaleOf(obj), nil
		})
	}
}

func scaleOf(obj runtime.Object) *autoscalingv1.Scale {
	var meta metav1.ObjectMeta
	var replicas *int32
	switch o := obj.(type) {
	case *appsv1.Deployment:
		meta, replicas = o.ObjectMeta, o.Spec.Replicas
	case *appsv1.StatefulSet:
		meta, replicas = o.ObjectMeta, o.Spec.Replicas
	}
	r := int32(1) // the API's default
	if replicas != nil {
		r = *replicas
	}
	return &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: meta.Name, Namespace: meta.Namespace},
		Spec: autoscalingv1.ScaleSpec{Replicas: r}, Status: autoscalingv1.ScaleStatus{Replicas: r}}
}

// Evictions lists the pods ("namespace/name") for which c received an
// Eviction, in order.
func Evictions(c *fake.Clientset) []string {
	var out []string
	for _, a := range c.Actions() {
		if a.GetVerb() == "create" && a.GetSubresource() == "eviction" {
			ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
			out = append(out, ev.Namespace+"/"+ev.Name)
		}
	}
	return out
}
