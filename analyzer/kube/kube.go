// Package kube is gpuwatch's one adapter to Kubernetes: every call to the
// API server is made here, for the facts of a policy decision (pod labels,
// annotations and owner, namespace labels), the reclaim actuator (eviction,
// owner scale-down, delete) and its reconcile, the node cordon of the
// out-of-service action, the KubeSpawner pod lookups of the JupyterHub
// actuator, the leader election's Lease and the planner's node pools.
//
// One adapter per backend, as analyzer/slurm is Slurm's: what the analyzer
// asks of the API server, and so what its RBAC role must grant
// (deploy/manifests checks the one against the other), is read in one
// package, and client-go stays out of the packages that decide: facts,
// action, leader and plan/pools define the interfaces, and the types here
// implement them. Only the group clients it calls are linked (core, apps,
// batch, coordination), never client-go's full clientset with every group's client
// and apply configurations; the group clients still share client-go's
// scheme, which registers the types of every API group.
package kube

import (
	"fmt"

	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	batchv1client "k8s.io/client-go/kubernetes/typed/batch/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/leader"
	"github.com/gpuwatch/gpuwatch/analyzer/plan/pools"
)

// The interfaces of the packages that decide, which the types here
// implement.
var (
	_ facts.Source      = (*Facts)(nil)
	_ action.Actuator   = (*Reclaim)(nil)
	_ action.Reconciler = (*Reclaim)(nil)
	_ action.Actuator   = (*Cordon)(nil)
	_ action.Reconciler = (*Cordon)(nil)
	_ action.PodLookup  = (*Pods)(nil)
	_ leader.Leadership = (*Lease)(nil)
	_ pools.Hosts       = (*Nodes)(nil)
)

// Client holds a client for each API group the analyzer calls, and no other:
// client-go's full clientset would link every group's client into the
// binary. The four share one HTTP client, so one connection pool and one
// rate limiter, as the clientset's groups do.
type Client struct {
	// Core: pods, namespaces and nodes (facts, eviction, cordon, the Hub's
	// pod lookups, node pools).
	Core corev1client.CoreV1Interface
	// Apps: ReplicaSets and the scale subresource of Deployments and
	// StatefulSets (facts' owners, scale to zero).
	Apps appsv1client.AppsV1Interface
	// Batch: Jobs, for the CronJob that owns a Job's pod (facts' kinds).
	Batch batchv1client.BatchV1Interface
	// Coordination: the leader election's Lease.
	Coordination coordinationv1client.CoordinationV1Interface
}

// New builds the group clients on one rest.Config.
func New(rc *rest.Config) (*Client, error) {
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
	batch, err := batchv1client.NewForConfigAndClient(rc, hc)
	if err != nil {
		return nil, err
	}
	coord, err := coordinationv1client.NewForConfigAndClient(rc, hc)
	if err != nil {
		return nil, err
	}
	return &Client{Core: core, Apps: apps, Batch: batch, Coordination: coord}, nil
}

// Connect is the client from a kubeconfig file or, inCluster, the pod's
// service account; nil, and no error, when neither is given. Its errors
// are the configuration's: the caller names the flags that gave it.
func Connect(kubeconfig string, inCluster bool) (*Client, error) {
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
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	k, err := New(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return k, nil
}
