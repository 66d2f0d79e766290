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
{{- /* Last, the sharing configs, their flags against the chart's values checked above. */ -}}
{{- include "nvlabel.validateConfigs" . -}}
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

{{/* config.map: each value read as nvlabel reads the config file a node's key selects
(src/config/file.rs, file/resources.rs, file/fields.rs, the flag rows of src/config/rows.rs and
the checks of src/config/resolve.rs), refused as nvlabel refuses it: a node whose key names it
would get pods that exit 2, and on a reload nvlabel keeps its last good config. Each message names
the key, the field and the value, in nvlabel's words. Helm's fromYaml reads YAML 1.1 into JSON
(every number a float, the last of two equal keys, the first document), so what it loses is read
from the text: control characters, a second document, a key given twice (in block mappings and
one-line flow mappings), a fraction for replicas. */}}
{{- define "nvlabel.validateConfigs" -}}
{{- if and .Values.config.map (not .Values.config.name) -}}
{{- range $key, $text := .Values.config.map -}}
{{- $at := printf "config.map.%s" $key -}}
{{- include "nvlabel.configText" (dict "at" $at "text" (toString $text)) -}}
{{- include "nvlabel.configFile" (dict "at" $at "doc" (fromYaml (toString $text)) "root" $) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* nvlabel.fail: (list at field message). */}}
{{- define "nvlabel.configFail" -}}
{{- fail (printf "%s: %s: %s; nvlabel refuses this config (exit 2 on the nodes it selects)" (index . 0) (index . 1) (index . 2)) -}}
{{- end -}}

{{/* What fromYaml cannot see: (dict at text). */}}
{{- define "nvlabel.configText" -}}
{{- $at := .at -}}{{- with regexFind `[\x00-\x08\x0B\x0C\x0E-\x1F\x7F]` .text -}}{{- include "nvlabel.configFail" (list $at "(top level)" (printf "not a text file (it holds the control character %q); expected YAML or JSON" .)) -}}{{- end -}}
{{- $plain := regexReplaceAll `(?m)^[ \t]*(#.*|---|\.\.\.)?[ \t\r]*$` .text "" | trim -}}
{{- if not $plain -}}{{- include "nvlabel.configFail" (list $at "(top level)" "the config is empty or only comments: nvlabel takes that for defaults at start-up but refuses it on reload (a file being written); write `version: v1` for no sharing") -}}{{- end -}}
{{- if has (regexReplaceAll `\s+#.*$` $plain "") (list "null" "Null" "NULL" "~") -}}{{- include "nvlabel.configFail" (list $at "(top level)" "expected a mapping") -}}{{- end -}}
{{- $content := false -}}{{- $block := -1 -}}{{- $levels := dict -}}
{{- range $n, $line := splitList "\n" (replace "\r" "" .text) -}}
{{- $rest := regexReplaceAll "^ +" $line "" -}}{{- $indent := sub (len $line) (len $rest) -}}
{{- if and (ge $block 0) (or (not (trim $rest)) (gt $indent $block)) -}}
{{- /* the text of a block scalar */ -}}
{{- else -}}
{{- $block = -1 -}}
{{- if or (not (trim $rest)) (hasPrefix "#" $rest) (hasPrefix "%" $rest) -}}
{{- else if regexMatch `^(---|\.\.\.)(\s|$)` $rest -}}
{{- if and $content (hasPrefix "---" $rest) -}}{{- include "nvlabel.configFail" (list $at (printf "line %d" (add1 $n)) "only single YAML document expected but multiple found") -}}{{- end -}}
{{- $levels = dict -}}
{{- else -}}
{{- $content = true -}}
{{- $dash := regexFind `^(-( +|$))+` $rest -}}
{{- range $k := keys $levels -}}{{- if gt (atoi $k) $indent -}}{{- $_ := unset $levels $k -}}{{- end -}}{{- end -}}
{{- $rest = regexReplaceAll `^\?\s+(.*)$` (trimPrefix $dash $rest) "${1}:" -}}{{- $indent = add $indent (len $dash) -}}
{{- with regexFind `^("[^"]*"|'[^']*'|[^\s#'"{\[][^#]*?)\s*:(\s|$)` $rest -}}
{{- $k := regexReplaceAll `\s*:\s*$` . "" | trimAll "\"'" -}}
{{- if not (hasKey $levels (toString $indent)) -}}{{- $_ := set $levels (toString $indent) dict -}}{{- end -}}
{{- $seen := get $levels (toString $indent) -}}
{{- if hasKey $seen $k -}}{{- include "nvlabel.configFail" (list $at (printf "line %d, column %d" (add1 $n) (add1 $indent)) (printf "duplicate mapping key `%s` is not allowed here" $k)) -}}{{- end -}}
{{- $_ := set $seen $k true -}}
{{- if regexMatch `:\s+[|>][-+0-9]*\s*(#.*)?$` $rest -}}{{- $block = $indent -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $flow := regexReplaceAll `(?m)(^|\s)#.*$` .text "" -}}
{{- range until 4 -}}
{{- range regexFindAll `\{[^{}\[\]]*\}` $flow -1 -}}
{{- $seen := dict -}}
{{- range splitList "," (trimSuffix "}" (trimPrefix "{" .)) -}}
{{- with regexFind `^\s*("[^"]*"|'[^']*'|[^\s:][^:]*?)\s*:(\s|$)` . -}}
{{- $k := regexReplaceAll `\s*:\s*$` (trim .) "" | trimAll "\"'" -}}
{{- if hasKey $seen $k -}}{{- include "nvlabel.configFail" (list $at "(a flow mapping)" (printf "duplicate mapping key `%s` is not allowed here" $k)) -}}{{- end -}}
{{- $_ := set $seen $k true -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $flow = regexReplaceAll `\{[^{}\[\]]*\}|\[[^{}\[\]]*\]` $flow "0" -}}
{{- end -}}
{{- /* fromYaml reads 2.0, 1e3, 010 and !!float 3 as whole numbers; nvlabel takes no float. */ -}}
{{- range regexFindAll `(^|[^\w-])replicas["']?\s*:[ \t]*[^\s,}\]#]+` .text -1 -}}
{{- $r := regexReplaceAll `^.*?replicas["']?\s*:\s*` . "" -}}
{{- if regexMatch `^([-+]?(\.[0-9]|[0-9][0-9_]*\.|[0-9][0-9_]*[eE]|0[0-9])|!!float)` $r -}}{{- include "nvlabel.configFail" (list $at "replicas" (printf "expected a whole number, got %s" $r)) -}}{{- end -}}
{{- end -}}
{{- end -}}

{{/* The parsed file: (dict at doc root). */}}
{{- define "nvlabel.configFile" -}}
{{- $at := .at -}}{{- $doc := .doc -}}
{{- if and (hasKey $doc "Error") (eq (len $doc) 1) -}}
{{- $e := toString $doc.Error -}}
{{- if contains "cannot unmarshal" $e -}}{{- include "nvlabel.configFail" (list $at "(top level)" "expected a mapping") -}}{{- end -}}
{{- include "nvlabel.configFail" (list $at "(top level)" (printf "unable to parse it as YAML: %s" (regexReplaceAll `^error converting YAML to JSON: (yaml: )?` $e ""))) -}}
{{- end -}}
{{- include "nvlabel.configKeys" (list $at "" $doc (list "version" "flags" "resources" "sharing" "imex")) -}}
{{- $version := index $doc "version" -}}
{{- if not (or (kindIs "invalid" $version) (has $version (list "" "v1"))) -}}{{- include "nvlabel.configFail" (list $at "version" (printf "unknown version: %s" (ternary $version (toJson $version) (kindIs "string" $version)))) -}}{{- end -}}
{{- $res := index $doc "resources" -}}
{{- if not (kindIs "invalid" $res) -}}
{{- if not (kindIs "map" $res) -}}{{- include "nvlabel.configFail" (list $at "resources" "expected a mapping") -}}{{- end -}}
{{- include "nvlabel.configKeys" (list $at "resources" $res (list "gpus" "mig")) -}}
{{- range $kind := list "gpus" "mig" -}}
{{- $list := index $res $kind -}}
{{- if not (kindIs "invalid" $list) -}}
{{- if not (kindIs "slice" $list) -}}{{- include "nvlabel.configFail" (list $at (printf "resources.%s" $kind) "expected a list") -}}{{- end -}}
{{- range $i, $e := $list -}}
{{- range $f := list "pattern" "name" -}}
{{- if not (and (kindIs "map" $e) (kindIs "string" (index $e $f)) (index $e $f)) -}}{{- include "nvlabel.configFail" (list $at (printf "resources.%s[%d]" $kind $i) (printf "resources must have a '%s' field set" $f)) -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $sharing := index $doc "sharing" -}}
{{- if not (kindIs "invalid" $sharing) -}}
{{- if not (kindIs "map" $sharing) -}}{{- include "nvlabel.configFail" (list $at "sharing" "expected a mapping") -}}{{- end -}}
{{- include "nvlabel.configKeys" (list $at "sharing" $sharing (list "timeSlicing" "mps")) -}}
{{- /* A null timeSlicing is decoded and fails, as in GFD; a null mps leaves MPS unset. */ -}}
{{- if hasKey $sharing "timeSlicing" -}}{{- include "nvlabel.configShared" (list $at "sharing.timeSlicing" $sharing.timeSlicing) -}}{{- end -}}
{{- if not (kindIs "invalid" (index $sharing "mps")) -}}{{- include "nvlabel.configShared" (list $at "sharing.mps" $sharing.mps) -}}{{- end -}}
{{- end -}}
{{- include "nvlabel.configFlags" . -}}
{{- end -}}

{{/* Unknown keys: nvlabel refuses them in sharing (a misspelt key would unshare the node); at
the top and in resources, where the device plugin has no other keys either, it ignores them with
a warning, and the chart refuses the misspelling. flags are left to nvlabel's warning: the device
plugin adds flags of its own. (list at path map known) */}}
{{- define "nvlabel.configKeys" -}}
{{- $at := index . 0 -}}{{- $path := index . 1 -}}{{- $known := index . 3 -}}
{{- range $k := keys (index . 2) | sortAlpha -}}
{{- if not (has $k $known) -}}{{- include "nvlabel.configFail" (list $at (ternary $k (printf "%s.%s" $path $k) (not $path)) (printf "unknown field, refused: a misspelt %s would %s (known here: %s)" (ternary "sharing key" "key" (hasPrefix "sharing" $path)) (ternary "unshare the node" "be ignored" (hasPrefix "sharing" $path)) (join ", " $known))) -}}{{- end -}}
{{- end -}}
{{- end -}}

{{/* A boolean field as nvlabel reads it: YAML's or Go's spellings. (list at field value) */}}
{{- define "nvlabel.configBool" -}}
{{- $v := index . 2 -}}
{{- if not (or (kindIs "invalid" $v) (kindIs "bool" $v) (include "nvlabel.yamlBool" $v)) -}}{{- include "nvlabel.configFail" (list (index . 0) (index . 1) (printf "expected a boolean, got %s" (toJson $v))) -}}{{- end -}}
{{- end -}}

{{/* "true" or "false" for a boolean or a spelling of one, else empty. */}}
{{- define "nvlabel.yamlBool" -}}
{{- if and (or (kindIs "bool" .) (kindIs "string" .)) (has (toString .) (list "true" "True" "TRUE" "yes" "Yes" "YES" "on" "On" "ON" "y" "Y")) -}}true{{- end -}}
{{- if and (or (kindIs "bool" .) (kindIs "string" .)) (has (toString .) (list "false" "False" "FALSE" "no" "No" "NO" "off" "Off" "OFF" "n" "N")) -}}false{{- end -}}
{{- end -}}

{{/* sharing.timeSlicing or sharing.mps: (list at path block). */}}
{{- define "nvlabel.configShared" -}}
{{- $at := index . 0 -}}{{- $p := index . 1 -}}{{- $v := index . 2 -}}
{{- if kindIs "invalid" $v -}}{{- include "nvlabel.configFail" (list $at $p "no resources specified") -}}{{- end -}}
{{- if not (kindIs "map" $v) -}}{{- include "nvlabel.configFail" (list $at $p "expected a mapping") -}}{{- end -}}
{{- include "nvlabel.configKeys" (list $at $p $v (list "renameByDefault" "failRequestsGreaterThanOne" "resources")) -}}
{{- range $k := list "renameByDefault" "failRequestsGreaterThanOne" -}}
{{- include "nvlabel.configBool" (list $at (printf "%s.%s" $p $k) (index $v $k)) -}}
{{- end -}}
{{- $list := index $v "resources" -}}
{{- if or (kindIs "invalid" $list) (and (kindIs "slice" $list) (empty $list)) -}}{{- include "nvlabel.configFail" (list $at $p "no resources specified") -}}{{- end -}}
{{- if not (kindIs "slice" $list) -}}{{- include "nvlabel.configFail" (list $at (printf "%s.resources" $p) "expected a list") -}}{{- end -}}
{{- range $i, $e := $list -}}
{{- $here := printf "%s.resources[%d]" $p $i -}}
{{- if not (kindIs "map" $e) -}}{{- include "nvlabel.configFail" (list $at $here "expected a mapping") -}}{{- end -}}
{{- include "nvlabel.configKeys" (list $at $here $e (list "name" "devices" "replicas" "rename")) -}}
{{- $name := index $e "name" -}}
{{- if kindIs "invalid" $name -}}{{- include "nvlabel.configFail" (list $at $here "no resource name specified") -}}{{- end -}}
{{- if not (kindIs "string" $name) -}}{{- include "nvlabel.configFail" (list $at (printf "%s.name" $here) (printf "expected a string, got %s" (toJson $name))) -}}{{- end -}}
{{- if not $name -}}{{- include "nvlabel.configFail" (list $at (printf "%s.name" $here) "no resource name specified") -}}{{- end -}}
{{- $full := include "nvlabel.resourceName" (list $at (printf "%s.name" $here) $name) -}}
{{- if not (regexMatch `^nvidia\.com/(gpu|mig-([0-9]+c\.)?[0-9]+g\.[0-9]+gb(-me)?)$` $full) -}}{{- include "nvlabel.configFail" (list $at (printf "%s.name" $here) (printf "%q is no resource an NVIDIA GPU has: use nvidia.com/gpu, or nvidia.com/mig-<profile> such as nvidia.com/mig-1g.5gb" $full)) -}}{{- end -}}
{{- if hasKey $e "devices" -}}{{- include "nvlabel.configDevices" (list $at (printf "%s.devices" $here) $e.devices) -}}{{- end -}}
{{- $r := index $e "replicas" -}}{{- $field := printf "%s.replicas" $here -}}
{{- if kindIs "invalid" $r -}}{{- include "nvlabel.configFail" (list $at $here "no replicas specified") -}}{{- end -}}
{{- if not (and (kindIs "float64" $r) (eq (floor $r) $r) (lt $r 9.2e18)) -}}{{- include "nvlabel.configFail" (list $at $field (printf "expected a whole number, got %s" (toJson $r))) -}}{{- end -}}
{{- if lt $r 2.0 -}}{{- include "nvlabel.configFail" (list $at $field (printf "number of replicas must be >= 2, got %d" (int64 $r))) -}}{{- end -}}
{{- if gt $r 4294967295.0 -}}{{- include "nvlabel.configFail" (list $at $field (printf "%d is too large" (int64 $r))) -}}{{- end -}}
{{- $rename := index $e "rename" -}}
{{- if not (or (kindIs "invalid" $rename) (kindIs "string" $rename)) -}}{{- include "nvlabel.configFail" (list $at (printf "%s.rename" $here) (printf "expected a string, got %s" (toJson $rename))) -}}{{- end -}}
{{- with $rename -}}{{- $_ := include "nvlabel.resourceName" (list $at (printf "%s.rename" $here) .) -}}{{- end -}}
{{- end -}}
{{- end -}}

{{/* GFD's NewResourceName: nvidia.com/ added, then checked; the full name. (list at field name) */}}
{{- define "nvlabel.resourceName" -}}
{{- $n := index . 2 -}}
{{- $full := ternary $n (printf "nvidia.com/%s" $n) (hasPrefix "nvidia.com/" $n) -}}
{{- if gt (len $full) 63 -}}{{- include "nvlabel.configFail" (list (index . 0) (index . 1) (printf "fully-qualified resource name must be 63 characters or less: %s" $full)) -}}{{- end -}}
{{- if not (regexMatch `^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$` (regexReplaceAll `^[^/]*/` $full "")) -}}{{- include "nvlabel.configFail" (list (index . 0) (index . 1) (printf "incorrect format for resource name '%s': [a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character]" $full)) -}}{{- end -}}
{{- $full -}}
{{- end -}}

{{/* devices: all, a count, or a list of indexes and UUIDs. (list at field value) */}}
{{- define "nvlabel.configDevices" -}}
{{- $at := index . 0 -}}{{- $f := index . 1 -}}{{- $d := index . 2 -}}
{{- $uuid := `[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}` -}}
{{- $id := printf `^([0-9]+|[0-9]+:[0-9]+|GPU-%s|MIG-GPU-%s/[0-9]+/[0-9]+|MIG-%s)$` $uuid $uuid $uuid -}}
{{- if kindIs "string" $d -}}
{{- if ne $d "all" -}}{{- include "nvlabel.configFail" (list $at $f (printf "devices set as '%s' but the only valid string input is 'all'" $d)) -}}{{- end -}}
{{- else if and (kindIs "float64" $d) (eq (floor $d) $d) -}}
{{- if le $d 0.0 -}}{{- include "nvlabel.configFail" (list $at $f (printf "devices set as '%d' but a count of devices must be > 0" (int64 $d))) -}}{{- end -}}
{{- else if kindIs "slice" $d -}}
{{- range $d -}}
{{- if not (or (and (kindIs "float64" .) (eq (floor .) .) (ge . 0.0)) (and (kindIs "string" .) (regexMatch $id .))) -}}{{- include "nvlabel.configFail" (list $at $f (printf "unsupported type for device in devices list: %s" (toJson .))) -}}{{- end -}}
{{- end -}}
{{- else if not (kindIs "invalid" $d) -}}{{- include "nvlabel.configFail" (list $at $f (printf "unrecognized type for devices spec: %s" (toJson $d))) -}}{{- end -}}
{{- end -}}

{{/* flags: each key's type, then each value the command line does not override (the chart's
own flags win over the file's), then the checks across flags. (dict at doc root) */}}
{{- define "nvlabel.configFlags" -}}
{{- $at := .at -}}{{- $v := .root.Values -}}{{- $fl := index .doc "flags" -}}{{- if kindIs "invalid" $fl -}}{{- $fl = dict -}}{{- end -}}
{{- if not (kindIs "map" $fl) -}}{{- include "nvlabel.configFail" (list $at "flags" "expected a mapping") -}}{{- end -}}
{{- $bools := list "failOnInitError" "gdrcopyEnabled" "gdsEnabled" "mofedEnabled" "useNodeFeatureAPI" "extendedLabels" "health" -}}
{{- $texts := list "migStrategy" "mpsRoot" "nvidiaDriverRoot" "nvidiaDevRoot" "deviceDiscoveryStrategy" "allocationMode" "healthConditionType" "healthTaintEffect" "healthExpectedGpus" "healthNvmlTimeout" "healthRecoveryHold" -}}
{{- $gfd := index $fl "gfd" -}}{{- if kindIs "invalid" $gfd -}}{{- $gfd = dict -}}{{- end -}}
{{- if not (kindIs "map" $gfd) -}}{{- include "nvlabel.configFail" (list $at "flags.gfd" "expected a mapping") -}}{{- end -}}
{{- range $k := $bools -}}{{- include "nvlabel.configBool" (list $at (printf "flags.%s" $k) (index $fl $k)) -}}{{- end -}}
{{- range $k := list "oneshot" "noTimestamp" -}}{{- include "nvlabel.configBool" (list $at (printf "flags.gfd.%s" $k) (index $gfd $k)) -}}{{- end -}}
{{- $t := dict -}}
{{- range $k := concat $texts (list "gfd.outputFile" "gfd.machineTypeFile") -}}
{{- $x := ternary (index $gfd (trimPrefix "gfd." $k)) (index $fl $k) (hasPrefix "gfd." $k) -}}
{{- if or (kindIs "map" $x) (kindIs "slice" $x) -}}{{- include "nvlabel.configFail" (list $at (printf "flags.%s" $k) (printf "expected a string, got %s" (toJson $x))) -}}{{- end -}}
{{- if not (kindIs "invalid" $x) -}}{{- $_ := set $t $k (toString $x) -}}{{- end -}}
{{- end -}}
{{- range $k := list "healthIgnoreXids" "healthFatalXids" "healthXidThresholds" -}}
{{- $x := index $fl $k -}}{{- $xids := ne $k "healthXidThresholds" -}}
{{- if kindIs "slice" $x -}}
{{- $items := list -}}
{{- range $i, $e := $x -}}
{{- if and $xids (kindIs "float64" $e) (eq (floor $e) $e) (ge $e 0.0) -}}{{- $items = append $items (printf "%.0f" $e) -}}
{{- else if and (not $xids) (kindIs "string" $e) -}}{{- $items = append $items $e -}}
{{- else -}}{{- include "nvlabel.configFail" (list $at (printf "flags.%s" $k) (printf "item %d of the list is %s, %s" $i (toJson $e) (ternary "not an Xid number; use a list such as [13, 31]" "not text; use a list such as [\"43:3/1m\"]" $xids))) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $t $k (join "," $items) -}}
{{- else if or (kindIs "string" $x) (and $xids (kindIs "float64" $x)) -}}{{- $_ := set $t $k (toString $x) -}}
{{- else if not (kindIs "invalid" $x) -}}{{- include "nvlabel.configFail" (list $at (printf "flags.%s" $k) (printf "expected %s, got %s" (ternary "a list of Xid numbers such as [13, 31]" "a list such as [\"43:3/1m\"] or its text" $xids) (toJson $x))) -}}{{- end -}}
{{- end -}}
{{- $si := index $gfd "sleepInterval" -}}{{- $sit := trim (toString $si) -}}
{{- if kindIs "string" $si -}}
{{- if not (or (eq $sit "infinite") (and (regexMatch `^[0-9.]+$` $sit) (ne $sit "0") (regexMatch `^([0-9]+\.?[0-9]*|\.[0-9]+)$` $sit)) (and (not (regexMatch `^[0-9.]+$` $sit)) (ne (include "nvlabel.goDurationNs" $sit) "x")) (eq $sit "0")) -}}{{- include "nvlabel.configFail" (list $at "flags.gfd.sleepInterval" (printf "invalid duration %q; use a Go duration such as 90s, 1m30s or 1.5h (units ns, us, ms, s, m, h), a number of seconds, or infinite" $si)) -}}{{- end -}}
{{- else if kindIs "float64" $si -}}
{{- if lt $si 0.0 -}}{{- include "nvlabel.configFail" (list $at "flags.gfd.sleepInterval" (printf "invalid duration %v" $si)) -}}{{- end -}}
{{- else if not (kindIs "invalid" $si) -}}{{- include "nvlabel.configFail" (list $at "flags.gfd.sleepInterval" (printf "expected a duration, got %s" (toJson $si))) -}}{{- end -}}
{{- /* The values the chart's own flags do not override, as each flag's row reads them. */ -}}
{{- $health := include "nvlabel.health" .root -}}
{{- $chosen := dict "migStrategy" (list (not $v.migStrategy) "none" "single" "mixed") "allocationMode" (list (eq $v.allocationMode "device-plugin") "device-plugin" "dra" "auto") "deviceDiscoveryStrategy" (list (eq (include "nvlabel.strategy" .root) "auto") "auto" "nvml" "tegra" "vfio") "healthTaintEffect" (list (not (include "nvlabel.taintsDevices" .root)) "NoSchedule" "NoExecute" "None") -}}
{{- range $k, $c := $chosen -}}
{{- if and (first $c) (hasKey $t $k) (not (has (get $t $k) (rest $c))) -}}{{- include "nvlabel.configFail" (list $at (printf "flags.%s" $k) (printf "invalid value %q: use %s or %s" (get $t $k) (join ", " (initial (rest $c))) (last $c))) -}}{{- end -}}
{{- end -}}
{{- $ct := get $t "healthConditionType" -}}
{{- if and (not $health) (hasKey $t "healthConditionType") -}}
{{- if not (regexMatch `^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$` (regexReplaceAll `^.*/` $ct "")) -}}{{- include "nvlabel.configFail" (list $at "flags.healthConditionType" (printf "invalid value %q: a condition type is a name such as GPUHealthy (letters, digits, -_.)" $ct)) -}}{{- end -}}
{{- if has $ct (list "Ready" "MemoryPressure" "DiskPressure" "PIDPressure" "NetworkUnavailable") -}}{{- include "nvlabel.configFail" (list $at "flags.healthConditionType" (printf "invalid value %q: the kubelet owns this condition; choose another type such as GPUHealthy" $ct)) -}}{{- end -}}
{{- end -}}
{{- $n := trim (get $t "healthExpectedGpus") -}}
{{- if and (not (and $health $v.health.expectedGpus)) $n (not (and (regexMatch `^\+?[0-9]{1,10}$` $n) (ge (float64 $n) 1.0) (le (float64 $n) 4294967295.0))) -}}{{- include "nvlabel.configFail" (list $at "flags.healthExpectedGpus" (printf "invalid value %q: use a whole number of GPUs from 1" $n)) -}}{{- end -}}
{{- if and (not (and $health $v.health.nvmlTimeout)) (hasKey $t "healthNvmlTimeout") (lt (float64 (include "nvlabel.goDurationNs" (get $t "healthNvmlTimeout") | replace "x" "0")) 1e9) -}}{{- include "nvlabel.configFail" (list $at "flags.healthNvmlTimeout" (printf "invalid value %q: use a duration of at least 1s, such as 30s or 2m" (get $t "healthNvmlTimeout"))) -}}{{- end -}}
{{- if and (not (and $health $v.health.recoveryHold)) (hasKey $t "healthRecoveryHold") (eq (include "nvlabel.goDurationNs" (get $t "healthRecoveryHold")) "x") -}}{{- include "nvlabel.configFail" (list $at "flags.healthRecoveryHold" (printf "invalid value %q: use a duration such as 2m, 30s or 0s (clear at the first reading that shows it)" (get $t "healthRecoveryHold"))) -}}{{- end -}}
{{- /* The Xid lists in force: the chart's where it gives them, else the file's. */ -}}
{{- $sets := dict -}}{{- $from := dict -}}
{{- range $k, $chart := dict "healthIgnoreXids" $v.health.ignoreXids "healthFatalXids" $v.health.fatalXids "healthXidThresholds" $v.health.xidThresholds -}}
{{- $items := without (splitList "," (get $t $k)) "" -}}{{- $_ := set $from $k (printf "flags.%s" $k) -}}
{{- if and $health (kindIs "slice" $chart) -}}{{- $items = $chart -}}{{- $_ := set $from $k (printf "health.%s" (trimPrefix "health" $k | untitle)) -}}{{- end -}}
{{- $xids := list -}}
{{- range $items -}}
{{- $item := trim (toString .) -}}
{{- if and $item (eq $k "healthXidThresholds") -}}
{{- if not (regexMatch `^[^:]*:[^/]*/` $item) -}}{{- include "nvlabel.configFail" (list $at "flags.healthXidThresholds" (printf "invalid value %q: %q is not XID:COUNT/WINDOW; use XID:COUNT/WINDOW items such as 43:3/1m,13:5/10m" (get $t $k) $item)) -}}{{- end -}}
{{- $xid := trim (regexReplaceAll `:.*$` $item "") -}}{{- $count := trim (regexReplaceAll `^[^:]*:([^/]*)/.*$` $item "$1") -}}{{- $window := trim (regexReplaceAll `^[^/]*/` $item "") -}}
{{- if not (regexMatch `^\+?[0-9]{1,19}$` $xid) -}}{{- include "nvlabel.configFail" (list $at "flags.healthXidThresholds" (printf "invalid value %q: %q in %q is not an Xid number" (get $t $k) $xid $item)) -}}{{- end -}}
{{- if not (and (regexMatch `^\+?[0-9]{1,4}$` $count) (ge (atoi $count) 2) (le (atoi $count) 1000)) -}}{{- include "nvlabel.configFail" (list $at "flags.healthXidThresholds" (printf "invalid value %q: the count %q in %q is not a whole number from 2 to 1000 (once is --health-fatal-xids)" (get $t $k) $count $item)) -}}{{- end -}}
{{- if has (include "nvlabel.goDurationNs" $window) (list "x" "0") -}}{{- include "nvlabel.configFail" (list $at "flags.healthXidThresholds" (printf "invalid value %q: the window %q in %q is not a positive duration such as 1m or 90s" (get $t $k) $window $item)) -}}{{- end -}}
{{- $item = $xid -}}
{{- if has (trimPrefix "+" $xid | atoi | toString) $xids -}}{{- include "nvlabel.configFail" (list $at "flags.healthXidThresholds" (printf "invalid value %q: Xid %s has two thresholds; give each Xid one" (get $t $k) $xid)) -}}{{- end -}}
{{- else if and $item (not (regexMatch `^\+?[0-9]{1,19}$` $item)) -}}{{- include "nvlabel.configFail" (list $at (printf "flags.%s" $k) (printf "invalid value %q: %q is not an Xid number; use a list such as 13,31,43" (get $t $k) $item)) -}}{{- end -}}
{{- with $item -}}{{- $xids = append $xids (trimPrefix "+" . | atoi | toString) -}}{{- end -}}
{{- end -}}
{{- $_ := set $sets $k $xids -}}
{{- end -}}
{{- range $pair := list (list "healthIgnoreXids" "healthFatalXids" "an Xid cannot be both ignored and fatal") (list "healthIgnoreXids" "healthXidThresholds" "an Xid with a threshold cannot be ignored: it is never a fault; keep it in one of the two") (list "healthFatalXids" "healthXidThresholds" "an Xid with a threshold cannot be fatal: it is a fault the first time; keep it in one of the two") -}}
{{- range get $sets (index $pair 0) -}}
{{- if has . (get $sets (index $pair 1)) -}}{{- include "nvlabel.configFail" (list $at (printf "%s, %s" (get $from (index $pair 0)) (get $from (index $pair 1))) (printf "Xid %s: %s" . (index $pair 2))) -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- /* Across flags: the file's gfd.oneshot, allocationMode and health against the chart's flags. */ -}}
{{- if and (eq (include "nvlabel.yamlBool" (index $gfd "oneshot")) "true") (ne $v.mode "job") -}}{{- include "nvlabel.configFail" (list $at "flags.gfd.oneshot" "true makes nvlabel label once and exit, and --metrics-addr has no effect with --oneshot: only a daemon serves /metrics; leave it out (mode=job labels once)") -}}{{- end -}}
{{- if and $v.migStrategy (eq $v.allocationMode "device-plugin") (eq (get $t "allocationMode") "dra") -}}{{- include "nvlabel.configFail" (list $at "flags.allocationMode" (printf "dra: migStrategy=%s (--mig-strategy) has no effect with --allocation-mode dra, which gives physical facts only (no MIG-strategy labels); leave one out" $v.migStrategy)) -}}{{- end -}}
{{- $strategy := ternary (get $t "deviceDiscoveryStrategy") (include "nvlabel.strategy" .root) (and (eq (include "nvlabel.strategy" .root) "auto") (hasKey $t "deviceDiscoveryStrategy")) -}}
{{- if and (eq $strategy "vfio") (or $health (eq (include "nvlabel.yamlBool" (index $fl "health")) "true")) -}}{{- include "nvlabel.configFail" (list $at "flags.health, flags.deviceDiscoveryStrategy" "--health reads GPU health through the driver, and GPUs bound to vfio-pci have none on this node: turn --health off here") -}}{{- end -}}
{{- end -}}

{{/* A Go duration's nanoseconds (nvlabel's parse_go_duration: no unit only for 0, no negative
length), or x. */}}
{{- define "nvlabel.goDurationNs" -}}
{{- $t := toString . -}}
{{- if regexMatch `^[-+]?0$` $t -}}0
{{- else if regexMatch `^[-+]?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$` $t -}}
{{- $ns := include "nvlabel.durationNs" (trimPrefix "-" $t) -}}
{{- ternary "x" $ns (and (hasPrefix "-" $t) (gt (float64 $ns) 0.0)) -}}
{{- else -}}x{{- end -}}
{{- end -}}
