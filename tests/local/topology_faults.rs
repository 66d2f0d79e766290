//! The fault matrix of the topology labels: every NVML error injected into every topology call,
//! on GPU 1 (or the node), with `--extended-labels`. Each case checks: exit 0, both GPUs still
//! labelled, exactly the labels that call feeds left out (never a guessed value), every other
//! label as on the healthy machine, and the failing call named in the log (a `NOT_SUPPORTED`
//! answer is not a failure: it says the feature is not there).

use crate::common;

use common::label_rules;
use common::*;
use std::collections::BTreeMap;

const ERRORS: [&str; 9] = NVML_ERRORS;

/// The labels of the healthy machine that the topology labels add.
const HEALTHY: [(&str, &str); 9] = [
    ("gpu.nvlink.version", "3.0"),
    ("gpu.nvlink.links", "12"),
    ("gpu.nvlink.nvswitch", "false"),
    ("gpu.p2p", "nvlink"),
    ("gpu.pcie.generation", "4"),
    ("gpu.pcie.width", "16"),
    ("gpu.numa-nodes", "2"),
    ("cc.capable", "true"),
    ("gpu.count", "2"),
];

/// The labels a fault in `function` takes away.
fn lost(function: &str, error: &str) -> &'static [&'static str] {
    let not_supported = error == "not_supported";
    match function {
        // NOT_SUPPORTED on link 0: GPU 1 has no NVLink, unlike its twin, so nothing is trusted.
        "nvmlDeviceGetNvLinkState" if not_supported => {
            &["gpu.nvlink.version", "gpu.nvlink.links", "gpu.nvlink.nvswitch", "gpu.p2p"]
        }
        // Its links are unknown; the version was read by its own call.
        "nvmlDeviceGetNvLinkState" => &["gpu.nvlink.links", "gpu.nvlink.nvswitch", "gpu.p2p"],
        "nvmlDeviceGetNvLinkVersion" => &["gpu.nvlink.version"],
        // The far ends of GPU 1's links are unknown, but GPU 0's links still prove the pair.
        "nvmlDeviceGetNvLinkRemoteDeviceType" | "nvmlDeviceGetNvLinkRemotePciInfo_v2" if not_supported => {
            &["gpu.nvlink.links", "gpu.nvlink.nvswitch"]
        }
        "nvmlDeviceGetNvLinkRemoteDeviceType" | "nvmlDeviceGetNvLinkRemotePciInfo_v2" => {
            &["gpu.nvlink.links", "gpu.nvlink.nvswitch", "gpu.p2p"]
        }
        "nvmlDeviceGetMaxPcieLinkGeneration" => &["gpu.pcie.generation"],
        "nvmlDeviceGetMaxPcieLinkWidth" => &["gpu.pcie.width"],
        "nvmlDeviceGetNumaNodeId" => &["gpu.numa-nodes"],
        "nvmlSystemGetConfComputeCapabilities" => &["cc.capable"],
        f => panic!("no expectation for {f}"),
    }
}

const FUNCTIONS: [(&str, bool); 8] = [
    ("nvmlDeviceGetNvLinkState", true),
    ("nvmlDeviceGetNvLinkVersion", true),
    ("nvmlDeviceGetNvLinkRemoteDeviceType", true),
    ("nvmlDeviceGetNvLinkRemotePciInfo_v2", true),
    ("nvmlDeviceGetMaxPcieLinkGeneration", true),
    ("nvmlDeviceGetMaxPcieLinkWidth", true),
    ("nvmlDeviceGetNumaNodeId", true),
    ("nvmlSystemGetConfComputeCapabilities", false),
];

fn run_with(fixture: &std::path::Path) -> (Option<i32>, BTreeMap<String, String>, String) {
    let out = nvlabel(None)
        .env("FAKE_NVML_FIXTURE", fixture)
        .args(PRINT)
        .arg("--extended-labels")
        .output()
        .unwrap();
    let labels = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim_start_matches("nvidia.com/").to_string(), v.to_string()))
        .collect();
    (out.status.code(), labels, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn every_error_in_every_topology_call() {
    let dir = tempfile::tempdir().unwrap();
    // Two A100 PCIe cards joined by an NVLink bridge, on a CC-capable host.
    let healthy = test_machine("a100-pcie-nvlink-pair-cc");
    let machine = std::fs::read_to_string(&healthy).unwrap();
    let (code, base, stderr) = run_with(&healthy);
    assert_eq!(code, Some(0), "{stderr}");
    for (k, v) in HEALTHY {
        assert_eq!(base.get(k).map(String::as_str), Some(v), "healthy machine: {k}");
    }
    let mut failures = Vec::new();
    for (function, on_gpu) in FUNCTIONS {
        for error in ERRORS {
            let device = if on_gpu { "\n    device: \"1\"" } else { "" };
            let fixture = dir.path().join(format!("{function}-{error}.yaml"));
            let faults = format!("faults:\n  - function: {function}{device}\n    error: {error}\n");
            std::fs::write(&fixture, format!("{machine}{faults}")).unwrap();
            let case = format!("{function} -> {error}");
            let (code, got, stderr) = run_with(&fixture);
            if code != Some(0) {
                failures.push(format!("{case}: exit {code:?}\n{stderr}"));
                continue;
            }
            for (k, v) in &got {
                if !label_rules::key_ok(&format!("nvidia.com/{k}")) || !label_rules::value_ok(v) {
                    failures.push(format!("{case}: invalid label {k}={v}"));
                }
            }
            let gone = lost(function, error);
            for (k, v) in &base {
                let want = (!gone.contains(&k.as_str())).then_some(v);
                if got.get(k) != want {
                    failures.push(format!("{case}: {k} = {:?}, expected {want:?}", got.get(k)));
                }
            }
            if let Some(extra) = got.keys().find(|k| !base.contains_key(*k)) {
                failures.push(format!("{case}: a label the healthy machine lacks: {extra}"));
            }
            // The same wording as the probe's other calls, not nvml-wrapper's misspelt text.
            if error == "gpu_is_lost" && !stderr.contains("become inaccessible") {
                failures
                    .push(format!("{case}: the log does not say the GPU has become inaccessible:\n{stderr}"));
            }
            if error != "not_supported" && !stderr.contains(function) {
                failures.push(format!("{case}: the log does not name {function}:\n{stderr}"));
            }
        }
    }
    assert!(failures.is_empty(), "{} cases failed:\n{}", failures.len(), failures.join("\n"));
}
