{{/* The RayService's name: the values', else the release's. It prefixes
Service names, so it must be a DNS-1035 label of at most 40 characters. */}}
{{- define "gw.name" -}}
{{- $name := .Values.name | default .Release.Name -}}
{{- if or (gt (len $name) 40) (not (regexMatch "^[a-z]([-a-z0-9]*[a-z0-9])?$" $name)) -}}
{{- fail (printf "name: %q must be a DNS-1035 label of at most 40 characters (it prefixes Service names); the release's name is the default, set name to another" $name) -}}
{{- end -}}
{{ $name }}
{{- end }}

{{/* Where every object goes: the values' namespace, else the release's. */}}
{{- define "gw.namespace" -}}
{{ .Values.namespace | default .Release.Namespace }}
{{- end }}

{{/* The labels of every object. */}}
{{- define "gw.labels" -}}
app.kubernetes.io/instance: {{ include "gw.name" . }}
app.kubernetes.io/managed-by: gridweave
app.kubernetes.io/name: rayserve
{{- end }}

{{/* The image, and the Ray version: rayVersion, else the image tag's. */}}
{{- define "gw.image" -}}
{{ .Values.image | default "rayproject/ray:2.54.0-py312" }}
{{- end }}
{{- define "gw.rayVersion" -}}
{{- if .Values.rayVersion -}}
{{ .Values.rayVersion }}
{{- else -}}
{{ regexFind ":[0-9]+\\.[0-9]+\\.[0-9]+" (include "gw.image" .) | trimPrefix ":" }}
{{- end }}
{{- end }}

{{/* wantsGPU: "yes" when a group's resources name nvidia.com/gpu. */}}
{{- define "gw.wantsGPU" -}}
{{- $r := .resources | default dict -}}
{{- if or (hasKey ($r.limits | default dict) "nvidia.com/gpu") (hasKey ($r.requests | default dict) "nvidia.com/gpu") }}yes{{ end -}}
{{- end }}

{{/* tolerations: the group's, and the GPU's when it asks for GPUs and has none for them. */}}
{{- define "gw.tolerations" -}}
{{- $tols := .group.tolerations | default list -}}
{{- $has := false -}}
{{- range $tols }}{{ if eq .key "nvidia.com/gpu" }}{{ $has = true }}{{ end }}{{ end -}}
{{- if and (include "gw.wantsGPU" .group) (not $has) -}}
{{- $tols = append $tols (dict "key" "nvidia.com/gpu" "operator" "Exists" "effect" "NoSchedule") -}}
{{- end -}}
{{- if $tols }}
tolerations:
{{- toYaml $tols | nindent 0 }}
{{- end }}
{{- end }}

{{/* caInit, caVolumes, caMounts, caEnv: the CA bundle's parts, when orgCABundle.configMapName is set. */}}
{{- define "gw.caInit" -}}
{{- $ca := .Values.orgCABundle | default dict -}}
{{- if $ca.configMapName }}
initContainers:
- name: build-ca-bundle
  image: {{ $ca.image | default "alpine:3.20" }}
  command: [sh, -c, {{ printf "cat /etc/ssl/certs/ca-certificates.crt /org-ca/%s > /shared/ca-bundle.crt" ($ca.key | default "ca.crt") | quote }}]
  resources:
    requests: {cpu: 10m, memory: 16Mi}
    limits: {cpu: 100m, memory: 64Mi}
  securityContext:
    allowPrivilegeEscalation: false
    capabilities: {drop: [ALL]}
    readOnlyRootFilesystem: true
    runAsNonRoot: true
    runAsUser: 65534
    seccompProfile: {type: RuntimeDefault}
  volumeMounts:
  - {name: ca-bundle, mountPath: /shared}
  - {name: org-ca, mountPath: /org-ca, readOnly: true}
volumes:
- name: ca-bundle
  emptyDir: {}
- name: org-ca
  configMap: {name: {{ $ca.configMapName }}}
{{- end }}
{{- end }}
{{- define "gw.caContainer" -}}
{{- $ca := .Values.orgCABundle | default dict -}}
{{- if $ca.configMapName }}
env:
- {name: SSL_CERT_FILE, value: /shared/ca-bundle.crt}
- {name: REQUESTS_CA_BUNDLE, value: /shared/ca-bundle.crt}
- {name: CURL_CA_BUNDLE, value: /shared/ca-bundle.crt}
- {name: GIT_SSL_CAINFO, value: /shared/ca-bundle.crt}
volumeMounts:
- {name: ca-bundle, mountPath: /shared, readOnly: true}
{{- end }}
{{- end }}
