{{/*
Names. Namespaced objects use "fullname" (<release>-kubesched, at most 63 characters).
Cluster-scoped objects (ClusterRole, ClusterRoleBinding, SchedulingProfiles) and the
Lease use "scopedName" (<fullname>-<namespace>): two releases of the same name in two
namespaces must not share them.
*/}}
{{- define "kubesched.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kubesched.fullname" -}}
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

{{/*
<fullname>-<namespace>; above 63 characters, cut to 54 plus "-" and 8 hex digits of the
full name's hash, so truncation cannot make two releases collide either.
*/}}
{{- define "kubesched.scopedName" -}}
{{- $full := printf "%s-%s" (include "kubesched.fullname" .) .Release.Namespace }}
{{- if gt (len $full) 63 }}
{{- printf "%s-%s" ($full | trunc 54 | trimSuffix "-") ($full | sha256sum | trunc 8) }}
{{- else }}
{{- $full }}
{{- end }}
{{- end }}

{{/* scopedName plus a suffix (list . "metrics-reader"), cut the same way. */}}
{{- define "kubesched.scopedSuffixed" -}}
{{- $ctx := index . 0 }}
{{- $full := printf "%s-%s-%s" (include "kubesched.fullname" $ctx) $ctx.Release.Namespace (index . 1) }}
{{- if gt (len $full) 63 }}
{{- printf "%s-%s" ($full | trunc 54 | trimSuffix "-") ($full | sha256sum | trunc 8) }}
{{- else }}
{{- $full }}
{{- end }}
{{- end }}

{{- define "kubesched.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kubesched.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kubesched.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kubesched.labels" -}}
helm.sh/chart: {{ include "kubesched.chart" . }}
{{ include "kubesched.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: scheduler
app.kubernetes.io/part-of: kubesched
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* serviceAccount.name, else (creating it) the fullname, else "default" as Kubernetes does. */}}
{{- define "kubesched.serviceAccountName" -}}
{{- if .Values.serviceAccount.name }}
{{- .Values.serviceAccount.name }}
{{- else if .Values.serviceAccount.create }}
{{- include "kubesched.fullname" . }}
{{- else }}
{{- "default" }}
{{- end }}
{{- end }}

{{- define "kubesched.leaseName" -}}
{{- include "kubesched.scopedName" . }}
{{- end }}

{{/*
SchedulingProfiles are cluster-scoped: a release applies only those labelled
kubesched.dev/release=<profileRelease> (a label value, unique per release and namespace),
unless profileSelector says otherwise ("" selects every profile).
*/}}
{{- define "kubesched.profileRelease" -}}
{{- include "kubesched.scopedName" . }}
{{- end }}

{{- define "kubesched.profileSelector" -}}
{{- if kindIs "string" .Values.profileSelector }}
{{- .Values.profileSelector }}
{{- else }}
{{- printf "kubesched.dev/release=%s" (include "kubesched.profileRelease" .) }}
{{- end }}
{{- end }}

{{/* Leader election: the value when set, else on exactly when replicaCount > 1. */}}
{{- define "kubesched.leaderElect" -}}
{{- if kindIs "bool" .Values.leaderElection.enabled }}
{{- .Values.leaderElection.enabled }}
{{- else }}
{{- gt (int .Values.replicaCount) 1 }}
{{- end }}
{{- end }}

{{/* repository@digest when a digest is set (the tag is then ignored), else repository:tag. */}}
{{- define "kubesched.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* fullname plus a suffix, still at most 63 characters (Service names are DNS labels). */}}
{{- define "kubesched.suffixed" -}}
{{- $suffix := index . 1 }}
{{- printf "%s-%s" (include "kubesched.fullname" (index . 0) | trunc (int (sub 62 (len $suffix))) | trimSuffix "-") $suffix }}
{{- end }}
