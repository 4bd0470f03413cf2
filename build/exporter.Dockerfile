# gpuwatch-exporter: the lean node exporter.
#   docker build -f build/exporter.Dockerfile -t gpuwatch-exporter:dev .
# The same image is built without a container engine by scripts/release.sh
# (build/oci), which is what CI checks.
#
# glibc, not musl or scratch: go-nvml is a cgo binding that dlopens
# libnvidia-ml.so.1, which the NVIDIA container toolkit mounts from the host
# (NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES=utility).
ARG GO_VERSION=1.26.8
FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG REVISION=unknown
ENV CGO_ENABLED=1 CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations"
RUN go build -trimpath -ldflags "-s -w -X github.com/prometheus/common/version.Version=${VERSION} -X github.com/prometheus/common/version.Revision=${REVISION}" -o /out/gpuwatch-exporter ./cmd/gpuwatch-exporter

# distroless/base: glibc, CA certificates, tzdata, a nonroot user; no shell.
FROM gcr.io/distroless/base-debian12:nonroot
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="gpuwatch-exporter" \
      org.opencontainers.image.description="Per-GPU telemetry under dcgm-exporter's metric names, with who holds each GPU. Needs the NVIDIA container toolkit for libnvidia-ml.so.1." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/gpuwatch/gpuwatch" \
      org.opencontainers.image.url="https://github.com/gpuwatch/gpuwatch" \
      org.opencontainers.image.vendor="gpuwatch"
COPY --from=build /out/gpuwatch-exporter /usr/bin/gpuwatch-exporter
ENV NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=utility
# Non-root by default; the Helm chart and manifests run it as root without
# capabilities only where it must reach the kubelet's pod-resources socket.
USER 65532:65532
EXPOSE 9400
ENTRYPOINT ["/usr/bin/gpuwatch-exporter"]
