//! The Helm chart on every platform nvlabel finds GPUs on (docs/platforms.md): the GPU-node
//! terms in the node affinity (NFD's PCI labels, the GPU Operator's and upstream's, NFD's CPU
//! label of an NVIDIA SoC, the label set by hand), each leaving a node where the GPU Operator
//! pauses GPU clients; the device nodes' groups for a non-root pod on Jetson;
//! `deviceDiscoveryStrategy` in every mode reaching the container's flags and what it asks of the
//! NVIDIA runtime (NVML; the CUDA driver too for tegra; nothing on vfio nodes, which have no
//! driver), `cudaLibrary` reaching `--cuda-library`, and the values nvlabel would refuse refused
//! at install: a strategy it does not know, health on vfio nodes. Needs a Helm binary
//! (`NVLABEL_HELM`); without one each test skips with one line.

use crate::common;

use common::deploy_checks::{
    check_gpu_node_terms, check_locked_down, check_policy, check_rbac_exact, container_env, gpu_node_terms,
    settings_of, typed, Rendered, CLIENT_LABEL,
};
use common::helm::{helm, template, MODES};
use common::node_match::admits;
use nvlabel::probe::Strategy;
use std::path::PathBuf;

fn checked(helm: &PathBuf, args: &[&str]) -> Rendered {
    let label = args.join(" ");
    let docs = template(helm, "nvlabel", args).unwrap_or_else(|e| panic!("{label}: refused: {e}"));
    let r = typed(&label, &docs);
    check_locked_down(&label, &r);
    check_rbac_exact(&label, &r);
    check_policy(&label, &r);
    r
}

#[test]
fn the_daemonset_admits_gfds_gpu_nodes_tegra_included() {
    let Some(helm) = helm("the_daemonset_admits_gfds_gpu_nodes_tegra_included") else { return };
    for mode in MODES.into_iter().filter(|m| *m != "job") {
        let r = checked(&helm, &["--set", &format!("mode={mode}")]);
        let (what, _, pod) = &r.pods[0];
        check_gpu_node_terms(what, pod);
    }
}

#[test]
fn the_device_discovery_strategy_reaches_the_pod_and_the_runtime() {
    let Some(helm) = helm("the_device_discovery_strategy_reaches_the_pod_and_the_runtime") else { return };
    for mode in MODES {
        for strategy in ["auto", "nvml", "tegra", "vfio"] {
            let mode_arg = format!("mode={mode}");
            let strategy_arg = format!("deviceDiscoveryStrategy={strategy}");
            let r = checked(
                &helm,
                &["--set", &mode_arg, "--set", "job.nodeName=gpu-node-1", "--set", &strategy_arg],
            );
            let (what, ns, pod) = &r.pods[0];
            let c = &pod.containers[0];
            let settings = settings_of(what, ns, c);
            assert_eq!(settings.probe.strategy, Strategy::parse(strategy).unwrap(), "{what}");
            // auto is the binary's default: no flag for it, as for the other defaults.
            let flags = c.args.iter().flatten().filter(|a| a.starts_with("--device-discovery-strategy"));
            assert_eq!(flags.count(), usize::from(strategy != "auto"), "{what}");
            let env = container_env(c, ns);
            let runtime = ["NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"]
                .map(|k| env.get(k).map(String::as_str));
            let want = match strategy {
                "vfio" => [Some("void"), None],
                "tegra" => [Some("all"), Some("compute,utility")],
                _ => [Some("all"), Some("utility")],
            };
            assert_eq!(runtime, want, "{what}: what the NVIDIA runtime is asked for");
        }
    }
    // null removes the value: the binary's default, as without it.
    let r = checked(&helm, &["--set", "deviceDiscoveryStrategy=null"]);
    let (what, ns, pod) = &r.pods[0];
    assert_eq!(settings_of(what, ns, &pod.containers[0]).probe.strategy, Strategy::Auto);
    assert_eq!(container_env(&pod.containers[0], ns)["NVIDIA_DRIVER_CAPABILITIES"], "utility", "{what}");
    // The CUDA driver where the loader does not find it: the flag, else the binary's default.
    let jetpack = "/usr/lib/aarch64-linux-gnu/tegra/libcuda.so.1";
    let r = checked(
        &helm,
        &["--set", "deviceDiscoveryStrategy=tegra", "--set", &format!("cudaLibrary={jetpack}")],
    );
    let (what, ns, pod) = &r.pods[0];
    assert_eq!(
        settings_of(what, ns, &pod.containers[0]).probe.cuda_library,
        PathBuf::from(jetpack),
        "{what}"
    );
    let r = checked(&helm, &["--set", "deviceDiscoveryStrategy=tegra"]);
    let (what, ns, pod) = &r.pods[0];
    assert_eq!(
        settings_of(what, ns, &pod.containers[0]).probe.cuda_library,
        PathBuf::from("libcuda.so.1"),
        "{what}"
    );
    // Health on an integrated GPU is accepted: it reads what NVML answers there.
    let r = checked(&helm, &["--set", "deviceDiscoveryStrategy=tegra", "--set", "health.enabled=true"]);
    let (what, ns, pod) = &r.pods[0];
    let settings = settings_of(what, ns, &pod.containers[0]);
    assert!(settings.health.enabled, "{what}");
    assert_eq!(settings.probe.strategy, Strategy::Tegra, "{what}");
}

#[test]
fn strategies_nvlabel_refuses_are_refused_with_a_message_naming_them() {
    let Some(helm) = helm("strategies_nvlabel_refuses_are_refused_with_a_message_naming_them") else {
        return;
    };
    let cases: &[(&[&str], &str)] = &[
        (&["--set", "deviceDiscoveryStrategy=Tegra"], "/deviceDiscoveryStrategy"),
        (&["--set", "deviceDiscoveryStrategy="], "/deviceDiscoveryStrategy"),
        (&["--set", "cudaLibrary=lib/libcuda.so.1"], "/cudaLibrary"),
        (
            &["--set", "deviceDiscoveryStrategy=vfio", "--set", "health.enabled=true"],
            "health.enabled: with deviceDiscoveryStrategy=vfio the GPUs are bound to vfio-pci",
        ),
        (
            &["--set", "mode=node", "--set", "deviceDiscoveryStrategy=vfio", "--set", "health.enabled=true"],
            "health.enabled: with deviceDiscoveryStrategy=vfio",
        ),
    ];
    for (args, names) in cases {
        let err = template(&helm, "nvlabel", args).err().unwrap_or_else(|| panic!("{args:?} was accepted"));
        assert!(err.contains(names), "{args:?}: the message should name {names}: {err}");
    }
}

/// What a node is, its labels, and whether the default affinity admits it.
type Node = (&'static str, &'static [(&'static str, &'static str)], bool);

/// Upstream NFD's and the GPU Operator's NFD labels, a SoC, a node labelled by hand (WSL 2), and
/// the GPU Operator's client pause.
const NODES: &[Node] = &[
    (
        "upstream NFD, a display-class GPU",
        &[("feature.node.kubernetes.io/pci-0300_10de.present", "true"), ("kubernetes.io/arch", "amd64")],
        true,
    ),
    (
        "upstream NFD, a 3D-controller GPU",
        &[("feature.node.kubernetes.io/pci-0302_10de.present", "true"), ("kubernetes.io/arch", "arm64")],
        true,
    ),
    (
        "the Operator's NFD, clients allowed",
        &[
            ("feature.node.kubernetes.io/pci-10de.present", "true"),
            ("nvidia.com/gpu.deploy.client", "true"),
            ("kubernetes.io/arch", "amd64"),
        ],
        true,
    ),
    (
        "a driver upgrade",
        &[
            ("feature.node.kubernetes.io/pci-10de.present", "true"),
            ("nvidia.com/gpu.deploy.client", "paused-for-driver-upgrade"),
            ("kubernetes.io/arch", "amd64"),
        ],
        false,
    ),
    (
        "a MIG change",
        &[
            ("feature.node.kubernetes.io/pci-0302_10de.present", "true"),
            ("nvidia.com/gpu.deploy.client", "paused-for-mig-change"),
            ("kubernetes.io/arch", "amd64"),
        ],
        false,
    ),
    (
        "clients off",
        &[
            ("nvidia.com/gpu.present", "true"),
            ("nvidia.com/gpu.deploy.client", "false"),
            ("kubernetes.io/arch", "amd64"),
        ],
        false,
    ),
    (
        "clients label empty",
        &[
            ("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"),
            ("nvidia.com/gpu.deploy.client", ""),
            ("kubernetes.io/arch", "arm64"),
        ],
        false,
    ),
    (
        "a Jetson",
        &[("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"), ("kubernetes.io/arch", "arm64")],
        true,
    ),
    ("WSL 2, labelled by hand", &[("nvidia.com/gpu.present", "true"), ("kubernetes.io/arch", "amd64")], true),
    (
        "no GPU",
        &[("feature.node.kubernetes.io/pci-0300_1af4.present", "true"), ("kubernetes.io/arch", "amd64")],
        false,
    ),
    (
        "an NVIDIA GPU on an arch without an image",
        &[("feature.node.kubernetes.io/pci-0302_10de.present", "true"), ("kubernetes.io/arch", "ppc64le")],
        false,
    ),
];

#[test]
fn the_daemonset_runs_on_every_nfds_gpu_nodes_and_leaves_those_the_operator_pauses() {
    let Some(helm) = helm("the_daemonset_runs_on_every_nfds_gpu_nodes_and_leaves_those_the_operator_pauses")
    else {
        return;
    };
    for mode in MODES.into_iter().filter(|m| *m != "job") {
        let r = checked(&helm, &["--set", &format!("mode={mode}")]);
        let (what, _, pod) = &r.pods[0];
        for (node, labels, want) in NODES {
            assert_eq!(admits(pod, labels), *want, "{what}: {node} {labels:?}");
        }
    }
    // Off: a paused node keeps its pod (a cluster whose Operator must not evict it).
    let r = checked(&helm, &["--set", "gpuOperator.respectClientPause=false"]);
    let (what, _, pod) = &r.pods[0];
    for (node, labels, want) in NODES {
        let paused = labels.iter().any(|(k, v)| *k == CLIENT_LABEL && *v != "true");
        assert_eq!(admits(pod, labels), *want || paused, "{what}: {node} {labels:?}");
    }
    assert!(!gpu_node_terms(pod).concat().iter().any(|e| e.contains(CLIENT_LABEL)), "{what}");
    // Labels of the user's own: each a term, the pause and the arch added to it.
    let own = r#"gpuNodes.labels=[{"key":"cloud.example.com/accelerator","value":"nvidia-l4"}]"#;
    let r = checked(&helm, &["--set-json", own]);
    let (what, _, pod) = &r.pods[0];
    let l4 = ("cloud.example.com/accelerator", "nvidia-l4");
    assert!(admits(pod, &[l4, ("kubernetes.io/arch", "amd64")]), "{what}");
    assert!(!admits(
        pod,
        &[l4, (CLIENT_LABEL, "paused-for-driver-upgrade"), ("kubernetes.io/arch", "amd64")]
    ));
    assert!(!admits(pod, &[("nvidia.com/gpu.present", "true"), ("kubernetes.io/arch", "amd64")]), "{what}");
    // An affinity of the user's own wins, as given.
    let given = r#"affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"gpu","operator":"In","values":["yes"]}]}]}}}"#;
    let r = checked(&helm, &["--set-json", given]);
    let (what, _, pod) = &r.pods[0];
    assert_eq!(gpu_node_terms(pod), [["gpu=yes"]], "{what}");
}

#[test]
fn a_non_root_pod_gets_the_groups_of_the_gpu_device_nodes() {
    let Some(helm) = helm("a_non_root_pod_gets_the_groups_of_the_gpu_device_nodes") else { return };
    let cases: &[(&[&str], Option<&[i64]>)] = &[
        (&[], None),
        (&["--set", "deviceDiscoveryStrategy=nvml"], None),
        // video, GID 44 on L4T and Ubuntu: Jetson's, IGX's and Thor's device nodes are 0660.
        (&["--set", "deviceDiscoveryStrategy=tegra"], Some(&[44])),
        (&["--set", "deviceDiscoveryStrategy=tegra", "--set", "mode=node"], Some(&[44])),
        (
            &[
                "--set",
                "deviceDiscoveryStrategy=tegra",
                "--set",
                "mode=job",
                "--set",
                "job.nodeName=gpu-node-1",
            ],
            Some(&[44]),
        ),
        (&["--set", "deviceDiscoveryStrategy=tegra", "--set-json", "supplementalGroups=[]"], None),
        (
            &["--set", "deviceDiscoveryStrategy=tegra", "--set-json", "supplementalGroups=[44,992]"],
            Some(&[44, 992]),
        ),
        (&["--set-json", "supplementalGroups=[44]"], Some(&[44])),
    ];
    for (args, want) in cases {
        let r = checked(&helm, args);
        let (what, _, pod) = &r.pods[0];
        let groups = pod.security_context.as_ref().and_then(|s| s.supplemental_groups.clone());
        assert_eq!(groups.as_deref(), *want, "{what}");
    }
    for bad in ["supplementalGroups=[-1]", "supplementalGroups=[44,44]", r#"supplementalGroups=["video"]"#] {
        let err = template(&helm, "nvlabel", &["--set-json", bad])
            .err()
            .unwrap_or_else(|| panic!("{bad} was accepted"));
        assert!(err.contains("/supplementalGroups"), "{bad}: {err}");
    }
}
