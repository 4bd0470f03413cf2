// Package kubelet keeps a map of which pod and container hold which device,
// read from the kubelet's pod-resources API (v1) over its unix socket.
//
// dcgm-exporter dials the kubelet on every scrape; here one gRPC connection
// is kept and refreshed in the background on an interval, each call bounded
// by a timeout. The last good map is served while the kubelet is away (a
// restart, an upgrade), and the connection comes back by itself when the
// kubelet does. Reading the map (Latest) never waits on the kubelet.
package kubelet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/gpuwatch/gpuwatch/exporter/source"
)

// DefaultSocket is where the kubelet serves the pod-resources API.
const DefaultSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"

// DefaultResourceNames are the device-plugin resources that are GPUs. A name
// ending in * is a prefix.
var DefaultResourceNames = []string{"nvidia.com/gpu", "nvidia.com/mig-*"}

// maxMessage bounds a List answer; a node with hundreds of pods stays far below.
const maxMessage = 16 << 20

// Options configure a Client.
type Options struct {
	Socket string
	// ResourceNames are the resources whose devices are GPUs (exact, or a
	// prefix ending in *); DefaultResourceNames when empty.
	ResourceNames []string
	Interval      time.Duration // between refreshes; default 10s
	Timeout       time.Duration // of one List call; default 5s
	Logger        *slog.Logger
	Clock         source.Clock
	// OnRefresh, when set, is told the outcome of every refresh.
	OnRefresh func(err error)
}

// Holder is one container holding one device.
type Holder struct {
	Pod, Namespace, Container, ResourceName string
}

// Map is one read of the kubelet: holders per device id, as the device
// plugin names devices ("GPU-<uuid>", "GPU-<uuid>::<replica>",
// "MIG-<uuid>", "MIG-GPU-<uuid>/<gi>/<ci>", or an index).
type Map struct {
	Time    time.Time
	Devices map[string][]Holder
}

// Client refreshes the map in the background.
type Client struct {
	opts   Options
	conn   *grpc.ClientConn
	client podresourcesv1.PodResourcesListerClient
	latest atomic.Pointer[Map]
	mu     sync.Mutex // one refresh at a time
}

// New prepares a client. It does not connect: gRPC connects on the first
// refresh and reconnects after failures on its own.
func New(opts Options) (*Client, error) {
	if opts.Socket == "" {
		opts.Socket = DefaultSocket
	}
	if len(opts.ResourceNames) == 0 {
		opts.ResourceNames = DefaultResourceNames
	}
	if opts.Interval <= 0 {
		opts.Interval = 10 * time.Second
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = source.SystemClock{}
	}
	// A restarted kubelet should be found again within about one interval,
	// not after gRPC's default two-minute backoff.
	bo := backoff.DefaultConfig
	bo.MaxDelay = opts.Interval
	conn, err := grpc.NewClient("unix://"+opts.Socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: opts.Timeout}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage)),
	)
	if err != nil {
		return nil, fmt.Errorf("kubelet pod-resources client for %s: %w", opts.Socket, err)
	}
	return &Client{opts: opts, conn: conn, client: podresourcesv1.NewPodResourcesListerClient(conn)}, nil
}

// Latest returns the last good map, or nil before the first good refresh.
func (c *Client) Latest() *Map { return c.latest.Load() }

// Run refreshes at once, then every Interval until ctx ends.
func (c *Client) Run(ctx context.Context) {
	t := time.NewTicker(c.opts.Interval)
	defer t.Stop()
	for {
		if err := c.Refresh(ctx); err != nil && ctx.Err() == nil {
			c.opts.Logger.Warn("kubelet pod-resources refresh failed; serving the last good map", "socket", c.opts.Socket, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Refresh asks the kubelet once, bounded by Timeout. On failure the last
// good map stays in place.
func (c *Client) Refresh(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.refresh(ctx)
	if c.opts.OnRefresh != nil {
		c.opts.OnRefresh(err)
	}
	return err
}

func (c *Client) refresh(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	resp, err := c.client.List(cctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		// Try the socket again at the next refresh rather than after backoff.
		c.conn.ResetConnectBackoff()
		return fmt.Errorf("list pod resources at %s: %w", c.opts.Socket, err)
	}
	m := &Map{Time: c.opts.Clock.Now(), Devices: map[string][]Holder{}}
	for _, pod := range resp.GetPodResources() {
		for _, ctr := range pod.GetContainers() {
			for _, dev := range ctr.GetDevices() {
				if !c.wanted(dev.GetResourceName()) {
					continue
				}
				for _, id := range dev.GetDeviceIds() {
					m.Devices[id] = append(m.Devices[id], Holder{
						Pod: pod.GetName(), Namespace: pod.GetNamespace(),
						Container: ctr.GetName(), ResourceName: dev.GetResourceName(),
					})
				}
			}
		}
	}
	for _, hs := range m.Devices {
		sort.Slice(hs, func(i, j int) bool {
			a, b := hs[i], hs[j]
			if a.Namespace != b.Namespace {
				return a.Namespace < b.Namespace
			}
			if a.Pod != b.Pod {
				return a.Pod < b.Pod
			}
			return a.Container < b.Container
		})
	}
	c.latest.Store(m)
	return nil
}

func (c *Client) wanted(name string) bool {
	for _, w := range c.opts.ResourceNames {
		if p, ok := strings.CutSuffix(w, "*"); ok {
			if strings.HasPrefix(name, p) {
				return true
			}
		} else if name == w {
			return true
		}
	}
	return false
}

// Close closes the connection.
func (c *Client) Close() error {
	if err := c.conn.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("close kubelet connection: %w", err)
	}
	return nil
}

// DeviceRef is what a device id says about the device it names.
type DeviceRef struct {
	UUID    string // GPU UUID ("GPU-…") or MIG device UUID ("MIG-…")
	GIID    int    // MIG GPU instance, -1 for a whole GPU or when unknown
	Index   int    // GPU index for index-named devices, -1 otherwise
	MIGUUID bool   // UUID is a MIG device's own UUID, to be resolved through NVML
}

// ParseDeviceID reads a device-plugin device id.
func ParseDeviceID(id string) (DeviceRef, bool) {
	ref := DeviceRef{GIID: -1, Index: -1}
	// Time-slicing replicas: "<id>::<n>".
	if i := strings.Index(id, "::"); i >= 0 {
		id = id[:i]
	}
	switch {
	case strings.HasPrefix(id, "MIG-GPU-"):
		// Older plugins: MIG-GPU-<uuid>/<gi>/<ci>.
		parts := strings.Split(strings.TrimPrefix(id, "MIG-"), "/")
		if len(parts) != 3 {
			return ref, false
		}
		gi, ok := atoi(parts[1])
		if !ok {
			return ref, false
		}
		ref.UUID, ref.GIID = parts[0], gi
		return ref, true
	case strings.HasPrefix(id, "MIG-"):
		ref.UUID, ref.MIGUUID = id, true
		return ref, true
	case strings.HasPrefix(id, "GPU-"):
		ref.UUID = id
		return ref, true
	}
	if n, ok := atoi(id); ok {
		ref.Index = n
		return ref, true
	}
	return ref, false
}

func atoi(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}
