package kubelet

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/exporter/attribution/kubelet/kubelettest"
)

func pod(ns, name, ctr string, devs map[string][]string) kubelettest.Pod {
	return kubelettest.Pod{Namespace: ns, Name: name, Containers: []kubelettest.Container{{Name: ctr, Devices: devs}}}
}

func TestRefreshMapsDevices(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "kubelet.sock")
	k, err := kubelettest.Start(sock,
		pod("ml", "train-0", "main", map[string][]string{"nvidia.com/gpu": {"GPU-aaa", "GPU-bbb"}, "cpu": {"0"}}),
		pod("ml", "infer-0", "srv", map[string][]string{"nvidia.com/mig-1g.10gb": {"MIG-ccc"}}),
		pod("lab", "shared-a", "c", map[string][]string{"nvidia.com/gpu.shared": {"GPU-ddd::0"}}),
		pod("lab", "shared-b", "c", map[string][]string{"nvidia.com/gpu.shared": {"GPU-ddd::1"}}),
		pod("x", "fpga", "c", map[string][]string{"xilinx.com/fpga": {"fpga0"}}),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Stop()
	c, err := New(Options{Socket: sock, ResourceNames: append([]string{"nvidia.com/gpu.shared"}, DefaultResourceNames...), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Latest() != nil {
		t.Fatal("map before the first refresh")
	}
	if err := c.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[string][]Holder{
		"GPU-aaa":    {{"train-0", "ml", "main", "nvidia.com/gpu"}},
		"GPU-bbb":    {{"train-0", "ml", "main", "nvidia.com/gpu"}},
		"MIG-ccc":    {{"infer-0", "ml", "srv", "nvidia.com/mig-1g.10gb"}},
		"GPU-ddd::0": {{"shared-a", "lab", "c", "nvidia.com/gpu.shared"}},
		"GPU-ddd::1": {{"shared-b", "lab", "c", "nvidia.com/gpu.shared"}},
	}
	if got := c.Latest().Devices; !reflect.DeepEqual(got, want) {
		t.Fatalf("devices = %+v\nwant %+v", got, want)
	}
}

func TestLastMapSurvivesRestart(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "kubelet.sock")
	k, err := kubelettest.Start(sock, pod("ml", "a", "c", map[string][]string{"nvidia.com/gpu": {"GPU-1"}}))
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []error
	c, err := New(Options{Socket: sock, Interval: 100 * time.Millisecond, Timeout: 300 * time.Millisecond,
		OnRefresh: func(err error) { outcomes = append(outcomes, err) }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	k.Stop()
	if err := c.Refresh(ctx); err == nil {
		t.Fatal("refresh succeeded with the kubelet gone")
	}
	if got := c.Latest().Devices["GPU-1"]; len(got) != 1 || got[0].Pod != "a" {
		t.Fatalf("last good map lost: %+v", c.Latest())
	}
	k2, err := kubelettest.Start(sock, pod("ml", "b", "c", map[string][]string{"nvidia.com/gpu": {"GPU-1"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer k2.Stop()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := c.Refresh(ctx)
		if err == nil && c.Latest().Devices["GPU-1"][0].Pod == "b" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new data 5s after the kubelet came back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(outcomes) < 3 || outcomes[0] != nil || outcomes[1] == nil || outcomes[len(outcomes)-1] != nil {
		t.Fatalf("OnRefresh outcomes = %v", outcomes)
	}
}

func TestHungKubeletIsBounded(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "kubelet.sock")
	k, err := kubelettest.Start(sock, pod("ml", "a", "c", map[string][]string{"nvidia.com/gpu": {"GPU-1"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Stop()
	c, err := New(Options{Socket: sock, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	k.Hang()
	start := time.Now()
	if err := c.Refresh(context.Background()); err == nil {
		t.Fatal("a hung kubelet refreshed")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("refresh took %s with a 200ms timeout", d)
	}
	if c.Latest() == nil || c.Latest().Devices["GPU-1"] == nil {
		t.Fatal("last map lost while the kubelet hangs")
	}
}

func TestParseDeviceID(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want DeviceRef
		ok   bool
	}{
		{"GPU-8a6f", DeviceRef{UUID: "GPU-8a6f", GIID: -1, Index: -1}, true},
		{"GPU-8a6f::3", DeviceRef{UUID: "GPU-8a6f", GIID: -1, Index: -1}, true},
		{"MIG-GPU-8a6f/2/0", DeviceRef{UUID: "GPU-8a6f", GIID: 2, Index: -1}, true},
		{"MIG-5c1e", DeviceRef{UUID: "MIG-5c1e", GIID: -1, Index: -1, MIGUUID: true}, true},
		{"3", DeviceRef{GIID: -1, Index: 3}, true},
		{"MIG-GPU-8a6f/x/0", DeviceRef{}, false},
		{"MIG-GPU-8a6f/2", DeviceRef{}, false},
		{"fpga0", DeviceRef{}, false},
		{"", DeviceRef{}, false},
	} {
		got, ok := ParseDeviceID(tc.id)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("ParseDeviceID(%q) = %+v, %v; want %+v, %v", tc.id, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzParseDeviceID(f *testing.F) {
	for _, s := range []string{"GPU-8a6f", "GPU-8a6f::3", "MIG-GPU-8a6f/2/0", "MIG-5c1e", "3", "MIG-GPU-/1/1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		ref, ok := ParseDeviceID(id)
		if !ok {
			return
		}
		if ref.Index < -1 || ref.GIID < -1 {
			t.Fatalf("negative index from %q: %+v", id, ref)
		}
		if ref.Index >= 0 && (ref.UUID != "" || ref.GIID >= 0) {
			t.Fatalf("index device with a UUID or instance from %q: %+v", id, ref)
		}
		if ref.Index < 0 && ref.UUID == "" && !strings.HasPrefix(id, "MIG-GPU-") {
			t.Fatalf("no identity from %q: %+v", id, ref)
		}
	})
}
