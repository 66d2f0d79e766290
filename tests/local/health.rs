//! `nvlabel health` (node-problem-detector's custom plugin protocol) and the health flags, on
//! the fake NVML with health keys and a fake sysfs PCI bus.

use crate::common;

use common::*;
use std::path::Path;

/// A sysfs tree with `gpus` NVIDIA GPUs on the PCI bus, plus an NVSwitch and a GPU's audio
/// function (NVIDIA devices that are not GPUs).
pub fn sysfs(dir: &Path, gpus: u32) -> String {
    let dev = |addr: &str, vendor: &str, class: &str| {
        let d = dir.join("bus/pci/devices").join(addr);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("vendor"), format!("{vendor}\n")).unwrap();
        std::fs::write(d.join("class"), format!("{class}\n")).unwrap();
    };
    for g in 0..gpus {
        dev(&format!("0000:{:02x}:00.0", g + 1), "0x10de", "0x030200");
    }
    dev("0000:01:00.1", "0x10de", "0x040300");
    dev("0000:40:00.0", "0x10de", "0x068000");
    dev("0000:00:00.0", "0x8086", "0x060000");
    dir.display().to_string()
}

fn machine_with(dir: &Path, edit: impl Fn(String) -> String) -> std::path::PathBuf {
    let text = std::fs::read_to_string(repo().join("testdata/health/h100x2.yaml")).unwrap();
    let path = dir.join("machine.yaml");
    std::fs::write(&path, edit(text)).unwrap();
    path
}

fn health(dir: &Path, machine: Option<&Path>, pci_gpus: u32) -> (i32, String, String) {
    let root = sysfs(&dir.join("sys"), pci_gpus);
    let mut cmd = nvlabel(None);
    cmd.arg("health").env("NVLABEL_SYSFS_ROOT", root);
    if let Some(m) = machine {
        cmd.env("FAKE_NVML_FIXTURE", m);
    }
    run(&mut cmd)
}

#[test]
fn healthy_gpus_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    let m = machine_with(dir.path(), |t| t);
    let (code, out, err) = health(dir.path(), Some(&m), 2);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        out,
        "GpusHealthy: 2 GPUs healthy\n\
         GPU 0 GPU-a1b2c3d4-0000-4000-8000-000000000000: healthy\n\
         GPU 1 GPU-a1b2c3d4-0001-4000-8000-000000000001: healthy\n"
    );
}

#[test]
fn each_fault_a_look_can_see_exits_1_and_names_the_gpu() {
    let cases: [(&str, &str, &str); 4] = [
        (
            "uncorrected_volatile: 0, corrected_aggregate",
            "uncorrected_volatile: 3, corrected_aggregate",
            "UncorrectedEccErrors",
        ),
        ("retired_pages_pending: false", "retired_pages_pending: true", "RetiredPagesPending"),
        ("pending: false, failure: false", "pending: true, failure: false", "RemappedRowsPending"),
        ("pending: false, failure: false", "pending: false, failure: true", "RemappedRowsFailure"),
    ];
    for (from, to, reason) in cases {
        let dir = tempfile::tempdir().unwrap();
        // Only GPU 1 (the second occurrence) gets the fault.
        let m = machine_with(dir.path(), |t| {
            let at = t.rfind(from).unwrap();
            format!("{}{to}{}", &t[..at], &t[at + from.len()..])
        });
        let (code, out, err) = health(dir.path(), Some(&m), 2);
        assert_eq!(code, 1, "{reason}: {out}{err}");
        assert!(
            out.starts_with(&format!(
                "{reason}: GPU 1 (GPU-a1b2c3d4-0001-4000-8000-000000000001): {reason}, "
            )),
            "{out}"
        );
        assert!(out.contains("GPU 0 GPU-a1b2c3d4-0000-4000-8000-000000000000: healthy\n"), "{out}");
        assert!(out.ends_with("GPU 1 GPU-a1b2c3d4-0001-4000-8000-000000000001: fault\n"), "{out}");
    }
}

#[test]
fn a_gpu_on_the_pci_bus_that_nvml_does_not_see_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let m = machine_with(dir.path(), |t| t);
    let (code, out, _) = health(dir.path(), Some(&m), 3);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.starts_with(
            "GpuMissing: node: GpuMissing, NVML sees 2 GPUs, the PCI bus has 3, action: reboot the node\n"
        ),
        "{out}"
    );
}

#[test]
fn fewer_gpus_than_expected_exits_1_and_as_many_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let m = machine_with(dir.path(), |t| t);
    let root = sysfs(&dir.path().join("sys"), 2);
    let look = |expected: &str| {
        let mut cmd = nvlabel(None);
        cmd.args(["health", &format!("--health-expected-gpus={expected}")])
            .env("NVLABEL_SYSFS_ROOT", &root)
            .env("FAKE_NVML_FIXTURE", &m);
        run(&mut cmd)
    };
    let (code, out, err) = look("8");
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.starts_with("GpuCountBelowExpected: node: GpuCountBelowExpected, NVML sees 2 GPUs, the node should have 8, action: reboot the node\n"),
        "{out}"
    );
    assert_eq!(look("2").0, 0);
    let (code, _, err) = look("0");
    assert_eq!(code, 2, "a count of 0 is a usage error: {err}");
    assert!(err.contains("--health-expected-gpus") && err.contains("\"0\""), "{err}");
}

#[test]
fn without_nvml_the_state_is_unknown_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, _) = health(dir.path(), None, 2);
    assert_eq!(code, 2, "{out}");
    assert!(out.starts_with("GPU health unknown: NVML cannot report it:"), "{out}");
}

#[test]
fn health_needs_api_publishing_and_says_so() {
    let (code, _, err) =
        run(nvlabel(Some("t4")).args(["--health", "--output-file", "", "--use-node-feature-api=false"]));
    assert_eq!(code, 2, "a bad configuration, as every one: {err}");
    assert!(err.contains("--health publishes a Node condition"), "{err}");
    // A bad flag value is a usage error: exit 2, as for every flag.
    let (code, _, err) = run(nvlabel(Some("t4")).args(["--health", "--health-ignore-xids=13,abc"]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--health-ignore-xids") && err.contains("\"abc\""), "{err}");
}

/// The RBAC rules of `kind`/`name` in a rendered overlay, as (groups, resources, verbs).
fn rules(docs: &[serde_json::Value], kind: &str, name: &str) -> Vec<(String, String, String)> {
    let role = docs.iter().find(|d| d["kind"] == kind && d["metadata"]["name"] == name).unwrap();
    let mut out = Vec::new();
    for r in role["rules"].as_array().unwrap() {
        for g in r["apiGroups"].as_array().unwrap() {
            for res in r["resources"].as_array().unwrap() {
                for v in r["verbs"].as_array().unwrap() {
                    out.push((
                        g.as_str().unwrap().into(),
                        res.as_str().unwrap().into(),
                        v.as_str().unwrap().into(),
                    ));
                }
            }
        }
    }
    out
}

/// The static health manifests (the chart rendered with health.enabled=true by deploy/render.sh;
/// tests/local/chart.rs fails while they are stale; tests/local/chart_values.rs checks other health values).
#[test]
fn the_health_manifests_grant_exactly_what_health_calls_and_turn_it_on() {
    use common::deploy_checks::{check_locked_down, check_policy, check_rbac_exact, typed};
    use common::manifests::{deploy, render, HEALTH};
    let s = |a: &str, b: &str, c: &str| (a.to_string(), b.to_string(), c.to_string());
    for (overlay, _) in HEALTH {
        let docs = render(&deploy().join(overlay));
        // Exactly the calls of the code's lists (health's included), the health policy
        // following the pod's condition type, no host path.
        let typed_docs = typed(overlay, &docs);
        check_rbac_exact(overlay, &typed_docs);
        check_policy(overlay, &typed_docs);
        check_locked_down(overlay, &typed_docs);
        assert_eq!(
            rules(&docs, "ClusterRole", "nvlabel-health"),
            vec![
                s("", "nodes", "get"),
                s("", "nodes", "list"),
                s("", "nodes", "watch"),
                s("", "nodes/status", "patch")
            ],
            "{overlay}"
        );
        let role = docs
            .iter()
            .find(|d| d["kind"] == "Role" && d["metadata"]["name"] == "nvlabel-health-events")
            .unwrap();
        assert_eq!(role["metadata"]["namespace"], "default", "Node events live in default");
        assert_eq!(
            rules(&docs, "Role", "nvlabel-health-events"),
            vec![s("events.k8s.io", "events", "create"), s("events.k8s.io", "events", "patch")]
        );
        let ds = docs.iter().find(|d| d["kind"] == "DaemonSet").unwrap();
        let args: Vec<&str> = ds["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert!(args.contains(&"--health"), "{overlay}: {args:?}");
        let policy = docs
            .iter()
            .find(|d| {
                d["kind"] == "ValidatingAdmissionPolicy" && d["metadata"]["name"] == "nvlabel-node-health"
            })
            .unwrap();
        assert_eq!(
            policy["spec"]["matchConstraints"]["resourceRules"][0]["resources"],
            serde_json::json!(["nodes/status"])
        );
        assert!(docs.iter().any(|d| d["kind"] == "ValidatingAdmissionPolicyBinding"
            && d["spec"]["policyName"] == "nvlabel-node-health"));
    }
    // Without health, no status access at all.
    for overlay in ["node", "nfd-nodefeature"] {
        let docs = render(&deploy().join(overlay));
        assert!(!docs.iter().any(|d| d.to_string().contains("nodes/status")), "{overlay}");
    }
}
