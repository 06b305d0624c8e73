{{/* The chart's name, overridable with nameOverride. */}}
{{- define "ferrofed.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object's name: fullnameOverride, or the release name when it already
holds the chart name (`helm install ferrofed charts/ferrofed` gives "ferrofed"), else
"<release>-<chart>".
*/}}
{{- define "ferrofed.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "ferrofed.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "ferrofed.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: ferrofed
{{- end }}

{{/* Labels on the CRDs: the chart's, without the operator pods' component. */}}
{{- define "ferrofed.crdLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "ferrofed.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: ferrofed
app.kubernetes.io/component: crd
{{- end }}

{{/* Labels that select the operator pods. */}}
{{- define "ferrofed.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ferrofed.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{/* The operator's ServiceAccount. */}}
{{- define "ferrofed.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (printf "%s-operator" (include "ferrofed.fullname" .)) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name must name an existing ServiceAccount when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The webhook's Service, certificate Secret and cert-manager Certificate. */}}
{{- define "ferrofed.webhookServiceName" -}}
{{- printf "%s-webhook" (include "ferrofed.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- define "ferrofed.webhookSecretName" -}}
{{- printf "%s-webhook-tls" (include "ferrofed.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The operator image. */}}
{{- define "ferrofed.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
The namespaces of scope "namespaces", comma-separated; refuses an empty list.
*/}}
{{- define "ferrofed.watchNamespaces" -}}
{{- if not .Values.watchNamespaces -}}
{{- fail "scope: namespaces needs at least one namespace in watchNamespaces" -}}
{{- end -}}
{{- join "," .Values.watchNamespaces -}}
{{- end }}
