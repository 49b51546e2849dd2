{{/* Names, labels and the pieces every component shares. */}}

{{- define "kubegpu.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-scoped prefix of every object name: the release name, or release-chart when they differ. */}}
{{- define "kubegpu.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "kubegpu.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "kubegpu.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component: call with (dict "root" $ "component" "device-plugin"). */}}
{{- define "kubegpu.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kubegpu.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "kubegpu.componentLabels" -}}
{{ include "kubegpu.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "kubegpu.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* The scheduling constraints of the node DaemonSets. */}}
{{- define "kubegpu.nodePlacement" -}}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.runtimeClassName }}
runtimeClassName: {{ . }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Least privilege for a container that needs root only as the owner of host directories. */}}
{{- define "kubegpu.restrictedRoot" -}}
runAsUser: 0
runAsNonRoot: false
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}

{{/* Least privilege for a container that needs no root at all. */}}
{{- define "kubegpu.restrictedNonRoot" -}}
runAsUser: 65532
runAsGroup: 65532
runAsNonRoot: true
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Whether any named plugin config shares GPUs with MPS (then the MPS daemon runs). */}}
{{- define "kubegpu.mpsConfigured" -}}
{{- $mps := false -}}
{{- range $name, $text := .Values.config.map -}}
{{- $cfg := fromYaml $text -}}
{{- if and (hasKey $cfg "sharing") (kindIs "map" $cfg.sharing) (hasKey $cfg.sharing "mps") -}}
{{- $mps = true -}}
{{- end -}}
{{- end -}}
{{- if kindIs "bool" .Values.mps.enabled -}}
{{- $mps = .Values.mps.enabled -}}
{{- end -}}
{{- ternary "true" "" $mps -}}
{{- end -}}

{{/* NVIDIA's flags as the plugin's env vars: only values that are set (null = the program's default). */}}
{{- define "kubegpu.pluginEnv" -}}
{{- $v := .Values -}}
{{- with $v.migStrategy }}
- name: MIG_STRATEGY
  value: {{ . | quote }}
{{- end }}
{{- if kindIs "bool" $v.failOnInitError }}
- name: FAIL_ON_INIT_ERROR
  value: {{ $v.failOnInitError | quote }}
{{- end }}
{{- if kindIs "bool" $v.compatWithCPUManager }}
- name: PASS_DEVICE_SPECS
  value: {{ $v.compatWithCPUManager | quote }}
{{- end }}
{{- with $v.deviceListStrategy }}
- name: DEVICE_LIST_STRATEGY
  value: {{ . | quote }}
{{- end }}
{{- with $v.deviceIDStrategy }}
- name: DEVICE_ID_STRATEGY
  value: {{ . | quote }}
{{- end }}
- name: NVIDIA_DRIVER_ROOT
  value: {{ $v.nvidiaDriverRoot | quote }}
{{- if kindIs "bool" $v.gdrcopyEnabled }}
- name: GDRCOPY_ENABLED
  value: {{ $v.gdrcopyEnabled | quote }}
{{- end }}
{{- if kindIs "bool" $v.gdsEnabled }}
- name: GDS_ENABLED
  value: {{ $v.gdsEnabled | quote }}
{{- end }}
{{- if kindIs "bool" $v.mofedEnabled }}
- name: MOFED_ENABLED
  value: {{ $v.mofedEnabled | quote }}
{{- end }}
{{- with $v.deviceDiscoveryStrategy }}
- name: DEVICE_DISCOVERY_STRATEGY
  value: {{ . | quote }}
{{- end }}
{{- end -}}

{{/* The config-manager's env (NVIDIA's names); call with (dict "root" $ "signal" true/false). */}}
{{- define "kubegpu.configManagerEnv" -}}
- name: ONESHOT
  value: {{ ternary "false" "true" .signal | quote }}
- name: NODE_NAME
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
- name: NODE_LABEL
  value: nvidia.com/device-plugin.config
- name: CONFIG_FILE_SRCDIR
  value: /available-configs
- name: CONFIG_FILE_DST
  value: /config/config.yaml
- name: DEFAULT_CONFIG
  value: {{ .root.Values.config.default | quote }}
- name: FALLBACK_STRATEGIES
  value: {{ join "," .root.Values.config.fallbackStrategies | quote }}
- name: SEND_SIGNAL
  value: {{ .signal | quote }}
- name: SIGNAL
  value: "1"
- name: PROCESS_TO_SIGNAL
  value: nvidia-device-plugin
{{- end -}}
