package kube

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// NodePoolLabels are the well-known node labels that name a node pool or
// group, in the order Nodes tries them when its Label is empty.
var NodePoolLabels = []string{
	"cloud.google.com/gke-nodepool",
	"eks.amazonaws.com/nodegroup",
	"kubernetes.azure.com/agentpool",
	"karpenter.sh/nodepool",
	"node.kubernetes.io/instance-type",
}

// Nodes is the planner's pools.Hosts for Kubernetes: it names a host's
// pool from its Node's labels, read from the API server (one paged list of
// nodes per plan). Hosts are node names, as the exporter's hostname label
// carries them.
type Nodes struct {
	// Core lists nodes; nothing else of the API is used.
	Core corev1client.CoreV1Interface
	// Label is the node label naming the pool; empty: the first of
	// NodePoolLabels a node has.
	Label string
	// PageSize bounds each list response (default 500).
	PageSize int64
}

// Describe implements pools.Hosts.
func (k *Nodes) Describe() string {
	if k.Label != "" {
		return "Kubernetes node label " + k.Label
	}
	return "Kubernetes node pool labels"
}

// Pools implements pools.Hosts.
func (k *Nodes) Pools(ctx context.Context, hosts []string) (map[string]string, error) {
	want := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		want[h] = true
	}
	limit := k.PageSize
	if limit <= 0 {
		limit = 500
	}
	labels := NodePoolLabels
	if k.Label != "" {
		labels = []string{k.Label}
	}
	out := map[string]string{}
	for cont := ""; ; {
		l, err := k.Core.Nodes().List(ctx, metav1.ListOptions{Limit: limit, Continue: cont})
		if err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		for i := range l.Items {
			n := &l.Items[i]
			if !want[n.Name] {
				continue
			}
			for _, lb := range labels {
				if v := n.Labels[lb]; v != "" {
					out[n.Name] = v
					break
				}
			}
		}
		if cont = l.Continue; cont == "" {
			return out, nil
		}
	}
}
