# gpuwatch analyzer: findings, the reclamation policy, reports and the web page.
#   docker build -f build/analyzer.Dockerfile -t gpuwatch-analyzer:dev .
#   docker run -p 9836:9836 gpuwatch-analyzer:dev --policy.file=/etc/gpuwatch/policy.yml \
#     --prometheus.url=http://prometheus:9090 --storage.path=/var/lib/gpuwatch/gpuwatch.db
# The same image is built without a container engine by scripts/release.sh
# (build/oci), which is what CI checks.
ARG GO_VERSION=1.26.8
FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG REVISION=unknown
ENV CGO_ENABLED=1 CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations"
RUN go build -trimpath -ldflags "-s -w -X github.com/prometheus/common/version.Version=${VERSION} -X github.com/prometheus/common/version.Revision=${REVISION}" -o /out/gpuwatch-analyzer ./cmd/gpuwatch-analyzer
# The state folder, owned by the image's user.
RUN install -d -m 0700 -o 65532 -g 65532 /out/state

FROM gcr.io/distroless/base-debian12:nonroot
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="gpuwatch-analyzer" \
      org.opencontainers.image.description="GPU waste findings per job, a dry-run-first reclamation policy, weekly reports; reads Prometheus." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/gpuwatch/gpuwatch" \
      org.opencontainers.image.url="https://github.com/gpuwatch/gpuwatch" \
      org.opencontainers.image.vendor="gpuwatch"
COPY --from=build /out/gpuwatch-analyzer /usr/bin/gpuwatch-analyzer
COPY --from=build --chown=65532:65532 /out/state /var/lib/gpuwatch
COPY deploy/examples/policy.yaml /etc/gpuwatch/policy.yml
COPY analyzer/config/example.yaml /etc/gpuwatch/analyzer.yml
USER 65532:65532
EXPOSE 9836
ENTRYPOINT ["/usr/bin/gpuwatch-analyzer", "analyzer"]
# Default arguments: a dry-run trial; a pod's args replace them as a whole.
CMD ["--policy.file=/etc/gpuwatch/policy.yml", "--analyzer.config=/etc/gpuwatch/analyzer.yml", "--storage.path=/var/lib/gpuwatch/gpuwatch.db"]
