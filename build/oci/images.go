package oci

import (
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// BuildInfo describes the build an image comes from, for its OCI labels.
type BuildInfo struct {
	Version  string
	Revision string
	Created  time.Time
	Arch     string
}

func labels(b BuildInfo, title, description string) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       title,
		"org.opencontainers.image.description": description,
		"org.opencontainers.image.version":     b.Version,
		"org.opencontainers.image.revision":    b.Revision,
		"org.opencontainers.image.created":     b.Created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.source":      "https://github.com/gpuwatch/gpuwatch",
		"org.opencontainers.image.url":         "https://github.com/gpuwatch/gpuwatch",
		"org.opencontainers.image.vendor":      "gpuwatch",
	}
}

// ExporterImage is the lean node exporter: gpuwatch-exporter alone. It runs
// as nonroot by default; the DaemonSet runs it as root without capabilities
// where it must reach the kubelet's socket.
func ExporterImage(binary string, b BuildInfo) Spec {
	return Spec{
		Binary:     binary,
		Entrypoint: []string{"/usr/bin/gpuwatch-exporter"},
		Labels: labels(b, "gpuwatch-exporter",
			"Per-GPU telemetry under dcgm-exporter's metric names, with who holds each GPU. Needs the NVIDIA container toolkit for libnvidia-ml.so.1."),
		ExposedPorts: []string{"9400/tcp"},
		// What the NVIDIA container toolkit reads when the pod sets none.
		Env:      []string{"NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=utility"},
		Created:  b.Created,
		Platform: v1.Platform{OS: "linux", Architecture: b.Arch},
	}
}

// AnalyzerImage is the analyzer daemon, with a dry-run policy and default
// thresholds in /etc/gpuwatch so that `docker run IMAGE
// --prometheus.url=...` starts a trial; its state goes to /var/lib/gpuwatch.
// repo is the repository's root (for the example files).
func AnalyzerImage(binary, repo string, b BuildInfo) Spec {
	return Spec{
		Binary:     binary,
		Entrypoint: []string{"/usr/bin/gpuwatch-analyzer", "analyzer"},
		// Default arguments: replaced as a whole by a pod's args.
		Cmd: []string{"--policy.file=/etc/gpuwatch/policy.yml", "--analyzer.config=/etc/gpuwatch/analyzer.yml",
			"--storage.path=/var/lib/gpuwatch/gpuwatch.db"},
		Files: map[string]File{
			"/etc/gpuwatch/policy.yml":   {Source: filepath.Join(repo, "deploy/examples/policy.yaml"), Mode: 0o644},
			"/etc/gpuwatch/analyzer.yml": {Source: filepath.Join(repo, "analyzer/config/example.yaml"), Mode: 0o644},
			"/var/lib/gpuwatch":          {Dir: true, Mode: 0o700, UID: NonRoot},
		},
		// Reports are scheduled in the configured time zone.
		Trees: []string{"/usr/share/zoneinfo"},
		Labels: labels(b, "gpuwatch-analyzer",
			"GPU waste findings per job, a dry-run-first reclamation policy, weekly reports; reads Prometheus."),
		ExposedPorts: []string{"9836/tcp"},
		Created:      b.Created,
		Platform:     v1.Platform{OS: "linux", Architecture: b.Arch},
	}
}
