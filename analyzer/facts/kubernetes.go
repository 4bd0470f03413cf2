package facts

import (
	"github.com/gpuwatch/gpuwatch/schema"

	"context"
	"fmt"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// KubernetesSource reads pod labels, annotations and owner, and namespace
// labels, from the API server: one list of pods and one of namespaces per
// cycle, whatever the number of findings.
type KubernetesSource struct {
	// Client is the API server's core group: pods and namespaces are all it reads.
	Client corev1client.CoreV1Interface
	// PageSize bounds each list response (default 500).
	PageSize int64
}

// Scheduler implements Source.
func (k *KubernetesSource) Scheduler() string { return schema.SchedulerKubernetes }

// Lookup implements Source. Jobs are "namespace/pod".
func (k *KubernetesSource) Lookup(ctx context.Context, jobs []string) (map[string]*Facts, error) {
	want := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		want[j] = true
	}
	limit := k.PageSize
	if limit <= 0 {
		limit = 500
	}
	nsLabels := map[string]map[string]string{}
	for cont := ""; ; {
		l, err := k.Client.Namespaces().List(ctx, metav1.ListOptions{Limit: limit, Continue: cont})
		if err != nil {
			return nil, fmt.Errorf("list namespaces: %w", err)
		}
		for i := range l.Items {
			nsLabels[l.Items[i].Name] = l.Items[i].Labels
		}
		if cont = l.Continue; cont == "" {
			break
		}
	}
	res := make(map[string]*Facts, len(jobs))
	for cont := ""; ; {
		l, err := k.Client.Pods("").List(ctx, metav1.ListOptions{Limit: limit, Continue: cont})
		if err != nil {
			return nil, fmt.Errorf("list pods: %w", err)
		}
		for i := range l.Items {
			p := &l.Items[i]
			id := p.Namespace + "/" + p.Name
			if !want[id] {
				continue
			}
			f := &Facts{Scheduler: schema.SchedulerKubernetes, State: string(p.Status.Phase)}
			f.Set(schema.AttrNamespace, p.Namespace)
			f.SetMap(schema.AttrPodLabels, maps.Clone(p.Labels))
			f.SetMap(schema.AttrPodAnnotations, maps.Clone(p.Annotations))
			owner := ""
			for _, r := range p.OwnerReferences {
				if r.Controller != nil && *r.Controller {
					owner = r.Kind
				}
			}
			f.Set(schema.AttrOwner, owner)
			if nl, ok := nsLabels[p.Namespace]; ok {
				f.SetMap(schema.AttrNamespaceLabels, maps.Clone(nl))
			} else {
				f.Missing = map[schema.Attr]string{schema.AttrNamespaceLabels: "namespace " + p.Namespace + " not listed"}
			}
			if p.Status.StartTime != nil {
				f.Start = p.Status.StartTime.UTC()
			}
			res[id] = f
		}
		if cont = l.Continue; cont == "" {
			break
		}
	}
	return res, nil
}
