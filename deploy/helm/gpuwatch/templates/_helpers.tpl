{{/* The chart's name, for the app.kubernetes.io/name prefix. */}}
{{- define "gpuwatch.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{/* The prefix of every object's name: the release name, with the chart's
name added when the release name does not already contain it. Truncated so
that "<fullname>-analyzer" stays within 63 characters. */}}
{{- define "gpuwatch.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "gpuwatch.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "gpuwatch.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/part-of: gpuwatch
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of a component: (dict "ctx" $ "component" "exporter").
app.kubernetes.io/name is "<name>-<component>", the monitors' default
jobLabel, so the scrape job is named after the component. */}}
{{- define "gpuwatch.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpuwatch.name" .ctx }}-{{ .component }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "gpuwatch.componentLabels" -}}
{{ include "gpuwatch.labels" .ctx }}
{{ include "gpuwatch.selectorLabels" . }}
{{- end -}}

{{/* An image reference from (dict "image" .Values.x.image "ctx" $). */}}
{{- define "gpuwatch.image" -}}
{{- $tag := default .ctx.Chart.AppVersion .image.tag -}}
{{- if .image.digest -}}
{{ .image.repository }}@{{ .image.digest }}
{{- else -}}
{{ .image.repository }}:{{ $tag }}
{{- end -}}
{{- end -}}

{{- define "gpuwatch.exporter.serviceAccountName" -}}
{{- if .Values.exporter.serviceAccount.create -}}
{{ default (printf "%s-exporter" (include "gpuwatch.fullname" .)) .Values.exporter.serviceAccount.name }}
{{- else -}}
{{ default "default" .Values.exporter.serviceAccount.name }}
{{- end -}}
{{- end -}}

{{- define "gpuwatch.analyzer.serviceAccountName" -}}
{{- if .Values.analyzer.serviceAccount.create -}}
{{ default (printf "%s-analyzer" (include "gpuwatch.fullname" .)) .Values.analyzer.serviceAccount.name }}
{{- else -}}
{{ default "default" .Values.analyzer.serviceAccount.name }}
{{- end -}}
{{- end -}}

{{/* Whether a web config is in use, and the Secret that holds it. */}}
{{- define "gpuwatch.webConfig.enabled" -}}
{{- if or .Values.webConfig.existingSecret .Values.webConfig.config }}true{{ end -}}
{{- end -}}

{{- define "gpuwatch.webConfig.secretName" -}}
{{- default (printf "%s-web-config" (include "gpuwatch.fullname" .)) .Values.webConfig.existingSecret -}}
{{- end -}}

{{/* Volumes for the web config (and its TLS Secret). */}}
{{- define "gpuwatch.webConfig.volumes" -}}
{{- if include "gpuwatch.webConfig.enabled" . }}
- name: web-config
  secret:
    secretName: {{ include "gpuwatch.webConfig.secretName" . }}
    defaultMode: 0440
{{- end }}
{{- if .Values.webConfig.tlsSecret }}
- name: web-tls
  secret:
    secretName: {{ .Values.webConfig.tlsSecret }}
    defaultMode: 0440
{{- end }}
{{- end -}}

{{- define "gpuwatch.webConfig.mounts" -}}
{{- if include "gpuwatch.webConfig.enabled" . }}
- name: web-config
  mountPath: /etc/gpuwatch/web
  readOnly: true
{{- end }}
{{- if .Values.webConfig.tlsSecret }}
- name: web-tls
  mountPath: /etc/gpuwatch/tls
  readOnly: true
{{- end }}
{{- end -}}

{{/* Probes on an HTTP path, or a TCP check when basic auth would answer 401
to the kubelet: (dict "ctx" $ "path" "/healthz" "port" "metrics" "probe" .Values.x.livenessProbe). */}}
{{- define "gpuwatch.probe" -}}
{{- $auth := false -}}
{{- with .ctx.Values.webConfig.config }}{{ if .basic_auth_users }}{{ $auth = true }}{{ end }}{{ end -}}
{{- if .ctx.Values.webConfig.existingSecret }}{{ $auth = true }}{{ end -}}
{{- if $auth }}
tcpSocket:
  port: {{ .port }}
{{- else }}
httpGet:
  path: {{ .path }}
  port: {{ .port }}
  scheme: {{ ternary "HTTPS" "HTTP" (hasKey (default dict .ctx.Values.webConfig.config) "tls_server_config") }}
{{- end }}
{{- with .probe }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* One scrape endpoint of a monitor: (dict "m" <monitor values> "port" "metrics" "ctx" $ "what" "exporter's PodMonitor"),
with the scrape credentials the web config needs. */}}
{{- define "gpuwatch.endpoint" -}}
{{- $m := .m -}}
{{- $e := dict "port" .port "path" "/metrics" -}}
{{- with $m.interval }}{{ $_ := set $e "interval" . }}{{ end -}}
{{- with $m.scrapeTimeout }}{{ $_ := set $e "scrapeTimeout" . }}{{ end -}}
{{- if hasKey $m "honorLabels" }}{{ $_ := set $e "honorLabels" $m.honorLabels }}{{ end -}}
{{- with $m.relabelings }}{{ $_ := set $e "relabelings" . }}{{ end -}}
{{- with $m.metricRelabelings }}{{ $_ := set $e "metricRelabelings" . }}{{ end -}}
{{- $ec := deepCopy (default dict $m.endpointConfig) -}}
{{- $wc := default dict .ctx.Values.webConfig.config -}}
{{- if and (not $ec.basicAuth) .ctx.Values.webConfig.scrapeSecret -}}
{{- $s := .ctx.Values.webConfig.scrapeSecret -}}
{{- $_ := set $ec "basicAuth" (dict "username" (dict "name" $s "key" "username") "password" (dict "name" $s "key" "password")) -}}
{{- else if and (not $ec.basicAuth) $wc.basic_auth_users -}}
{{- fail (printf "webConfig.config.basic_auth_users asks for basic auth, so the %s would be refused (401): set webConfig.scrapeSecret to a Secret with the keys username and password, or give its endpointConfig.basicAuth" .what) -}}
{{- end -}}
{{- if and (not $ec.scheme) $wc.tls_server_config -}}
{{- $_ := set $ec "scheme" "https" -}}
{{- end -}}
{{ toYaml (merge $ec $e) }}
{{- end -}}

{{/* "true" when the web config makes clients authenticate: basic auth users,
or a required client certificate. An existing Secret is the operator's own
file, taken to do so (the chart cannot read it). */}}
{{- define "gpuwatch.webConfig.auth" -}}
{{- $c := default dict .Values.webConfig.config -}}
{{- $tls := default dict $c.tls_server_config -}}
{{- if or .Values.webConfig.existingSecret $c.basic_auth_users (has $tls.client_auth_type (list "RequireAndVerifyClientCert" "RequireAnyClientCert")) }}true{{ end -}}
{{- end -}}

{{/* The analyzer's listen address: analyzer.listenAddress, or all interfaces
when the web config asks for authentication, or else loopback only: its page
shows every finding and the audit log. */}}
{{- define "gpuwatch.analyzer.listenAddress" -}}
{{- if .Values.analyzer.listenAddress -}}
{{ .Values.analyzer.listenAddress }}
{{- else if include "gpuwatch.webConfig.auth" . -}}
:{{ .Values.analyzer.port }}
{{- else -}}
127.0.0.1:{{ .Values.analyzer.port }}
{{- end -}}
{{- end -}}

{{- define "gpuwatch.analyzer.loopback" -}}
{{- if hasPrefix "127.0.0.1:" (include "gpuwatch.analyzer.listenAddress" .) }}true{{ end -}}
{{- end -}}

{{/* "true" when the Prometheus Operator's kind (ServiceMonitor, PodMonitor,
PrometheusRule) may be rendered: prometheusOperator.crds is true, or auto and
the cluster serves the CRD. */}}
{{- define "gpuwatch.hasCRD" -}}
{{- $mode := toString .ctx.Values.prometheusOperator.crds -}}
{{- if eq $mode "true" }}true
{{- else if and (eq $mode "auto") (.ctx.Capabilities.APIVersions.Has (printf "monitoring.coreos.com/v1/%s" .kind)) }}true
{{- end -}}
{{- end -}}

{{/* "true" when the analyzer's state is a shared PostgreSQL store. */}}
{{- define "gpuwatch.analyzer.sharedStore" -}}
{{- $s := .Values.analyzer.storage -}}
{{- if or $s.url $s.existingSecret.name }}true{{ end -}}
{{- end -}}

{{/* The Secret and key holding the shared store's URL. */}}
{{- define "gpuwatch.analyzer.storageSecretName" -}}
{{- default (printf "%s-analyzer-storage" (include "gpuwatch.fullname" .)) .Values.analyzer.storage.existingSecret.name -}}
{{- end -}}

{{/* Analyzer replicas: 1 on SQLite, 2 on a shared store; more than one
     without a shared store would repeat each other's ladders, so it fails. */}}
{{- define "gpuwatch.analyzer.replicas" -}}
{{- $a := .Values.analyzer -}}
{{- $shared := include "gpuwatch.analyzer.sharedStore" . -}}
{{- $n := ternary 2 1 (eq $shared "true") -}}
{{- if not (kindIs "invalid" $a.replicas) }}{{ $n = int $a.replicas }}{{ end -}}
{{- if and (gt $n 1) (ne $shared "true") -}}
{{- fail "analyzer.replicas > 1 needs a shared store (analyzer.storage.url or analyzer.storage.existingSecret.name): with the SQLite file each replica keeps its own ladder and a new leader would repeat the warnings and reclaims" -}}
{{- end -}}
{{- $n -}}
{{- end -}}
