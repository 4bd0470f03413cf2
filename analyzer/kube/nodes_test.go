package kube

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/gpuwatch/gpuwatch/analyzer/plan/pools"
)

// TestNodes: node pools from the API server's node list (the group
// clients of New against a server answering as the API server does,
// paged).
func TestNodes(t *testing.T) {
	t.Parallel()
	pages := map[string]string{
		"": `{"kind":"NodeList","apiVersion":"v1","metadata":{"continue":"p2"},"items":[
			{"metadata":{"name":"gke-a-1","labels":{"cloud.google.com/gke-nodepool":"a100-pool","node.kubernetes.io/instance-type":"a2-highgpu-8g"}}},
			{"metadata":{"name":"other","labels":{"cloud.google.com/gke-nodepool":"cpu"}}}]}`,
		"p2": `{"kind":"NodeList","apiVersion":"v1","metadata":{},"items":[
			{"metadata":{"name":"eks-b-2","labels":{"node.kubernetes.io/instance-type":"p5.48xlarge"}}}]}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/nodes" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(pages[r.URL.Query().Get("continue")]))
	}))
	defer srv.Close()
	c, err := New(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	k := &Nodes{Core: c.Core, PageSize: 2}
	got, err := k.Pools(context.Background(), []string{"gke-a-1", "eks-b-2", "absent"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["gke-a-1"] != "a100-pool" || got["eks-b-2"] != "p5.48xlarge" {
		t.Errorf("pools %v", got)
	}
	n := pools.New(context.Background(), pools.Options{Hosts: k}, []string{"gke-a-1"})
	if p, by := n.Pool("A100-SXM4-80GB", "gke-a-1", ""); p != "A100-SXM4-80GB/a100-pool" || by != k.Describe() {
		t.Errorf("pool %s by %s", p, by)
	}
}
