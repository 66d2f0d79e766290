//! The chart's install notes (NOTES.txt) say, in whole sentences, which nodes get a pod and what
//! the pods need (the RuntimeClass), as the values make them, and what the release does beyond
//! labelling, exactly where it does it: DRA device taints, the GPU Operator's client pause, the
//! uninstall hook and what it removes, and the namespace `helm uninstall` keeps. Needs a Helm
//! binary (`NVLABEL_HELM`); without one the tests skip with one line.

use crate::common;

use common::helm::{chart, helm};
use std::path::Path;

/// An affinity of the user's own, which names no GPU Operator pause.
const OWN: &str = r#"affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"gpu","operator":"Exists"}]}]}}}"#;

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
    let notes = text[text.find("NOTES:").expect("notes")..].to_string();
    whole_sentences(args, &notes);
    notes
}

/// Every line of prose ends its sentence (or introduces the indented command lines below it), so
/// no value or condition leaves a sentence broken in the middle of a line.
fn whole_sentences(args: &[&str], notes: &str) {
    for line in notes.lines().skip(1).filter(|l| !l.is_empty() && !l.starts_with("  ")) {
        assert!(line.ends_with('.') || line.ends_with(':'), "{args:?}: a broken sentence: {line:?}\n{notes}");
    }
}

#[test]
fn the_notes_name_taints_the_operator_pause_the_uninstall_hook_and_the_kept_namespace() {
    let Some(helm) =
        helm("the_notes_name_taints_the_operator_pause_the_uninstall_hook_and_the_kept_namespace")
    else {
        return;
    };
    const TAINTS: &str = "kubectl get devicetaintrules -l app.kubernetes.io/managed-by=nvlabel";
    const PAUSE: &str =
        "sets nvidia.com/gpu.deploy.client to something other than true), nvlabel's pod leaves that node.";
    const HOOK: &str = "(a pre-delete hook, nvlabel prune --health-only) that removes GPU health's";
    const NAMESPACE: &str = "once no release uses it, delete it:\n  kubectl delete namespace nvlabel";
    // (values, [device taints, pause, hook, namespace kept], more text expected)
    let cases: &[(&[&str], [bool; 4], &[&str])] = &[
        (
            &[],
            [false, true, false, true],
            &["The node keeps its labels as they were, and the pod comes back"],
        ),
        (
            &["--set", "health.enabled=true"],
            [false, true, true, true],
            &["labels and its GPUHealthy condition as they were"],
        ),
        (
            &["--set", "health.enabled=true", "--set", "allocationMode=dra"],
            [true, true, true, true],
            &[
                "effect NoSchedule.",
                "GPUHealthy condition, its fault record annotation and the device taints",
            ],
        ),
        (
            &[
                "--set",
                "health.enabled=true",
                "--set",
                "allocationMode=auto",
                "--set",
                "health.taintEffect=NoExecute",
                "--set",
                "health.conditionType=GPUOk",
            ],
            [true, true, true, true],
            &[
                "a device taint on nodes whose GPUs NVIDIA's DRA driver allocates: one DeviceTaintRule per device, key nvidia.com/gpu-health, effect NoExecute, which also evicts the pods using them.",
                "GPUOk condition",
            ],
        ),
        (&["--set", "allocationMode=dra"], [false, true, false, true], &[]),
        (
            &[
                "--set",
                "health.enabled=true",
                "--set",
                "allocationMode=dra",
                "--set",
                "health.pruneOnUninstall=false",
            ],
            [true, true, false, true],
            &["With health.pruneOnUninstall=false the GPUHealthy condition stays too"],
        ),
        (
            &["--set", "gpuOperator.respectClientPause=false", "--set", "namespace.create=false"],
            [false, false, false, false],
            &[],
        ),
        (&["--set", "mode=job", "--set", "job.nodeName=gpu-node-1"], [false, false, false, true], &[]),
    ];
    // An affinity of the user's own, without the pause, or none: said instead.
    const NO_PAUSE: &str = "The pods will not leave a node while the GPU Operator pauses GPU clients there";
    for (args, why) in [
        (
            ["--set-json", OWN],
            "Your affinity.nodeAffinity replaces the node terms the chart builds and does not name nvidia.com/gpu.deploy.client.",
        ),
        (["--set-json", "affinity=null"], "With affinity=null the pods have no node affinity"),
    ] {
        let text = notes(&helm, &args);
        assert!(text.contains(why) && text.contains(NO_PAUSE) && !text.contains(PAUSE), "{text}");
    }
    let with_pause = r#"affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"nvidia.com/gpu.deploy.client","operator":"DoesNotExist"}]}]}}}"#;
    let text = notes(&helm, &["--set-json", with_pause]);
    assert!(!text.contains(NO_PAUSE) && text.contains(PAUSE), "{text}");
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

#[test]
fn the_notes_say_which_nodes_get_a_pod_and_what_the_pods_need() {
    let Some(helm) = helm("the_notes_say_which_nodes_get_a_pod_and_what_the_pods_need") else { return };
    const NFD_ONLY: &str =
        r#"gpuNodes.labels=[{"key":"feature.node.kubernetes.io/pci-10de.present","value":"true"}]"#;
    const PROVIDER: &str =
        r#"gpuNodes.labels=[{"key":"cloud.google.com/gke-accelerator","value":"nvidia-l4"}]"#;
    const REFUSED: &str =
        "The API server refuses every pod that names a RuntimeClass the cluster does not have";
    const LEAVE_OUT: &str = "Where the NVIDIA runtime is containerd's default runtime and no such RuntimeClass exists, the pods are refused too: install or upgrade with --set runtimeClassName= to leave it out.";
    // (values, text expected, text not expected)
    let cases: &[(&[&str], &[&str], &[&str])] = &[
        (
            &[],
            &[
                "The DaemonSet nvlabel-nfd-nodefeature runs a pod on each node of arch amd64 or arm64 that has at least one of these labels (gpuNodes.labels):\n  feature.node.kubernetes.io/pci-10de.present=true\n",
                "\n  nvidia.com/gpu.present=true\n",
                "without NFD a node is admitted only once it has one of the others, e.g.:\n  kubectl label node NODE nvidia.com/gpu.present=true",
                "Its pods tolerate these taints: nvidia.com/gpu:NoSchedule, CriticalAddonsOnly (any effect), besides",
                "nvlabel's pods name the RuntimeClass nvidia (runtimeClassName), whose NVIDIA container runtime gives them the driver's NVML (NVIDIA_DRIVER_CAPABILITIES=utility).",
                REFUSED,
                "  kubectl get runtimeclass nvidia\n",
                LEAVE_OUT,
                "  kubectl -n nvlabel get daemonset nvlabel-nfd-nodefeature\n",
            ],
            &[],
        ),
        (
            &["--set", "mode=node", "--set-json", NFD_ONLY, "--set", "runtimeClassName=nvidia-cdi"],
            &[
                "The DaemonSet nvlabel-node runs a pod",
                "Node Feature Discovery (NFD) sets every one of these labels, so without NFD no node is admitted and the DaemonSet stays at 0 pods.",
                "name the RuntimeClass nvidia-cdi (runtimeClassName)",
                "  kubectl get runtimeclass nvidia-cdi\n",
            ],
            &["nvidia.com/gpu.present=true", "kubectl label node"],
        ),
        (
            &["--set-json", PROVIDER, "--set-json", "gpuNodes.arches=[]", "--set", "nodeSelector.pool=gpu"],
            &[
                "runs a pod on each node that has the nodeSelector labels pool=gpu and at least one of these labels (gpuNodes.labels):\n  cloud.google.com/gke-accelerator=nvidia-l4\n",
                "Node Feature Discovery sets none of these labels",
            ],
            &["of arch", "feature.node.kubernetes.io"],
        ),
        (
            &["--set-json", "gpuNodes.labels=[]"],
            &["runs a pod on every node of arch amd64 or arm64: gpuNodes.labels is empty"],
            &["Node Feature Discovery"],
        ),
        (
            &["--set-json", OWN],
            &["runs a pod on each node that your affinity.nodeAffinity admits."],
            &["gpuNodes.labels)"],
        ),
        (
            &[
                "--set-json",
                "affinity=null",
                "--set",
                "nodeSelector.pool=gpu",
                "--set-json",
                "tolerations=[]",
            ],
            &[
                "has no node affinity (affinity=null), so it runs a pod on every node that has the nodeSelector labels pool=gpu.",
                "Its pods tolerate no taint of their own",
            ],
            &["gpuNodes.labels)"],
        ),
        (
            &["--set", "runtimeClassName="],
            &[
                "nvlabel's pods name no RuntimeClass (runtimeClassName is empty), so they run under each node's default runtime.",
                "That must be the NVIDIA container runtime",
            ],
            &[REFUSED, "kubectl get runtimeclass"],
        ),
        (
            &["--set", "deviceDiscoveryStrategy=tegra"],
            &["gives them the CUDA driver and NVML (NVIDIA_DRIVER_CAPABILITIES=compute,utility)."],
            &[],
        ),
        (
            &["--set", "deviceDiscoveryStrategy=vfio"],
            &[
                "although the NVIDIA runtime injects nothing on a vfio node (NVIDIA_VISIBLE_DEVICES=void).",
                REFUSED,
                "Where these nodes have no NVIDIA runtime, install or upgrade with --set runtimeClassName= to leave it out",
            ],
            &[LEAVE_OUT],
        ),
        (
            &["--set", "deviceDiscoveryStrategy=vfio", "--set", "runtimeClassName="],
            &["name no RuntimeClass (runtimeClassName is empty) and need none"],
            &[REFUSED],
        ),
        (
            &["--set", "mode=job", "--set", "job.nodeName=gpu-node-1"],
            &[
                "The Job nvlabel-oneshot labels the node gpu-node-1 once.",
                "name the RuntimeClass nvidia",
                LEAVE_OUT,
                "  kubectl -n nvlabel get job nvlabel-oneshot\n",
            ],
            &["DaemonSet", "Its pods tolerate"],
        ),
    ];
    for (args, want, unwanted) in cases {
        let text = notes(&helm, args);
        for line in *want {
            assert!(text.contains(line), "{args:?}: {line:?} in {text}");
        }
        for line in *unwanted {
            assert!(!text.contains(line), "{args:?}: not {line:?} in {text}");
        }
    }
}
