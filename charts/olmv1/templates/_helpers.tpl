{{/*
The namespace olmv1 runs in.
*/}}
{{- define "olmv1.namespace" -}}
{{ .Values.namespace.name }}
{{- end -}}

{{/*
The image reference: repository@digest when a digest is set, else repository:tag.
*/}}
{{- define "olmv1.image" -}}
{{- $image := .Values.image -}}
{{- if not $image.repository -}}
{{- fail "image.repository is required: olmv1's image, e.g. --set image.repository=registry.example.com/olm/olmv1 --set image.digest=sha256:..." -}}
{{- end -}}
{{- if $image.digest -}}
{{ $image.repository }}@{{ $image.digest }}
{{- else if $image.tag -}}
{{ $image.repository }}:{{ $image.tag }}
{{- else -}}
{{- fail "image.digest (preferred) or image.tag is required" -}}
{{- end -}}
{{- end -}}

{{/*
"true" when the OpenShift preset is on.
*/}}
{{- define "olmv1.openshift" -}}
{{- if .Values.openshift.enabled }}true{{ end -}}
{{- end -}}

{{/*
Who provides bundles' webhook certificates; the controller's default (cert-manager) renders no flag.
*/}}
{{- define "olmv1.webhookProvider" -}}
{{- .Values.webhookProvider | default (ternary "openshift-service-ca" "cert-manager" .Values.openshift.enabled) -}}
{{- end -}}

{{/*
The global pull secret (NAMESPACE/NAME), or nothing.
*/}}
{{- define "olmv1.globalPullSecret" -}}
{{- .Values.globalPullSecret | default (ternary "openshift-config/pull-secret" "" .Values.openshift.enabled) -}}
{{- end -}}

{{/*
"true" when monitoring object KIND (serviceMonitor or prometheusRule, checked as API
monitoring.coreos.com/v1/ServiceMonitor or .../PrometheusRule) is created.
*/}}
{{- define "olmv1.monitoring" -}}
{{- $root := index . 0 -}}
{{- $key := index . 1 -}}
{{- $kind := index . 2 -}}
{{- $enabled := index $root.Values.metrics $key "enabled" -}}
{{- if eq (toString $enabled) "auto" -}}
{{- if or $root.Values.openshift.enabled ($root.Capabilities.APIVersions.Has (printf "monitoring.coreos.com/v1/%s" $kind)) }}true{{ end -}}
{{- else if $enabled }}true{{ end -}}
{{- end -}}

{{/*
The namespace of the Prometheus ServiceAccount that scrapes olmv1.
*/}}
{{- define "olmv1.prometheusNamespace" -}}
{{- .Values.metrics.prometheus.serviceAccount.namespace | default (ternary "openshift-monitoring" "monitoring" .Values.openshift.enabled) -}}
{{- end -}}

{{/*
Arguments both components take from the values: the global pull secret and the TLS profile.
*/}}
{{- define "olmv1.commonArgs" -}}
{{- with include "olmv1.globalPullSecret" . }}
- --global-pull-secret={{ . }}
{{- end }}
{{- with .Values.tls }}
{{- if ne .profile "intermediate" }}
- --tls-profile={{ .profile }}
{{- end }}
{{- if eq .profile "custom" }}
{{- with .custom.minVersion }}
- --tls-custom-version={{ . }}
{{- end }}
{{- with .custom.ciphers }}
- --tls-custom-ciphers={{ join "," . }}
{{- end }}
{{- with .custom.curves }}
- --tls-custom-curves={{ join "," . }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
Environment both components take from the values: the egress proxy and the log level.
*/}}
{{- define "olmv1.commonEnv" -}}
{{- with .Values.proxy.httpProxy }}
- name: HTTP_PROXY
  value: {{ . | quote }}
{{- end }}
{{- with .Values.proxy.httpsProxy }}
- name: HTTPS_PROXY
  value: {{ . | quote }}
{{- end }}
{{- with .Values.proxy.noProxy }}
- name: NO_PROXY
  value: {{ . | quote }}
{{- end }}
{{- with .Values.logLevel }}
- name: RUST_LOG
  value: {{ . | quote }}
{{- end }}
{{- end -}}

{{/*
The pod spec fields both Deployments take from the values: scheduling and pull secrets.
*/}}
{{- define "olmv1.podScheduling" -}}
{{- with .Values.image.pullSecrets }}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end -}}
