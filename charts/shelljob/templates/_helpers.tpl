{{/* The chart name, or nameOverride. */}}
{{- define "shelljob.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of the objects' names: fullnameOverride, else the release name
(with the chart name prepended when the release name lacks it). Short
enough for the suffixes the templates add.
*/}}
{{- define "shelljob.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The name of a cluster-scoped object: the prefix and the release namespace,
so that releases in two namespaces do not collide.
*/}}
{{- define "shelljob.clusterName" -}}
{{- printf "%s-%s" (include "shelljob.fullname" .) .Release.Namespace }}
{{- end }}

{{- define "shelljob.operatorName" -}}
{{- printf "%s-operator" (include "shelljob.fullname" .) }}
{{- end }}

{{- define "shelljob.botName" -}}
{{- printf "%s-bot" (include "shelljob.fullname" .) }}
{{- end }}

{{/* The namespace of the worker pods. */}}
{{- define "shelljob.workersNamespace" -}}
{{- default (printf "%s-workers" .Release.Namespace) .Values.workers.namespace }}
{{- end }}

{{/* The Kubernetes user name of the bot's ServiceAccount. */}}
{{- define "shelljob.botUser" -}}
{{- printf "system:serviceaccount:%s:%s" .Release.Namespace (include "shelljob.botName" .) }}
{{- end }}

{{- define "shelljob.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of every object: dict "root" (the top context) and "component"
(the part it belongs to; empty for objects of the whole chart).
*/}}
{{- define "shelljob.labels" -}}
helm.sh/chart: {{ include "shelljob.chart" .root }}
{{ include "shelljob.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: shelljob
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The labels that select a component's pods. The name is the chart's and the
component's (shelljob-operator, shelljob-bot), as the worker pods' is
shelljob-worker, so each part can be found by its name label alone.
*/}}
{{- define "shelljob.selectorLabels" -}}
app.kubernetes.io/name: {{ include "shelljob.name" .root }}{{ with .component }}-{{ . }}{{ end }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- with .component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end }}

{{/* image REPOSITORY:TAG of .image, the tag defaulting to appVersion. */}}
{{- define "shelljob.image" -}}
{{- printf "%s:%s" .image.repository (default .root.Chart.AppVersion .image.tag) }}
{{- end }}

{{/*
The restricted Pod Security profile: the pod's and the container's
securityContext.
*/}}
{{- define "shelljob.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "shelljob.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop:
  - ALL
{{- end }}

{{/*
The Secret with the bot's credentials: bot.existingSecret, else the one
the chart makes from bot.token, bot.appId and bot.appHash.
*/}}
{{- define "shelljob.botSecret" -}}
{{- default (include "shelljob.botName" .) .Values.bot.existingSecret }}
{{- end }}

{{/*
The names of the NetworkPolicies the chart makes, beside which the
operator writes <name>-outside: the workers' and the release namespace's.
*/}}
{{- define "shelljob.workersNetworkPolicy" -}}
{{- printf "%s-workers" (include "shelljob.fullname" .) }}
{{- end }}

{{- define "shelljob.releaseNetworkPolicy" -}}
{{- printf "%s-deny-workers" (include "shelljob.fullname" .) }}
{{- end }}

{{/* The Service of the stream API, and the Secret of its certificate. */}}
{{- define "shelljob.streamAPIService" -}}
{{- printf "%s-stream-api" (include "shelljob.operatorName" .) }}
{{- end }}

{{- define "shelljob.streamAPISecret" -}}
{{- printf "%s-stream-api-tls" (include "shelljob.operatorName" .) }}
{{- end }}
