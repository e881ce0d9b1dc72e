{{- define "workqueue.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "workqueue.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "workqueue.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "workqueue.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "workqueue.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "workqueue.claimName" -}}
{{- if .Values.volume.existingClaim -}}
{{- .Values.volume.existingClaim -}}
{{- else -}}
{{- printf "%s-data" (include "workqueue.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "workqueue.hasVolume" -}}
{{- if or .Values.volume.existingClaim .Values.volume.create.enabled .Values.volume.nfs.server -}}true{{- end -}}
{{- end -}}

{{/* A list as one shell-split string (the manager splits it as a shell would, and never
runs a shell): each word single-quoted, a quote inside a word closed, escaped and reopened
('it'"'"'s'), so every word comes back exactly as given. */}}
{{- define "workqueue.words" -}}
{{- $words := list -}}
{{- range . -}}
{{- $words = append $words (printf "'%s'" (replace "'" "'\"'\"'" (toString .))) -}}
{{- end -}}
{{- join " " $words -}}
{{- end -}}

{{/* One container argument, "--flag=value", as a YAML string whatever the value holds. */}}
{{- define "workqueue.arg" -}}
{{- toJson (printf "%s=%s" (index . 0) (toString (index . 1))) -}}
{{- end -}}

{{- define "workqueue.uiSecretName" -}}
{{- default (printf "%s-ui" (include "workqueue.fullname" .)) .Values.dashboard.existingSecret -}}
{{- end -}}

{{- define "workqueue.metricsSelector" -}}
namespace="{{ .Release.Namespace }}", job="{{ include "workqueue.fullname" . }}-metrics"
{{- end -}}
