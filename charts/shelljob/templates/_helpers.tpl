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

{{/* The Kubernetes user names of the operator's and the uninstall hook's ServiceAccounts. */}}
{{- define "shelljob.operatorUser" -}}
{{- printf "system:serviceaccount:%s:%s" .Release.Namespace (include "shelljob.operatorName" .) }}
{{- end }}

{{- define "shelljob.uninstallUser" -}}
{{- printf "system:serviceaccount:%s:%s-uninstall" .Release.Namespace (include "shelljob.fullname" .) }}
{{- end }}

{{/*
The Kubernetes identities of the bot's admins, as a YAML list of
{telegramUser (a string), user, groups}: for each of bot.admins, what
bot.identities says, else user shelljob:telegram:<id>; every one in the
group shelljob:telegram (internal/identity does the same for the bot). It
fails on an identity of no admin, one listed twice, and a system: user or
group, which the bot would then be allowed to become.
*/}}
{{- define "shelljob.botIdentities" -}}
{{- $admins := dict }}
{{- range .Values.bot.admins }}
{{- $_ := set $admins (int64 . | toString) true }}
{{- end }}
{{- $mapped := dict }}
{{- range $i, $id := .Values.bot.identities }}
{{- $key := int64 $id.telegramUser | toString }}
{{- if not (hasKey $admins $key) }}
{{- fail (printf "bot.identities[%d]: Telegram user %s is not in bot.admins" $i $key) }}
{{- end }}
{{- if hasKey $mapped $key }}
{{- fail (printf "bot.identities[%d]: Telegram user %s is listed twice" $i $key) }}
{{- end }}
{{- if hasPrefix "system:" $id.user }}
{{- fail (printf "bot.identities[%d]: user %s: a chat admin may not be a system: user" $i $id.user) }}
{{- end }}
{{- if and (hasPrefix "shelljob:telegram:" $id.user) (ne $id.user (printf "shelljob:telegram:%s" $key)) }}
{{- fail (printf "bot.identities[%d]: user %s is another Telegram user's default identity" $i $id.user) }}
{{- end }}
{{- range $id.groups }}
{{- if hasPrefix "system:" . }}
{{- fail (printf "bot.identities[%d]: group %s: a chat admin may not be in a system: group" $i .) }}
{{- end }}
{{- end }}
{{- $_ := set $mapped $key $id }}
{{- end }}
{{- $out := list }}
{{- range .Values.bot.admins }}
{{- $key := int64 . | toString }}
{{- $user := printf "shelljob:telegram:%s" $key }}
{{- $groups := list "shelljob:telegram" }}
{{- with get $mapped $key }}
{{- $user = .user }}
{{- range .groups }}
{{- if ne . "shelljob:telegram" }}
{{- $groups = append $groups . }}
{{- end }}
{{- end }}
{{- end }}
{{- $out = append $out (dict "telegramUser" $key "user" $user "groups" $groups) }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/*
Who holds each right on each pool, as YAML: pool -> verb (use, stop,
restart, approve) -> a list of RBAC subjects, from each pool's users and
groups (use) and its stop, restart and approve, and, with the bot, the
group shelljob:telegram on bot.pool for each verb of bot.poolVerbs.
*/}}
{{- define "shelljob.poolGrants" -}}
{{- $grants := dict }}
{{- range $name, $pool := .Values.pools }}
{{- if $pool }}
{{- $verbs := dict "use" (dict "users" $pool.users "groups" $pool.groups) "stop" $pool.stop "restart" $pool.restart "approve" $pool.approve }}
{{- $byVerb := dict }}
{{- range $verb, $who := $verbs }}
{{- $subjects := list }}
{{- if $who }}
{{- range $who.users }}
{{- $subjects = append $subjects (dict "kind" "User" "apiGroup" "rbac.authorization.k8s.io" "name" .) }}
{{- end }}
{{- range $who.groups }}
{{- $subjects = append $subjects (dict "kind" "Group" "apiGroup" "rbac.authorization.k8s.io" "name" .) }}
{{- end }}
{{- end }}
{{- $_ := set $byVerb $verb $subjects }}
{{- end }}
{{- $_ := set $grants $name $byVerb }}
{{- end }}
{{- end }}
{{- if .Values.bot.enabled }}
{{- $byVerb := default (dict) (get $grants .Values.bot.pool) }}
{{- range .Values.bot.poolVerbs }}
{{- $subjects := default (list) (get $byVerb .) }}
{{- $_ := set $byVerb . (append $subjects (dict "kind" "Group" "apiGroup" "rbac.authorization.k8s.io" "name" "shelljob:telegram")) }}
{{- end }}
{{- $_ := set $grants .Values.bot.pool $byVerb }}
{{- end }}
{{- toYaml $grants }}
{{- end }}

{{/*
The binding of an admission policy to the release namespace: dict "root",
"name" (the policy's), "component" and "kind" (Validating or Mutating).
*/}}
{{- define "shelljob.policyBinding" -}}
apiVersion: admissionregistration.k8s.io/v1
kind: {{ .kind }}AdmissionPolicyBinding
metadata:
  name: {{ .name }}
  labels:
    {{- include "shelljob.labels" (dict "root" .root "component" .component) | nindent 4 }}
spec:
  policyName: {{ .name }}
  {{- if eq .kind "Validating" }}
  validationActions: [Deny]
  {{- end }}
  matchResources:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: {{ .root.Release.Namespace }}
{{- end }}

{{/*
The variables of the ShellJob admission policies: the job's pool (the
API's default when it names none), its owner (origin.user), how the
messages name it (#N once numbered), and the Telegram user of the request
(the shelljob.dev/telegram-user extra that only the bot may impersonate).
*/}}
{{- define "shelljob.jobPolicyVariables" -}}
- name: pool
  expression: "has(object.spec.pool) && object.spec.pool != '' ? object.spec.pool : 'shell'"
- name: owner
  expression: "has(object.spec.origin.user) ? object.spec.origin.user : ''"
- name: job
  expression: "has(object.status) && has(object.status.number) ? '#' + string(object.status.number) : object.metadata.name"
- name: telegramUser
  expression: >-
    has(request.userInfo.extra) && 'shelljob.dev/telegram-user' in request.userInfo.extra
    ? request.userInfo.extra['shelljob.dev/telegram-user'] : []
{{- end }}

{{/* Whether the caller holds a verb on the job's pool (variables.pool). */}}
{{- define "shelljob.poolRight" -}}
authorizer.group('shell.shelljob.dev').resource('shellpools').namespace(request.namespace).name(variables.pool).check('{{ . }}').allowed()
{{- end }}
