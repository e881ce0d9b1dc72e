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

{{/* Whether a volume is claimed and mounted: for a folder source (its items are the volume's
files), or when volume.enabled asks for one with any source (a scratch or output volume for the
workers). An S3 or Redis source needs none: most managed clusters have no ReadWriteMany class,
and a claim that never binds would keep every worker pod from starting. */}}
{{- define "workqueue.hasVolume" -}}
{{- $wanted := .Values.volume.enabled -}}
{{- if kindIs "invalid" $wanted -}}{{- $wanted = eq .Values.source.type "filesystem" -}}{{- end -}}
{{- if and $wanted (or .Values.volume.existingClaim .Values.volume.create.enabled .Values.volume.nfs.server) -}}true{{- end -}}
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

{{/* What the chart refuses to render, each with what to set instead: a promise that would
silently not hold on the cluster (a folder source with no volume, an autoscaler whose metric
nothing collects, batches larger than what may run at once). Included by the Deployment. */}}
{{- define "workqueue.validate" -}}
{{- if and (eq .Values.source.type "filesystem") (not (include "workqueue.hasVolume" .)) -}}
{{- fail "source.type filesystem lists the shared volume's files, and no volume is claimed: set volume.create.enabled, volume.existingClaim or volume.nfs.server (and leave volume.enabled unset or true)" -}}
{{- end -}}
{{- $azure := .Values.source.azure -}}
{{- if and (eq .Values.source.type "azure") $azure.workloadIdentity .Values.serviceAccount.create (not (index .Values.serviceAccount.annotations "azure.workload.identity/client-id")) -}}
{{- fail "source.azure.workloadIdentity needs the managed identity's client id on the service account: set serviceAccount.annotations.azure\\.workload\\.identity/client-id" -}}
{{- end -}}
{{- if and (eq .Values.source.type "azure") (not $azure.workloadIdentity) (not $azure.credentialsSecret) -}}
{{- fail "source.type azure needs credentials: source.azure.workloadIdentity=true (on AKS) or source.azure.credentialsSecret (a Secret with a connection string, key or SAS token)" -}}
{{- end -}}
{{- $mode := .Values.autoscaling.mode -}}
{{- if and (has $mode (list "keda" "hpa")) (not .Values.serviceMonitor.enabled) (not .Values.metrics.scrapeAnnotations) -}}
{{- fail (printf "autoscaling.mode %s scales on the managers' workqueue_items through Prometheus, and nothing would collect it: set serviceMonitor.enabled=true (prometheus-operator) or metrics.scrapeAnnotations=true (a Prometheus that scrapes annotated pods)" $mode) -}}
{{- end -}}
{{- $most := int .Values.manager.parallelism -}}
{{- if ne $mode "off" -}}{{- $most = max $most (int .Values.autoscaling.maxParallelism) -}}{{- end -}}
{{- if gt (int .Values.manager.batchSize) $most -}}
{{- fail (printf "manager.batchSize %d is larger than the most that may run at once (%d): a batch's members run side by side, one per unit of parallelism, so it would be cut to %d; raise manager.parallelism (or autoscaling.maxParallelism) or lower manager.batchSize" (int .Values.manager.batchSize) $most $most) -}}
{{- end -}}
{{- end -}}
