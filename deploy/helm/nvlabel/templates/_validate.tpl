{{/* The values nvlabel would refuse, refused at install, each naming the value: what the schema
cannot express. tests/local/chart_refusals.rs runs the binary on each value the chart renders or refuses,
so the two refuse the same. */}}
{{- define "nvlabel.validate" -}}
{{- if and (eq .Values.mode "job") (not .Values.job.nodeName) -}}
{{- fail "job.nodeName: mode=job labels one node once; set job.nodeName to that node's name" -}}
{{- end -}}
{{- $config := .Values.config -}}
{{- if and $config.default $config.map (not $config.name) (not (hasKey $config.map $config.default)) -}}
{{- fail (printf "config.default: %q is not a key of config.map (%s); nodes without the nvidia.com/device-plugin.config label would get no config" $config.default (keys $config.map | sortAlpha | join ", ")) -}}
{{- end -}}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.service.enabled) -}}
{{- fail "metrics.serviceMonitor.enabled: the ServiceMonitor scrapes the metrics Service; set metrics.service.enabled=true too" -}}
{{- end -}}
{{- /* Health writes a Node condition through the API: the modes that publish through it. A
     one-shot Job cannot keep a fault until the next boot, and nfd-file has no API access. */ -}}
{{- if and .Values.health.enabled (not (include "nvlabel.health" .)) -}}
{{- fail (printf "health.enabled: the GPU health Node condition needs a daemon with API access; mode=%s cannot publish it, use mode=node or mode=nfd-nodefeature" .Values.mode) -}}
{{- end -}}
{{- /* The kubelet owns these conditions: a schema `not` would only say "'not' failed". */ -}}
{{- if has .Values.health.conditionType (list "Ready" "MemoryPressure" "DiskPressure" "PIDPressure" "NetworkUnavailable") -}}
{{- fail (printf "health.conditionType: %s is a condition the kubelet owns; nvlabel would fight it for the Node's status. Use a type of its own, such as GPUHealthy" .Values.health.conditionType) -}}
{{- end -}}
{{- /* A taint effect only acts where health taints DRA devices; otherwise it would vanish silently. */ -}}
{{- if and (ne .Values.health.taintEffect "NoSchedule") (not (include "nvlabel.taintsDevices" .)) -}}
{{- fail (printf "health.taintEffect: %s has no effect without health.enabled=true in mode=node or nfd-nodefeature with allocationMode dra or auto (only there are a faulty GPU's DRA devices tainted); leave it out" .Values.health.taintEffect) -}}
{{- end -}}
{{- /* GPUs bound to vfio-pci have no driver to read health from; nvlabel refuses --health there. */ -}}
{{- if and .Values.health.enabled (eq (include "nvlabel.strategy" .) "vfio") -}}
{{- fail "health.enabled: with deviceDiscoveryStrategy=vfio the GPUs are bound to vfio-pci, with no driver to read their health from (nvlabel refuses --health there); set health.enabled=false" -}}
{{- end -}}
{{- /* nvlabel refuses a flag given where it has no effect: --mig-strategy in the DRA profile. */ -}}
{{- if and .Values.migStrategy (eq .Values.allocationMode "dra") -}}
{{- fail (printf "migStrategy: %s has no effect with allocationMode=dra, which publishes physical facts only (no MIG-strategy labels; nvlabel refuses --mig-strategy there); leave it empty" .Values.migStrategy) -}}
{{- end -}}
{{- /* The bounds of durations nvlabel checks after parsing them (the schema checks the syntax). */ -}}
{{- with .Values.health.nvmlTimeout -}}
{{- if lt (float64 (include "nvlabel.durationNs" .)) 1e9 -}}
{{- fail (printf "health.nvmlTimeout: %s is shorter than 1s; nvlabel refuses it (--health-nvml-timeout): use a duration of at least 1s, such as 30s or 2m" .) -}}
{{- end -}}
{{- end -}}
{{- if and (eq .Values.mode "nfd-file") (ne (toString .Values.file.expiry) "") -}}
{{- if eq (float64 (include "nvlabel.durationNs" .Values.file.expiry)) 0.0 -}}
{{- fail (printf "file.expiry: %v is zero; nvlabel refuses it (--expiry): use a positive duration such as 1h, or empty for labels that never expire" .Values.file.expiry) -}}
{{- end -}}
{{- end -}}
{{- /* An Xid cannot be both ignored and fatal (nvlabel refuses the pair). */ -}}
{{- $both := list -}}
{{- range (.Values.health.ignoreXids | default list) -}}
{{- if has . ($.Values.health.fatalXids | default list) -}}
{{- $both = append $both (toString .) -}}
{{- end -}}
{{- end -}}
{{- with $both -}}
{{- fail (printf "health.ignoreXids, health.fatalXids: in both lists: %s; nvlabel refuses an Xid both ignored and fatal, keep each in one list" (join ", " . )) -}}
{{- end -}}
{{- /* Thresholds: a positive window, one per Xid, and none for an Xid ignored or fatal (nvlabel
     refuses each; the schema has checked the form and the count). */ -}}
{{- $listed := dict -}}
{{- range (.Values.health.ignoreXids | default list) -}}{{- $_ := set $listed (toString (int64 .)) "ignoreXids" -}}{{- end -}}
{{- range (.Values.health.fatalXids | default list) -}}{{- $_ := set $listed (toString (int64 .)) "fatalXids" -}}{{- end -}}
{{- $counted := dict -}}
{{- range (.Values.health.xidThresholds | default list) -}}
{{- $xid := toString (atoi (regexFind "^[0-9]+" .)) -}}
{{- $window := regexReplaceAll "^[^/]*/" . "" -}}
{{- if eq (float64 (include "nvlabel.durationNs" $window)) 0.0 -}}
{{- fail (printf "health.xidThresholds: %s has a zero window; nvlabel refuses it (--health-xid-thresholds): use a positive duration such as 1m" .) -}}
{{- end -}}
{{- if hasKey $counted $xid -}}
{{- fail (printf "health.xidThresholds: Xid %s has two thresholds (%s, %s); nvlabel refuses it (--health-xid-thresholds): give each Xid one" $xid (get $counted $xid) .) -}}
{{- end -}}
{{- $_ := set $counted $xid . -}}
{{- if hasKey $listed $xid -}}
{{- fail (printf "health.xidThresholds: Xid %s is in health.%s too; nvlabel refuses an Xid with a threshold that is ignored or fatal (--health-xid-thresholds), keep it in one" $xid (get $listed $xid)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A duration's length in nanoseconds, summed as nvlabel sums it (crate::duration): a bare
number is seconds, else Go's terms (1h30m, 1.5s, 500ms). The schema has checked the syntax. */}}
{{- define "nvlabel.durationNs" -}}
{{- $scale := dict "ns" 1.0 "us" 1e3 "µs" 1e3 "μs" 1e3 "ms" 1e6 "s" 1e9 "m" 6e10 "h" 3.6e12 -}}
{{- $text := toString . | trimPrefix "+" -}}
{{- $total := 0.0 -}}
{{- if regexMatch "^[0-9.]+$" $text -}}
{{- $total = mulf (float64 $text) 1e9 -}}
{{- else -}}
{{- range regexFindAll "[0-9.]+[^0-9.]+" $text -1 -}}
{{- $num := regexFind "^[0-9.]+" . -}}
{{- $total = addf $total (mulf (float64 $num) (get $scale (trimPrefix $num .))) -}}
{{- end -}}
{{- end -}}
{{- $total -}}
{{- end -}}
