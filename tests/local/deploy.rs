//! Static checks of the manifests users apply with `kubectl apply -k deploy/<mode>` (rendered
//! from the chart by deploy/render.sh; no cluster here): every overlay is rendered with a small
//! kustomize equivalent, every document is read into its k8s-openapi type with unknown fields
//! rejected, the pods are locked down, the container's flags and env are accepted by nvlabel
//! itself, and the RBAC grants exactly the API calls the code makes in that mode.
//! tests/local/chart_values.rs runs the same checks on the chart rendered with other values.

use crate::common;

use common::deploy_checks::{
    check_gpu_node_terms, check_locked_down, check_policy, check_rbac_exact, host_paths, settings_of, strict,
    typed, Rendered, FEATURES_D,
};
use common::manifests::{deploy, render, DRA, HEALTH, MODES};
use k8s_openapi::api::apps::v1::DaemonSet;

fn overlay(mode: &str) -> Rendered {
    typed(mode, &render(&deploy().join(mode)))
}

#[test]
fn every_overlay_renders_into_known_types_without_unknown_fields() {
    for mode in MODES {
        let r = overlay(mode);
        assert_eq!(r.pods.len(), 1, "{mode}: one workload");
        assert_eq!(r.namespaces.len(), 1, "{mode}: the namespace, with its Pod Security labels");
    }
}

/// Every overlay a user can apply: the modes, and the modes with health on.
fn all_overlays() -> impl Iterator<Item = &'static str> {
    MODES.into_iter().chain(HEALTH.map(|(overlay, _)| overlay)).chain(DRA.map(|(overlay, _)| overlay))
}

#[test]
fn unknown_fields_are_caught() {
    let mut doc = render(&deploy().join("node")).into_iter().find(|d| d["kind"] == "DaemonSet").unwrap();
    doc["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always".into();
    let caught = std::panic::catch_unwind(|| drop(strict::<DaemonSet>(&doc, "typo")));
    assert!(caught.is_err(), "a misspelt field must fail the check");
}

#[test]
fn every_pod_is_locked_down() {
    for mode in all_overlays() {
        let r = overlay(mode);
        check_locked_down(mode, &r);
        // Only the feature-file mode has a host path, and with it root and a privileged namespace.
        let expected: &[&str] = if mode == "nfd-file" { &[FEATURES_D] } else { &[] };
        for (what, _, pod) in &r.pods {
            assert_eq!(host_paths(pod), expected, "{what}: host paths");
            assert_eq!(pod.service_account_name.as_deref(), Some("nvlabel"), "{what}");
        }
    }
}

#[test]
fn daemonsets_probe_health_and_run_on_gpu_nodes_only() {
    for mode in all_overlays().filter(|m| *m != "job") {
        for (what, _, pod) in overlay(mode).pods {
            let c = &pod.containers[0];
            let path = |p: &Option<k8s_openapi::api::core::v1::Probe>| {
                p.as_ref().and_then(|p| p.http_get.as_ref()).and_then(|h| h.path.clone())
            };
            assert_eq!(path(&c.liveness_probe).as_deref(), Some("/healthz"), "{what}");
            assert_eq!(path(&c.readiness_probe).as_deref(), Some("/readyz"), "{what}");
            // NVIDIA's PCI vendor, an NVIDIA SoC (Jetson, IGX, Thor: no PCI GPU), or by hand.
            check_gpu_node_terms(&what, &pod);
            assert!(c.args.iter().flatten().any(|a| a == "--config-dir=/etc/nvlabel/configs"), "{what}");
            assert!(
                c.volume_mounts.iter().flatten().any(|m| m.mount_path == "/etc/nvlabel/configs"),
                "{what}"
            );
        }
    }
}

#[test]
fn flags_and_env_are_ones_nvlabel_accepts() {
    let expect =
        [("nfd-file", "File"), ("nfd-nodefeature", "NodeFeature"), ("node", "Node"), ("job", "Node")];
    for (mode, kind) in expect {
        for (what, ns, pod) in overlay(mode).pods {
            let settings = settings_of(&what, &ns, &pod.containers[0]);
            let target = settings.target().unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(format!("{target:?}").starts_with(kind), "{what}: {target:?}");
            assert!(!settings.health.enabled, "{what}: health is opt-in");
            // GFD's auto: NVML, the CUDA driver on Tegra, WSL; NVML only asked of the runtime.
            assert_eq!(settings.probe.strategy, nvlabel::probe::Strategy::Auto, "{what}");
            let env = common::deploy_checks::container_env(&pod.containers[0], &ns);
            assert_eq!(env["NVIDIA_DRIVER_CAPABILITIES"], "utility", "{what}");
            if mode == "nfd-nodefeature" {
                assert_eq!(settings.namespace, "nvlabel", "{what}: the pod's own namespace");
            }
        }
    }
}

#[test]
fn rbac_grants_exactly_what_the_code_calls_in_the_right_scope() {
    for mode in all_overlays() {
        check_rbac_exact(mode, &overlay(mode));
    }
}

#[test]
fn node_writers_are_fenced_by_the_admission_policy() {
    for mode in MODES {
        let r = overlay(mode);
        check_policy(mode, &r);
        let fenced = !r.policies.is_empty();
        assert_eq!(fenced, mode == "node" || mode == "job", "{mode}");
    }
    // With health, nodes/status and Events are fenced too: a policy each, beside the label
    // policy in node mode.
    for (name, mode) in HEALTH {
        let r = overlay(name);
        check_policy(name, &r);
        assert_eq!(r.policies.len(), if mode == "node" { 3 } else { 2 }, "{name}");
    }
    // On a DRA node, the device taints are fenced too: a fourth policy, on devicetaintrules.
    for (name, _) in DRA {
        let r = overlay(name);
        check_policy(name, &r);
        assert_eq!(r.policies.len(), 4, "{name}");
        let taints = r.policies.iter().find(|p| p.metadata.name.as_deref() == Some("nvlabel-device-taints"));
        let spec =
            taints.and_then(|p| p.spec.as_ref()).unwrap_or_else(|| panic!("{name}: no device-taint policy"));
        let text = serde_json::to_string(spec).unwrap();
        let fences = [
            "authentication.kubernetes.io/node-name",
            "gpu.nvidia.com",
            "nvidia.com/gpu-health",
            "DELETE",
            "oldObject",
            nvlabel::health::writing::taints::NODE_LABEL,
            "'nvlabel-' + r.spec.?deviceSelector.?device.orValue('') + '.' + r.spec.?deviceSelector.?pool.orValue('')",
        ];
        for fence in fences {
            assert!(text.contains(fence), "{name}: the device-taint policy checks {fence}: {text}");
        }
        let settings =
            common::deploy_checks::settings_of(&r.pods[0].0, &r.pods[0].1, &r.pods[0].2.containers[0]);
        assert_eq!(settings.allocation_mode, nvlabel::labels::AllocationMode::Dra, "{name}");
        assert!(settings.health.enabled, "{name}");
    }
    let r = overlay("node");
    let condition = &r.policies[0].spec.as_ref().unwrap().match_conditions.as_ref().unwrap()[0].expression;
    assert!(condition.contains("system:serviceaccount:nvlabel:nvlabel"), "scoped to our service account");
}

/// The image is built for amd64 and arm64 (Grace: GH200, GB200 nodes): every term of every
/// DaemonSet's node affinity admits exactly those, so a pod never lands where it cannot start.
#[test]
fn daemonsets_run_on_the_arches_the_image_is_built_for() {
    for mode in all_overlays().filter(|m| *m != "job") {
        for (what, _, pod) in overlay(mode).pods {
            let affinity = pod.affinity.and_then(|a| a.node_affinity);
            let terms = affinity.and_then(|n| n.required_during_scheduling_ignored_during_execution);
            let terms = terms.map(|t| t.node_selector_terms).unwrap_or_default();
            assert!(!terms.is_empty(), "{what}: no node affinity");
            for term in &terms {
                let arch: Vec<_> = term
                    .match_expressions
                    .iter()
                    .flatten()
                    .filter(|e| e.key == "kubernetes.io/arch")
                    .collect();
                assert_eq!(arch.len(), 1, "{what}: {term:?}");
                assert_eq!(arch[0].operator, "In", "{what}");
                assert_eq!(
                    arch[0].values.as_deref(),
                    Some(&["amd64".to_string(), "arm64".to_string()][..]),
                    "{what}"
                );
            }
        }
    }
}

/// deploy/operator-health (GPU health in the GPU Operator's pod): exactly health's calls, granted
/// to the Operator's GFD ServiceAccount alone, each write fenced by a bound admission policy that
/// matches that account. (tests/cluster/operator_health.rs applies it on a real API server.)
#[test]
fn operator_health_grants_exactly_healths_calls_to_the_operators_service_account() {
    use common::deploy_checks::{calls, grants};
    use nvlabel::health::writing::events::EVENTS_NAMESPACE;
    let r = typed("operator-health", &render(&deploy().join("operator-health")));
    assert!(
        r.pods.is_empty() && r.namespaces.is_empty() && r.config_maps.is_empty(),
        "health's objects only"
    );
    let sa = "ServiceAccount/gpu-operator/nvidia-gpu-feature-discovery";
    let mut granted = std::collections::BTreeSet::new();
    for (role, ns, kind, subjects) in &r.bindings {
        assert_eq!(subjects, &[sa], "{role}: bound to the Operator's ServiceAccount only");
        let (_, _, rules) =
            r.rules.iter().find(|(n, rns, _)| n == role && (kind == "ClusterRole" || rns == ns)).unwrap();
        granted.extend(grants(&ns.clone().unwrap_or_else(|| "cluster".into()), rules));
    }
    assert_eq!(r.rules.len(), r.bindings.len(), "every role is bound");
    assert_eq!(granted, calls(nvlabel::health::writing::condition::API_CALLS, EVENTS_NAMESPACE));
    let user =
        "request.userInfo.username == 'system:serviceaccount:gpu-operator:nvidia-gpu-feature-discovery'";
    assert_eq!(r.policies.len(), 2, "the status patch and the Events, each fenced");
    for p in &r.policies {
        let name = p.metadata.name.clone().unwrap();
        let conditions = p.spec.as_ref().and_then(|s| s.match_conditions.clone()).unwrap_or_default();
        assert!(
            conditions.iter().any(|c| c.expression == user),
            "{name}: matches the Operator's ServiceAccount"
        );
        let bound = r.policy_bindings.iter().find(|b| b.spec.policy_name == name);
        let actions = bound.map(|b| b.spec.validation_actions.clone());
        assert_eq!(actions, Some(vec!["Deny".to_string()]), "{name}: bound, denying");
    }
}
