// Package kubelettest serves a fake kubelet pod-resources API on a unix
// socket, speaking the real gRPC API, for tests of the kubelet client and of
// the attribution chain.
package kubelettest

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"

	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// Pod is one pod for the fake: its containers' devices by resource name.
type Pod struct {
	Namespace, Name string
	Containers      []Container
}

// Container holds device ids per resource name.
type Container struct {
	Name    string
	Devices map[string][]string
}

// Kubelet is a fake kubelet. Set pods with SetPods; make List hang with Hang.
type Kubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	mu    sync.Mutex
	pods  []Pod
	hang  chan struct{}
	calls int
	srv   *grpc.Server
	lis   net.Listener
}

// Start serves on socket (removing a stale socket file first, as the kubelet does).
func Start(socket string, pods ...Pod) (*Kubelet, error) {
	_ = os.Remove(socket)
	lis, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", socket, err)
	}
	k := &Kubelet{pods: pods, srv: grpc.NewServer(), lis: lis}
	podresourcesv1.RegisterPodResourcesListerServer(k.srv, k)
	go func() { _ = k.srv.Serve(lis) }()
	return k, nil
}

// Stop stops serving, as a kubelet restart does.
func (k *Kubelet) Stop() {
	k.mu.Lock()
	if k.hang != nil {
		close(k.hang)
		k.hang = nil
	}
	k.mu.Unlock()
	k.srv.Stop()
}

// SetPods replaces the pods.
func (k *Kubelet) SetPods(pods ...Pod) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pods = pods
}

// Hang makes List block until the caller gives up (or Release); a kubelet
// under load answers like this.
func (k *Kubelet) Hang() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.hang == nil {
		k.hang = make(chan struct{})
	}
}

// Release ends Hang.
func (k *Kubelet) Release() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.hang != nil {
		close(k.hang)
		k.hang = nil
	}
}

// Calls counts List calls.
func (k *Kubelet) Calls() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.calls
}

// List answers with the current pods.
func (k *Kubelet) List(ctx context.Context, _ *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	k.mu.Lock()
	k.calls++
	hang := k.hang
	pods := k.pods
	k.mu.Unlock()
	if hang != nil {
		select {
		case <-hang:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	resp := &podresourcesv1.ListPodResourcesResponse{}
	for _, p := range pods {
		pr := &podresourcesv1.PodResources{Name: p.Name, Namespace: p.Namespace}
		for _, c := range p.Containers {
			cr := &podresourcesv1.ContainerResources{Name: c.Name}
			for res, ids := range c.Devices {
				cr.Devices = append(cr.Devices, &podresourcesv1.ContainerDevices{ResourceName: res, DeviceIds: ids})
			}
			pr.Containers = append(pr.Containers, cr)
		}
		resp.PodResources = append(resp.PodResources, pr)
	}
	return resp, nil
}
