{{/* The chart's name: nameOverride, or railscope. */}}
{{- define "railscope.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The objects' name: fullnameOverride, else the release name where it contains the chart's name
(`helm install railscope ...` gives `railscope`, the kustomize base's names), else
<release>-<name>.
*/}}
{{- define "railscope.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "railscope.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "railscope.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{/* What the Service, ServiceMonitor and PodMonitor select the agent's pods by. */}}
{{- define "railscope.selectorLabels" -}}
app.kubernetes.io/name: {{ include "railscope.name" . }}
app.kubernetes.io/component: exporter
{{- end -}}

{{/* Every object's labels: those of the kustomize base. */}}
{{- define "railscope.labels" -}}
{{ include "railscope.selectorLabels" . }}
app.kubernetes.io/part-of: railscope
{{- end -}}

{{- define "railscope.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* The checkov finding the base skips on every core object (see packaging/README.md). */}}
{{- define "railscope.checkovNamespace" -}}
checkov.io/skip1: CKV_K8S_21=a base has no namespace; the overlay sets it (kustomize namespace)
{{- end -}}

{{/* The scrape endpoint's settings, shared by the ServiceMonitor and the PodMonitor. */}}
{{- define "railscope.endpoint" -}}
{{- $m := .monitor -}}
port: metrics
path: /metrics
{{- if .root.Values.webConfig.tls }}
scheme: https
{{- end }}
interval: {{ $m.interval }}
scrapeTimeout: {{ $m.scrapeTimeout }}
{{- with $m.tlsConfig }}
tlsConfig:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $m.basicAuth }}
basicAuth:
  {{- toYaml . | nindent 2 }}
{{- end }}
relabelings:
  - sourceLabels: [{{ .nodeLabel }}]
    targetLabel: instance
{{- with $m.relabelings }}
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $m.metricRelabelings }}
metricRelabelings:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
