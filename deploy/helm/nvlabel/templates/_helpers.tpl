{{/* The objects' base name: the release name, with -nvlabel unless it already says nvlabel. */}}
{{- define "nvlabel.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else if contains "nvlabel" .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-nvlabel" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "nvlabel.namespace" -}}
{{- .Values.namespace.name | default .Release.Namespace -}}
{{- end -}}

{{- define "nvlabel.selectorLabels" -}}
app.kubernetes.io/name: nvlabel
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "nvlabel.labels" -}}
{{ include "nvlabel.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/* The workload's name: one per mode, so that a change of mode replaces the DaemonSet and the
     garbage collector removes the NodeFeature objects the old one owned. */}}
{{- define "nvlabel.workload" -}}
{{- if eq .Values.mode "job" -}}
{{- printf "%s-oneshot" (include "nvlabel.fullname" .) -}}
{{- else -}}
{{- printf "%s-%s" (include "nvlabel.fullname" .) .Values.mode -}}
{{- end -}}
{{- end -}}

{{- define "nvlabel.daemon" -}}
{{- if ne .Values.mode "job" }}true{{ end -}}
{{- end -}}

{{- define "nvlabel.writesNodes" -}}
{{- if or (eq .Values.mode "node") (eq .Values.mode "job") }}true{{ end -}}
{{- end -}}

{{/* Whether the workload reports GPU health (validated in nvlabel.validate). */}}
{{- define "nvlabel.health" -}}
{{- if and .Values.health.enabled (has .Values.mode (list "node" "nfd-nodefeature")) }}true{{ end -}}
{{- end -}}

{{/* --device-discovery-strategy; a value removed with null is the binary's default, auto. */}}
{{- define "nvlabel.strategy" -}}
{{- .Values.deviceDiscoveryStrategy | default "auto" -}}
{{- end -}}

{{/* Whether nvlabel reads this node's ResourceSlices: --allocation-mode auto decides by them,
and health in dra mode taints their devices. */}}
{{- define "nvlabel.readsSlices" -}}
{{- if or (eq .Values.allocationMode "auto") (and (eq .Values.allocationMode "dra") (include "nvlabel.health" .)) }}true{{ end -}}
{{- end -}}

{{/* Whether GPU faults become DRA device taints (DeviceTaintRules). */}}
{{- define "nvlabel.taintsDevices" -}}
{{- if and (include "nvlabel.health" .) (ne .Values.allocationMode "device-plugin") }}true{{ end -}}
{{- end -}}

{{/* The ConfigMap mounted as --config-dir, if any. */}}
{{- define "nvlabel.configMap" -}}
{{- if .Values.config.name -}}
{{- .Values.config.name -}}
{{- else if .Values.config.map -}}
{{- printf "%s-configs" (include "nvlabel.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "nvlabel.serviceAccount" -}}
{{- include "nvlabel.fullname" . -}}
{{- end -}}

{{/* The DaemonSet's required node affinity: one term per GPU-node label (any admits a node),
each also needing the arch and, with gpuOperator.respectClientPause, the GPU Operator's
nvidia.com/gpu.deploy.client absent or true. Terms are ORed and a term's expressions ANDed, and
no operator says "absent or true" (NotIn also admits every other value), so each GPU-node term
comes twice: with DoesNotExist and with In [true]. */}}
{{- define "nvlabel.nodeAffinity" -}}
{{- $arch := list -}}
{{- with .Values.gpuNodes.arches -}}
{{- $arch = list (dict "key" "kubernetes.io/arch" "operator" "In" "values" .) -}}
{{- end -}}
{{- $pauses := list (list) -}}
{{- if .Values.gpuOperator.respectClientPause -}}
{{- $key := "nvidia.com/gpu.deploy.client" -}}
{{- $pauses = list (list (dict "key" $key "operator" "DoesNotExist")) (list (dict "key" $key "operator" "In" "values" (list "true"))) -}}
{{- end -}}
{{- $labels := .Values.gpuNodes.labels | default (list dict) -}}
{{- $terms := list -}}
{{- range $label := $labels -}}
{{- range $pause := $pauses -}}
{{- $exprs := list -}}
{{- if $label -}}
{{- $exprs = list (dict "key" $label.key "operator" "In" "values" (list $label.value)) -}}
{{- end -}}
{{- $exprs = concat $exprs $pause $arch -}}
{{- if $exprs -}}
{{- $terms = append $terms (dict "matchExpressions" $exprs) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- with $terms -}}
requiredDuringSchedulingIgnoredDuringExecution:
  nodeSelectorTerms:
    {{- toYaml . | nindent 4 }}
{{- end -}}
{{- end -}}

{{/* The pod's supplementary groups: the list given, else video (GID 44 on L4T and Ubuntu) for
tegra, the group of the integrated GPU's device nodes; a YAML list. */}}
{{- define "nvlabel.supplementalGroups" -}}
{{- if kindIs "slice" .Values.supplementalGroups -}}
{{- toYaml .Values.supplementalGroups -}}
{{- else if eq (include "nvlabel.strategy" .) "tegra" -}}
{{- toYaml (list 44) -}}
{{- else -}}
[]
{{- end -}}
{{- end -}}

{{/* The pod: shared by the DaemonSet and the Job. */}}
{{- define "nvlabel.image" -}}
{{- printf "%s%s" .Values.image.repository (ternary (printf "@%s" .Values.image.digest) (printf ":%s" (.Values.image.tag | default .Chart.AppVersion)) (ne .Values.image.digest "")) -}}
{{- end }}

{{- define "nvlabel.podSpec" -}}
{{- $fileMode := eq .Values.mode "nfd-file" -}}
{{- $configMap := include "nvlabel.configMap" . -}}
serviceAccountName: {{ include "nvlabel.serviceAccount" . }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.runtimeClassName }}
runtimeClassName: {{ . }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
securityContext:
  {{- if $fileMode }}
  # Only UID 0 can write the root-owned features.d NFD creates; every capability is dropped.
  runAsNonRoot: false
  runAsUser: 0
  runAsGroup: 0
  {{- else }}
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  {{- end }}
  seccompProfile:
    type: RuntimeDefault
  {{- with include "nvlabel.supplementalGroups" . | fromYamlArray }}
  # The groups of the GPU's device nodes (on Jetson, IGX and Thor usually video, mode 0660).
  supplementalGroups: {{ toJson . }}
  {{- end }}
{{- if eq .Values.mode "job" }}
nodeName: {{ .Values.job.nodeName }}
restartPolicy: OnFailure
{{- else if hasKey .Values "affinity" }}
{{- /* affinity=null (the key removed) drops it, as before the chart built it. */ -}}
{{- $affinity := deepCopy (.Values.affinity | default dict) -}}
{{- if not $affinity.nodeAffinity -}}
{{- with include "nvlabel.nodeAffinity" . -}}
{{- $_ := set $affinity "nodeAffinity" (fromYaml .) -}}
{{- end -}}
{{- end }}
{{- with $affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
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
containers:
  - name: nvlabel
    image: {{ include "nvlabel.image" . }}
    imagePullPolicy: {{ .Values.image.pullPolicy }}
    args:
      {{- if eq .Values.mode "job" }}
      - --oneshot
      {{- else }}
      - --metrics-addr=:{{ .Values.metrics.port }}
      - --sleep-interval={{ .Values.sleepInterval }}
      {{- end }}
      {{- if $configMap }}
      - --config-dir=/etc/nvlabel/configs
      {{- with .Values.config.default }}
      - --config-default={{ . }}
      {{- end }}
      {{- end }}
      {{- with .Values.migStrategy }}
      - --mig-strategy={{ . }}
      {{- end }}
      {{- if not .Values.failOnInitError }}
      - --fail-on-init-error=false
      {{- end }}
      {{- if ne (include "nvlabel.strategy" .) "auto" }}
      - --device-discovery-strategy={{ include "nvlabel.strategy" . }}
      {{- end }}
      {{- with .Values.cudaLibrary }}
      - --cuda-library={{ . }}
      {{- end }}
      {{- if .Values.noTimestamp }}
      - --no-timestamp
      {{- end }}
      {{- if .Values.extendedLabels }}
      - --extended-labels
      {{- end }}
      {{- if ne .Values.allocationMode "device-plugin" }}
      - --allocation-mode={{ .Values.allocationMode }}
      {{- end }}
      {{- if include "nvlabel.health" . }}
      - --health
      - --health-condition-type={{ .Values.health.conditionType }}
      # This release's own field manager for health, so another release's uninstall leaves it be.
      - --instance={{ include "nvlabel.serviceAccount" . }}
      {{- if kindIs "slice" .Values.health.ignoreXids }}
      - --health-ignore-xids={{ join "," .Values.health.ignoreXids }}
      {{- end }}
      {{- if kindIs "slice" .Values.health.fatalXids }}
      - --health-fatal-xids={{ join "," .Values.health.fatalXids }}
      {{- end }}
      {{- if kindIs "slice" .Values.health.xidThresholds }}
      - --health-xid-thresholds={{ join "," .Values.health.xidThresholds }}
      {{- end }}
      {{- with .Values.health.expectedGpus }}
      - --health-expected-gpus={{ . }}
      {{- end }}
      {{- with .Values.health.nvmlTimeout }}
      - --health-nvml-timeout={{ . }}
      {{- end }}
      {{- with .Values.health.recoveryHold }}
      - --health-recovery-hold={{ . }}
      {{- end }}
      {{- with .Values.health.bootIdFile }}
      - --boot-id-file={{ . }}
      {{- end }}
      {{- if include "nvlabel.taintsDevices" . }}
      - --health-taint-effect={{ .Values.health.taintEffect }}
      {{- end }}
      {{- end }}
      {{- if eq .Values.mode "nfd-nodefeature" }}
      - --use-node-feature-api=true
      {{- else if $fileMode }}
      - --use-node-feature-api=false
      - --output-file=/etc/kubernetes/node-feature-discovery/features.d/nvlabel
      - --expiry={{ .Values.file.expiry }}
      {{- else }}
      - --sink=node
      {{- end }}
    env:
      - name: NODE_NAME
        valueFrom:
          fieldRef:
            fieldPath: spec.nodeName
      - name: POD_NAME
        valueFrom:
          fieldRef:
            fieldPath: metadata.name
      - name: POD_NAMESPACE
        valueFrom:
          fieldRef:
            fieldPath: metadata.namespace
      {{- if eq (include "nvlabel.strategy" .) "vfio" }}
      # For the NVIDIA container runtime: nothing (a vfio node has no driver to inject).
      - name: NVIDIA_VISIBLE_DEVICES
        value: void
      {{- else if eq (include "nvlabel.strategy" .) "tegra" }}
      # For the NVIDIA container runtime: all GPUs, NVML (utility) and the CUDA driver (compute).
      - name: NVIDIA_VISIBLE_DEVICES
        value: all
      - name: NVIDIA_DRIVER_CAPABILITIES
        value: compute,utility
      {{- else }}
      # For the NVIDIA container runtime: all GPUs, NVML only (the utility capability).
      - name: NVIDIA_VISIBLE_DEVICES
        value: all
      - name: NVIDIA_DRIVER_CAPABILITIES
        value: utility
      {{- end }}
    {{- if ne .Values.mode "job" }}
    ports:
      - name: http
        containerPort: {{ .Values.metrics.port }}
        protocol: TCP
    livenessProbe:
      httpGet:
        path: /healthz
        port: http
      periodSeconds: 30
    readinessProbe:
      httpGet:
        path: /readyz
        port: http
      periodSeconds: 15
    {{- end }}
    resources:
      {{- toYaml .Values.resources | nindent 6 }}
    securityContext:
      runAsNonRoot: {{ not $fileMode }}
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      privileged: false
      capabilities:
        drop: ["ALL"]
    {{- if or $configMap $fileMode }}
    volumeMounts:
      {{- if $configMap }}
      - name: configs
        mountPath: /etc/nvlabel/configs
        readOnly: true
      {{- end }}
      {{- if $fileMode }}
      - name: features-d
        mountPath: /etc/kubernetes/node-feature-discovery/features.d
      {{- end }}
    {{- end }}
{{- if or $configMap $fileMode }}
volumes:
  {{- if $configMap }}
  - name: configs
    configMap:
      name: {{ $configMap }}
      optional: true
  {{- end }}
  {{- if $fileMode }}
  - name: features-d
    hostPath:
      path: {{ .Values.file.hostPath }}
      type: DirectoryOrCreate
  {{- end }}
{{- end }}
{{- end -}}
