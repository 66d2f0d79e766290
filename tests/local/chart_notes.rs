//! The chart's install notes (NOTES.txt) say what the release does beyond labelling, exactly
//! where it does it: DRA device taints, the GPU Operator's client pause, the uninstall hook and
//! what it removes, and the namespace `helm uninstall` keeps. Needs a Helm binary
//! (`NVLABEL_HELM`); without one the test skips with one line.

use crate::common;

use common::helm::{chart, helm};
use std::path::Path;

fn notes(helm: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new(helm)
        .args(["install", "nvlabel"])
        .arg(chart())
        .args(["--dry-run=client", "--namespace", "default"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    text[text.find("NOTES:").expect("notes")..].to_string()
}

#[test]
fn the_notes_name_taints_the_operator_pause_the_uninstall_hook_and_the_kept_namespace() {
    let Some(helm) =
        helm("the_notes_name_taints_the_operator_pause_the_uninstall_hook_and_the_kept_namespace")
    else {
        return;
    };
    const TAINTS: &str = "kubectl get devicetaintrules -l app.kubernetes.io/managed-by=nvlabel";
    const PAUSE: &str = "nvidia.com/gpu.deploy.client other than true) nvlabel's pod leaves it";
    const HOOK: &str = "(a pre-delete hook, nvlabel prune --health-only) that removes GPU health's";
    const NAMESPACE: &str = "once no release\nuses it: kubectl delete namespace nvlabel";
    // (values, [device taints, pause, hook, namespace kept], more text expected)
    let cases: &[(&[&str], [bool; 4], &[&str])] = &[
        (&[], [false, true, false, true], &["keeps its\nlabels; the pod comes back"]),
        (&["--set", "health.enabled=true"], [false, true, true, true], &["labels and its GPUHealthy condition as they were"]),
        (&["--set", "health.enabled=true", "--set", "allocationMode=dra"], [true, true, true, true], &["effect NoSchedule)", "GPUHealthy condition, its fault record annotation and the device taints"]),
        (
            &["--set", "health.enabled=true", "--set", "allocationMode=auto", "--set", "health.taintEffect=NoExecute", "--set", "health.conditionType=GPUOk"],
            [true, true, true, true],
            &["effect NoExecute: also evicts the pods using them), on\nnodes whose GPUs NVIDIA's DRA driver allocates", "GPUOk condition"],
        ),
        (&["--set", "allocationMode=dra"], [false, true, false, true], &[]),
        (&["--set", "health.enabled=true", "--set", "allocationMode=dra", "--set", "health.pruneOnUninstall=false"], [true, true, false, true], &["With health.pruneOnUninstall=false the GPUHealthy condition stays too"]),
        (&["--set", "gpuOperator.respectClientPause=false", "--set", "namespace.create=false"], [false, false, false, false], &[]),
        (&["--set", "mode=job", "--set", "job.nodeName=gpu-node-1"], [false, false, false, true], &[]),
    ];
    // An affinity of the user's own, without the pause: said instead.
    let own = r#"affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"gpu","operator":"Exists"}]}]}}}"#;
    for args in [["--set-json", own], ["--set-json", "affinity=null"]] {
        let text = notes(&helm, &args);
        assert!(
            text.contains("does not name nvidia.com/gpu.deploy.client") && !text.contains(PAUSE),
            "{text}"
        );
    }
    let with_pause = r#"affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"nvidia.com/gpu.deploy.client","operator":"DoesNotExist"}]}]}}}"#;
    let text = notes(&helm, &["--set-json", with_pause]);
    assert!(!text.contains("does not name") && text.contains(PAUSE), "{text}");
    for (args, [taints, pause, hook, namespace], more) in cases {
        let text = notes(&helm, args);
        for (what, want, line) in [
            ("taints", taints, TAINTS),
            ("pause", pause, PAUSE),
            ("hook", hook, HOOK),
            ("namespace", namespace, NAMESPACE),
        ] {
            assert_eq!(text.contains(line), *want, "{args:?}: {what}: {text}");
        }
        for line in *more {
            assert!(text.contains(line), "{args:?}: {line:?} in {text}");
        }
    }
}
