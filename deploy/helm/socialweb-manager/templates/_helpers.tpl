{{/* The release's full name, capped at 63 characters (a label value). */}}
{{- define "socialweb-manager.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels every object of the release carries. */}}
{{- define "socialweb-manager.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{ include "socialweb-manager.selectorLabels" . }}
{{- end -}}

{{/* Labels that select the manager's pods (never change them on upgrade). */}}
{{- define "socialweb-manager.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "socialweb-manager.serviceAccountName" -}}
{{- default (include "socialweb-manager.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* The contract namespace: the value, else the release namespace. */}}
{{- define "socialweb-manager.contractNamespace" -}}
{{- default .Release.Namespace .Values.contractNamespace -}}
{{- end -}}

{{- define "socialweb-manager.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
