//! The Helm chart's DRA values (`allocationMode`, `health.taintEffect`): in every mode, with
//! and without health, the deploy checks pass (RBAC exactly what the code calls, the device-taint
//! policy where taints are written), the flags reach the pod, the grants for ResourceSlices and
//! DeviceTaintRules appear only when used, the default renders as before, and wrong values are
//! refused; the uninstall hook comes with health unless `health.pruneOnUninstall=false`; the install
//! notes suggest no sharing labels in DRA mode. Needs a Helm binary (`NVLABEL_HELM`); without one each test skips with one line.

use crate::common;

use common::deploy_checks::{check_locked_down, check_policy, check_rbac_exact, settings_of, typed};
use common::helm::{helm, template, MODES};
use common::hook_checks::check_uninstall_hook;
use nvlabel::labels::AllocationMode;

/// Whether a rendering grants `resource` of resource.k8s.io.
fn grants(r: &common::deploy_checks::Rendered, resource: &str) -> bool {
    r.rules.iter().flat_map(|(_, _, rules)| rules).any(|rule| {
        rule.api_groups.iter().flatten().any(|g| g == "resource.k8s.io")
            && rule.resources.iter().flatten().any(|x| x == resource)
    })
}

#[test]
fn allocation_modes_grant_and_fence_only_what_they_use() {
    let Some(helm) = helm("allocation_modes_grant_and_fence_only_what_they_use") else { return };
    for mode in MODES {
        let healths: &[bool] =
            if ["node", "nfd-nodefeature"].contains(&mode) { &[false, true] } else { &[false] };
        for &health in healths {
            let base = vec![
                "--set".to_string(),
                "job.nodeName=gpu-node-1".to_string(),
                "--set".to_string(),
                format!("mode={mode}"),
                "--set".to_string(),
                format!("health.enabled={health}"),
            ];
            let refs = |v: &[String]| v.iter().map(String::as_str).collect::<Vec<_>>().join(" ");
            let default =
                template(&helm, "nvlabel", &base.iter().map(String::as_str).collect::<Vec<_>>()).unwrap();
            for allocation in ["device-plugin", "dra", "auto"] {
                let mut args = base.clone();
                args.extend(["--set".to_string(), format!("allocationMode={allocation}")]);
                let taints = health && allocation != "device-plugin";
                let effect = ["--set".to_string(), "health.taintEffect=NoExecute".to_string()];
                if taints {
                    args.extend(effect);
                } else {
                    // Where nothing is tainted the effect would vanish silently: refused.
                    let with: Vec<String> = args.iter().cloned().chain(effect).collect();
                    let argv: Vec<&str> = with.iter().map(String::as_str).collect();
                    let err = template(&helm, "nvlabel", &argv).expect_err(&refs(&with));
                    assert!(err.contains("health.taintEffect: NoExecute has no effect"), "{err}");
                }
                let label = refs(&args);
                let argv: Vec<&str> = args.iter().map(String::as_str).collect();
                let docs = template(&helm, "nvlabel", &argv).unwrap_or_else(|e| panic!("{label}: {e}"));
                let r = typed(&label, &docs);
                check_locked_down(&label, &r);
                check_rbac_exact(&label, &r);
                check_policy(&label, &r);
                check_uninstall_hook(&label, &r);
                let (what, ns, pod) = &r.pods[0];
                let settings = settings_of(what, ns, &pod.containers[0]);
                assert_eq!(settings.allocation_mode, AllocationMode::parse(allocation).unwrap(), "{label}");
                let slices = allocation == "auto" || (allocation == "dra" && health);
                assert_eq!(grants(&r, "resourceslices"), slices, "{label}");
                assert_eq!(grants(&r, "devicetaintrules"), taints, "{label}");
                let effect =
                    pod.containers[0].args.iter().flatten().any(|a| a == "--health-taint-effect=NoExecute");
                assert_eq!(effect, taints, "{label}: the effect reaches the pod where taints are written");
                if allocation == "device-plugin" {
                    assert_eq!(docs, default, "{label}: the default renders as before");
                }
            }
        }
    }
}

#[test]
fn wrong_dra_values_are_refused() {
    let Some(helm) = helm("wrong_dra_values_are_refused") else { return };
    for (args, path) in [
        (["--set", "allocationMode=DRA"], "/allocationMode"),
        (["--set", "health.taintEffect=Evict"], "/health/taintEffect"),
    ] {
        let e = template(&helm, "nvlabel", &args).expect_err("refused");
        assert!(e.contains(path), "{args:?}: {e}");
    }
}

#[test]
fn the_uninstall_hook_comes_with_health_unless_turned_off() {
    let Some(helm) = helm("the_uninstall_hook_comes_with_health_unless_turned_off") else { return };
    for mode in ["node", "nfd-nodefeature"] {
        let mode_arg = format!("mode={mode}");
        for (extra, hook) in [
            (&["--set", "health.enabled=true"][..], true),
            (&["--set", "health.enabled=true", "--set", "health.pruneOnUninstall=false"], false),
            (&[], false),
        ] {
            let mut args = vec!["--set", &mode_arg];
            args.extend(extra);
            let label = args.join(" ");
            let r = typed(&label, &template(&helm, "nvlabel", &args).unwrap());
            check_uninstall_hook(&label, &r);
            assert_eq!(!r.hooks.is_empty(), hook, "{label}");
        }
    }
}

/// The install notes suggest only labels the chosen profile publishes: no sharing labels where
/// NVIDIA's DRA driver allocates the GPUs.
#[test]
fn the_notes_name_only_labels_the_node_gets() {
    let Some(helm) = helm("the_notes_name_only_labels_the_node_gets") else { return };
    let notes = |mode: &str| {
        let out = std::process::Command::new(&helm)
            .args(["install", "nvlabel"])
            .arg(common::helm::chart())
            .args(["--dry-run=client", "--namespace", "default", "--set"])
            .arg(format!("allocationMode={mode}"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        text[text.find("NOTES:").expect("notes")..].to_string()
    };
    let sharing = "nvidia.com/gpu.replicas";
    assert!(notes("device-plugin").contains(sharing));
    let dra = notes("dra");
    assert!(!dra.contains(sharing) && dra.contains("nvidia.com/gpu.present"), "{dra}");
}
