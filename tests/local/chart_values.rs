//! The Helm chart (deploy/helm/nvlabel) rendered with many values: the deploy checks (types,
//! lock-down, exact RBAC, admission policy) on every rendering, values reaching the pod, and wrong
//! values refused with a message naming the value. Lint and the static manifests' staleness are in
//! `chart.rs`.
//! Needs a Helm binary: `NVLABEL_HELM` (CI sets it from .ci/fetch-helm) or `helm` on PATH;
//! without one each test skips with one line.

use crate::common;

use common::deploy_checks::{
    check_gpu_node_terms, check_locked_down, check_policy, check_rbac_exact, host_paths, settings_of, typed,
    Rendered, FEATURES_D,
};
use common::helm::{helm, template, MODES};
use common::hook_checks::check_uninstall_hook;
use nvlabel::config::health_checks::HealthSettings;
use std::path::PathBuf;

/// Renders and runs every deploy check; returns the typed objects for more checks.
fn checked(helm: &PathBuf, release: &str, args: &[&str]) -> Rendered {
    let label = format!("{release} {}", args.join(" "));
    let docs = template(helm, release, args).unwrap_or_else(|e| panic!("{label}: refused: {e}"));
    let r = typed(&label, &docs);
    check_locked_down(&label, &r);
    check_rbac_exact(&label, &r);
    check_policy(&label, &r);
    check_uninstall_hook(&label, &r);
    r
}

#[test]
fn every_mode_and_config_source_passes_the_deploy_checks() {
    let Some(helm) = helm("every_mode_and_config_source_passes_the_deploy_checks") else { return };
    let configs: [&[&str]; 3] = [
        &[],
        &["--set", "config.name=shared-configs", "--set", "config.default=ts4"],
        &["--set", "config.map=null"],
    ];
    for mode in MODES {
        for (release, ns) in [("nvlabel", "nvlabel"), ("gpu", "gpu-labels")] {
            for config in configs {
                let mut args = vec!["--set", "job.nodeName=gpu-node-1"];
                let mode_arg = format!("mode={mode}");
                let ns_arg = format!("namespace.name={ns}");
                args.extend(["--set", &mode_arg, "--set", &ns_arg]);
                args.extend(config);
                let r = checked(&helm, release, &args);
                let (what, pod_ns, pod) = &r.pods[0];
                assert_eq!(pod_ns, ns, "{what}");
                let settings = settings_of(what, pod_ns, &pod.containers[0]);
                let target = format!("{:?}", settings.target().unwrap());
                let kind = match mode {
                    "nfd-nodefeature" => "NodeFeature",
                    "nfd-file" => "File",
                    _ => "Node",
                };
                assert!(target.starts_with(kind), "{what}: {target}");
                assert_eq!(settings.oneshot, mode == "job", "{what}");
                assert_eq!(settings.config_dir.is_some(), config.is_empty() || config.len() == 4, "{what}");
                let mounted =
                    pod.volumes.iter().flatten().find_map(|v| v.config_map.as_ref()).map(|c| c.name.clone());
                match config.len() {
                    0 => assert_eq!(
                        mounted.as_deref(),
                        Some(format!("{}-configs", fullname(release)).as_str())
                    ),
                    4 => {
                        assert_eq!(mounted.as_deref(), Some("shared-configs"), "{what}");
                        assert!(r.config_maps.is_empty(), "{what}: an existing ConfigMap is not created");
                        assert!(pod.containers[0].args.iter().flatten().any(|a| a == "--config-default=ts4"));
                    }
                    _ => assert_eq!(mounted, None, "{what}"),
                }
                let expected: &[&str] = if mode == "nfd-file" { &[FEATURES_D] } else { &[] };
                assert_eq!(host_paths(pod), expected, "{what}");
            }
        }
    }
}

fn fullname(release: &str) -> String {
    if release.contains("nvlabel") {
        release.to_string()
    } else {
        format!("{release}-nvlabel")
    }
}

#[test]
fn metrics_scheduling_image_and_priority_values_reach_the_pod() {
    let Some(helm) = helm("metrics_scheduling_image_and_priority_values_reach_the_pod") else { return };
    let r = checked(
        &helm,
        "nvlabel",
        &[
            "--set",
            "metrics.serviceMonitor.enabled=true",
            "--set",
            "metrics.port=9400",
            "--set",
            "priorityClassName=system-node-critical",
            "--set",
            "imagePullSecrets[0].name=regcred",
            "--set",
            "image.repository=registry.example/nvlabel",
            "--set",
            "image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "--set",
            "migStrategy=mixed",
            "--set",
            "extendedLabels=false",
            "--set",
            "failOnInitError=false",
            "--set",
            "noTimestamp=true",
            "--set",
            "runtimeClassName=",
            "--set-json",
            r#"affinity=null"#,
            "--set",
            "nodeSelector.pool=gpu",
            "--set",
            "sleepInterval=infinite",
        ],
    );
    let (what, ns, pod) = &r.pods[0];
    let c = &pod.containers[0];
    assert_eq!(c.image.as_deref(), Some("registry.example/nvlabel@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"));
    assert_eq!(pod.priority_class_name.as_deref(), Some("system-node-critical"), "{what}");
    assert_eq!(pod.image_pull_secrets.as_ref().unwrap()[0].name, "regcred", "{what}");
    assert_eq!(pod.runtime_class_name, None, "{what}");
    assert_eq!(pod.affinity, None, "{what}: the default GPU-node affinity can be dropped");
    assert_eq!(pod.node_selector.as_ref().unwrap()["pool"], "gpu", "{what}");
    let settings = settings_of(what, ns, c);
    assert_eq!(format!("{:?}", settings.mig_strategy), "Mixed", "{what}");
    assert!(!settings.extended_labels, "{what}");
    assert!(!settings.fail_on_init_error, "{what}");
    assert!(settings.no_timestamp, "{what}");
    assert_eq!(settings.metrics_addr, ":9400", "{what}");
    assert_eq!(
        settings.sleep_interval,
        nvlabel::duration::Interval::Infinite,
        "{what}: the binary takes infinite"
    );
    assert_eq!(r.services.len(), 1);
    let svc = r.services[0].spec.as_ref().unwrap();
    assert_eq!(svc.ports.as_ref().unwrap()[0].port, 9400);
    let pod_labels = template(&helm, "nvlabel", &[]).unwrap();
    let ds = pod_labels.iter().find(|d| d["kind"] == "DaemonSet").unwrap();
    for (k, v) in svc.selector.as_ref().unwrap() {
        assert_eq!(
            ds["spec"]["template"]["metadata"]["labels"][k],
            v.as_str(),
            "the Service selects the pods: {k}"
        );
    }
    assert_eq!(r.others.len(), 1, "the ServiceMonitor");
    assert_eq!(r.others[0]["spec"]["endpoints"][0]["port"], "http");
    // Names, pod labels, update strategy; the policy follows the renamed service account.
    let r = checked(
        &helm,
        "nvlabel",
        &[
            "--set",
            "mode=node",
            "--set",
            "fullnameOverride=gpu-labels",
            "--set",
            "podLabels.team=ml",
            "--set",
            "updateStrategy.type=OnDelete",
        ],
    );
    let (what, _, pod) = &r.pods[0];
    assert_eq!(pod.service_account_name.as_deref(), Some("gpu-labels"), "{what}");
    assert!(what.contains("gpu-labels-node"), "{what}");
    assert_eq!(r.policies[0].metadata.name.as_deref(), Some("gpu-labels-node-labels"));
    let docs =
        template(&helm, "nvlabel", &["--set", "podLabels.team=ml", "--set", "updateStrategy.type=OnDelete"])
            .unwrap();
    let ds = docs.iter().find(|d| d["kind"] == "DaemonSet").unwrap();
    assert_eq!(ds["spec"]["template"]["metadata"]["labels"]["team"], "ml");
    assert_eq!(ds["spec"]["updateStrategy"]["type"], "OnDelete");
    // Defaults: GPU nodes only, the GPU taints tolerated, no ServiceMonitor.
    let r = checked(&helm, "nvlabel", &[]);
    let (what, _, pod) = &r.pods[0];
    check_gpu_node_terms(what, pod);
    assert!(pod.tolerations.iter().flatten().any(|t| t.key.as_deref() == Some("CriticalAddonsOnly")));
    assert!(r.others.is_empty());
}

#[test]
fn tolerations_resources_and_annotations_replace_the_defaults() {
    let Some(helm) = helm("tolerations_resources_and_annotations_replace_the_defaults") else { return };
    let r = checked(
        &helm,
        "nvlabel",
        &[
            "--set-json",
            r#"tolerations=[{"key":"nvidia.com/gpu","operator":"Exists"},{"key":"dedicated","operator":"Equal","value":"gpu","effect":"NoExecute"}]"#,
            "--set",
            "resources.requests.cpu=50m",
            "--set",
            "resources.limits.memory=128Mi",
            "--set",
            "podAnnotations.team=ml",
            "--set",
            "image.tag=0.2.0",
            "--set",
            "updateStrategy.rollingUpdate.maxUnavailable=10%",
        ],
    );
    let (what, _, pod) = &r.pods[0];
    let tolerations = pod.tolerations.as_ref().unwrap();
    assert_eq!(tolerations.len(), 2, "{what}: a list value replaces the default list");
    assert_eq!(tolerations[1].key.as_deref(), Some("dedicated"), "{what}");
    assert_eq!(tolerations[1].effect.as_deref(), Some("NoExecute"), "{what}");
    let c = &pod.containers[0];
    assert_eq!(c.image.as_deref(), Some("ghcr.io/nvlabel/nvlabel:0.2.0"), "{what}");
    let resources = c.resources.as_ref().unwrap();
    assert_eq!(resources.requests.as_ref().unwrap()["cpu"].0, "50m", "{what}");
    assert_eq!(resources.requests.as_ref().unwrap()["memory"].0, "16Mi", "{what}: defaults merge");
    assert_eq!(resources.limits.as_ref().unwrap()["memory"].0, "128Mi", "{what}");
    let docs = template(
        &helm,
        "nvlabel",
        &["--set", "podAnnotations.team=ml", "--set", "updateStrategy.rollingUpdate.maxUnavailable=10%"],
    )
    .unwrap();
    let ds = docs.iter().find(|d| d["kind"] == "DaemonSet").unwrap();
    assert_eq!(ds["spec"]["template"]["metadata"]["annotations"]["team"], "ml");
    assert_eq!(ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"], "10%");
}

#[test]
fn wrong_values_are_refused_with_a_message_naming_them() {
    let Some(helm) = helm("wrong_values_are_refused_with_a_message_naming_them") else { return };
    let cases: &[(&[&str], &str)] = &[
        (&["--set", "mode=nodes"], "/mode"),
        (&["--set", "mode=job"], "/job/nodeName"),
        (&["--set", "mode=job", "--set", "job.nodeName=Not_A_Node"], "/job/nodeName"),
        (&["--set", "image.pullPolicy=Sometimes"], "/image/pullPolicy"),
        (&["--set", "image.digest=latest"], "/image/digest"),
        (&["--set", "image.tag=v1:2"], "/image/tag"),
        (&["--set", "metrics.port=70000"], "/metrics/port"),
        (&["--set", "sleepInterval=soon"], "/sleepInterval"),
        (&["--set", "file.expiry=1 hour"], "/file/expiry"),
        (&["--set", "file.hostPath=relative/dir"], "/file/hostPath"),
        (&["--set", "migStrategy=both"], "/migStrategy"),
        (&["--set", "extendedLabels=yes please"], "/extendedLabels"),
        (&["--set", "namespace.name=GPU"], "/namespace/name"),
        (&["--set", "config.map.bad key=x"], "bad key"),
        (&["--set", "tolerations=none"], "/tolerations"),
        (&["--set", "imagePullSecret=regcred"], "imagePullSecret"),
        (&["--set", "metrics.serviceMonitor.enabeld=true"], "enabeld"),
        (&["--set", "mode=nfd-file", "--set", "health.enabled=true"], "health.enabled: the GPU health"),
        (
            &["--set", "mode=job", "--set", "job.nodeName=n1", "--set", "health.enabled=true"],
            "mode=job cannot",
        ),
        (
            &["--set", "health.conditionType=Ready"],
            "health.conditionType: Ready is a condition the kubelet owns",
        ),
        (
            &["--set", "health.taintEffect=NoExecute"],
            "health.taintEffect: NoExecute has no effect without health.enabled",
        ),
        (
            &["--set", "health.enabled=true", "--set", "health.taintEffect=None"],
            "health.taintEffect: None has no effect",
        ),
        (&["--set", "sleepInterval=infinitely"], "/sleepInterval"),
        (&["--set", "health.conditionType=GPU Healthy"], "/health/conditionType"),
        (&["--set", "health.conditionType=GPU'Healthy"], "/health/conditionType"),
        (&["--set", "health.ignoreXids=79"], "/health/ignoreXids"),
        (&["--set", "health.fatalXids=94"], "/health/fatalXids"),
        (&["--set-json", "health.ignoreXids=[\"abc\"]"], "/health/ignoreXids"),
        (&["--set", "health.bootIdFile=boot_id"], "/health/bootIdFile"),
        (&["--set", "health.enable=true"], "enable"),
        (&["--set", "fullnameOverride=GPU_Labels"], "/fullnameOverride"),
        (&["--set", "updateStrategy.type=Sometimes"], "/updateStrategy/type"),
        // Values that used to render a manifest the API server refuses, or to vanish silently.
        (&["--set", "updateStrategy.maxUnavailable=1"], "maxUnavailable"),
        (&["--set", "updateStrategy.rollingUpdate.maxUnavailble=1"], "maxUnavailble"),
        (&["--set", "config.default=ts4"], "config.default"),
        (&["--set", "affinity.nodeAfinity.x=1"], "nodeAfinity"),
        (&["--set", "tolerations[0].operator=Maybe"], "/tolerations/0/operator"),
        (&["--set", "tolerations[0].efect=NoSchedule"], "efect"),
        (&["--set", "resources.requests.cpu=lots"], "/resources/requests/cpu"),
        (&["--set", "resources.limit.memory=1Gi"], "limit"),
        (
            &["--set", "metrics.service.enabled=false", "--set", "metrics.serviceMonitor.enabled=true"],
            "metrics.service.enabled",
        ),
    ];
    for (args, names) in cases {
        let err = template(&helm, "nvlabel", args).err().unwrap_or_else(|| panic!("{args:?} was accepted"));
        assert!(err.contains(names), "{args:?}: the message should name {names}: {err}");
    }
}

#[test]
fn without_its_namespace_the_chart_deploys_into_the_releases() {
    let Some(helm) = helm("without_its_namespace_the_chart_deploys_into_the_releases") else { return };
    for mode in MODES {
        let mode_arg = format!("mode={mode}");
        let args = [
            "--set",
            &mode_arg,
            "--set",
            "job.nodeName=gpu-node-1",
            "--set",
            "namespace.create=false",
            "--set",
            "namespace.name=",
            "--namespace",
            "gpu-ops",
        ];
        let r = checked(&helm, "nvlabel", &args);
        assert!(r.namespaces.is_empty(), "{mode}: the chart leaves an existing namespace alone");
        let (what, ns, pod) = &r.pods[0];
        assert_eq!(ns, "gpu-ops", "{what}");
        assert_eq!(settings_of(what, ns, &pod.containers[0]).namespace, "gpu-ops", "{what}");
    }
}

#[test]
fn health_adds_its_flags_grants_and_policy_only_where_asked() {
    let Some(helm) = helm("health_adds_its_flags_grants_and_policy_only_where_asked") else { return };
    for mode in ["node", "nfd-nodefeature"] {
        for (release, ns) in [("nvlabel", "nvlabel"), ("gpu", "gpu-labels")] {
            let mode_arg = format!("mode={mode}");
            let ns_arg = format!("namespace.name={ns}");
            // checked(): RBAC = the code's calls; the policy's condition = --health-condition-type.
            let r = checked(
                &helm,
                release,
                &[
                    "--set",
                    &mode_arg,
                    "--set",
                    &ns_arg,
                    "--set",
                    "health.enabled=true",
                    "--set",
                    "health.conditionType=example.com/GPUsOK",
                    "--set-json",
                    "health.ignoreXids=[13,79]",
                    "--set-json",
                    "health.fatalXids=[94]",
                    "--set",
                    "health.bootIdFile=/run/boot_id,health.recoveryHold=30s",
                ],
            );
            let (what, pod_ns, pod) = &r.pods[0];
            let h = settings_of(what, pod_ns, &pod.containers[0]).health;
            assert!(h.enabled, "{what}");
            assert_eq!(h.condition_type, "example.com/GPUsOK", "{what}");
            assert_eq!(h.judging.ignored_xids.into_iter().collect::<Vec<_>>(), vec![13, 79], "{what}");
            assert_eq!(h.judging.fatal_xids.into_iter().collect::<Vec<_>>(), vec![94], "{what}");
            assert_eq!((h.boot_id_file, h.recovery_hold.as_secs()), ("/run/boot_id".into(), 30), "{what}");
            assert!(host_paths(pod).is_empty(), "{what}: health reads /proc and /sys as any pod can");
            let events = r.rules.iter().find(|(n, _, _)| n.ends_with("-health-events")).unwrap();
            assert_eq!(events.1.as_deref(), Some("default"), "{what}: Node events live in default");
            // Defaults: nvlabel's condition type, no listed Xids (the catalog decides), kernel boot id.
            let r = checked(
                &helm,
                release,
                &["--set", &mode_arg, "--set", &ns_arg, "--set", "health.enabled=true"],
            );
            let (what, pod_ns, pod) = &r.pods[0];
            let h = settings_of(what, pod_ns, &pod.containers[0]).health;
            let instance = pod.service_account_name.clone(); // the release's own: its uninstall's
            assert_eq!(h, HealthSettings { enabled: true, instance, ..Default::default() });
            let r = checked(
                &helm,
                release,
                &[
                    "--set",
                    &mode_arg,
                    "--set",
                    &ns_arg,
                    "--set",
                    "health.enabled=true",
                    "--set-json",
                    "health.ignoreXids=[]",
                ],
            );
            let (what, ns, p) = &r.pods[0];
            assert!(settings_of(what, ns, &p.containers[0]).health.judging.ignored_xids.is_empty(), "{what}");
            // Off (the default): no status access, no health policy, no --health.
            let r = checked(&helm, release, &["--set", &mode_arg, "--set", &ns_arg]);
            let (what, pod_ns, pod) = &r.pods[0];
            assert!(!settings_of(what, pod_ns, &pod.containers[0]).health.enabled, "{what}");
            let docs = template(&helm, release, &["--set", &mode_arg]).unwrap();
            assert!(!docs.iter().any(|d| d.to_string().contains("nodes/status")), "{what}");
        }
    }
}
