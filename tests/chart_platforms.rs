//! The Helm chart on every platform nvlabel finds GPUs on (docs/platforms.md): GFD's three
//! GPU-node terms in the node affinity (NFD's PCI label, NFD's CPU label of an NVIDIA SoC, the
//! label set by hand), `deviceDiscoveryStrategy` in every mode reaching the container's flags and
//! what it asks of the NVIDIA runtime (NVML; the CUDA driver too for tegra; nothing on vfio nodes,
//! which have no driver), `cudaLibrary` reaching `--cuda-library`, and the values nvlabel would
//! refuse refused at install: a strategy it does not know, health on vfio nodes. Needs a Helm binary (`NVLABEL_HELM`); without one each
//! test skips with one line.

mod common;

use common::deploy_checks::{
    check_gpu_node_terms, check_locked_down, check_policy, check_rbac_exact, container_env, settings_of,
    typed, Rendered,
};
use common::helm::{helm, template, MODES};
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
            assert_eq!(settings.device_discovery_strategy, Strategy::parse(strategy).unwrap(), "{what}");
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
    assert_eq!(settings_of(what, ns, &pod.containers[0]).device_discovery_strategy, Strategy::Auto);
    assert_eq!(container_env(&pod.containers[0], ns)["NVIDIA_DRIVER_CAPABILITIES"], "utility", "{what}");
    // The CUDA driver where the loader does not find it: the flag, else the binary's default.
    let jetpack = "/usr/lib/aarch64-linux-gnu/tegra/libcuda.so.1";
    let r = checked(
        &helm,
        &["--set", "deviceDiscoveryStrategy=tegra", "--set", &format!("cudaLibrary={jetpack}")],
    );
    let (what, ns, pod) = &r.pods[0];
    assert_eq!(settings_of(what, ns, &pod.containers[0]).cuda_library, PathBuf::from(jetpack), "{what}");
    let r = checked(&helm, &["--set", "deviceDiscoveryStrategy=tegra"]);
    let (what, ns, pod) = &r.pods[0];
    assert_eq!(
        settings_of(what, ns, &pod.containers[0]).cuda_library,
        PathBuf::from("libcuda.so.1"),
        "{what}"
    );
    // Health on an integrated GPU is accepted: it reads what NVML answers there.
    let r = checked(&helm, &["--set", "deviceDiscoveryStrategy=tegra", "--set", "health.enabled=true"]);
    let (what, ns, pod) = &r.pods[0];
    let settings = settings_of(what, ns, &pod.containers[0]);
    assert!(settings.health.enabled, "{what}");
    assert_eq!(settings.device_discovery_strategy, Strategy::Tegra, "{what}");
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
