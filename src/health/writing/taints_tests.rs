//! Which rules a set of faults asks for: the devices found by `uuid` and `parentUUID`, whatever
//! their names; what counts as the same rule; and the body a rule is applied with.

use super::*;
use crate::health::writing::taint_spec::{DeviceSelector, Taint};
use k8s_openapi::api::resource::v1::ResourceSlice;
use serde_json::json;

/// A slice as NVIDIA's driver publishes it: device names unlike `gpu-<i>`, a MIG-enabled GPU's
/// MIG devices with their parent's UUID.
fn slices() -> SliceState {
    let device = |name: &str, uuid: &str, parent: Option<&str>| {
        let mut a =
            json!({"type": {"string": if parent.is_some() {"mig"} else {"gpu"}}, "uuid": {"string": uuid}});
        if let Some(p) = parent {
            a["parentUUID"] = json!({"string": p});
        }
        json!({"name": name, "attributes": a})
    };
    let slice: ResourceSlice = serde_json::from_value(json!({
        "metadata": {"name": "node-1-gpu.nvidia.com-x1"},
        "spec": {"driver": DRIVER, "nodeName": "node-1", "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                device("gpu-12", "GPU-aaa", None),
                device("gpu-13", "GPU-bbb", None),
                device("gpu-13-mig-19-0-1", "MIG-b1", Some("GPU-bbb")),
                device("gpu-13-mig-19-1-1", "MIG-b2", Some("GPU-bbb")),
            ]}
    }))
    .unwrap();
    SliceState::Listed(BTreeMap::from([("s".to_string(), slice)]))
}

#[test]
fn a_faulty_gpu_taints_its_device_or_its_mig_devices_and_nothing_else() {
    let faulty = BTreeMap::from([("GPU-bbb".to_string(), "XidCriticalError")]);
    let got = desired("node-1", &slices(), &faulty, TaintEffect::NoSchedule);
    let names: Vec<&str> = got.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        ["nvlabel-gpu-13-mig-19-0-1.node-1", "nvlabel-gpu-13-mig-19-1-1.node-1", "nvlabel-gpu-13.node-1"]
    );
    let spec = &got["nvlabel-gpu-13-mig-19-0-1.node-1"];
    let some = |s: &str| Some(s.to_string());
    assert_eq!(
        spec.device_selector,
        DeviceSelector {
            driver: some("gpu.nvidia.com"),
            pool: some("node-1"),
            device: some("gpu-13-mig-19-0-1")
        }
    );
    assert_eq!(
        spec.taint,
        Taint {
            key: some("nvidia.com/gpu-health"),
            value: some("XidCriticalError"),
            effect: some("NoSchedule")
        }
    );
    let faulty = BTreeMap::from([("GPU-aaa".to_string(), "GpuLost")]);
    let got = desired("node-1", &slices(), &faulty, TaintEffect::NoExecute);
    assert_eq!(got.keys().collect::<Vec<_>>(), ["nvlabel-gpu-12.node-1"]);
    assert_eq!(got["nvlabel-gpu-12.node-1"].taint.effect.as_deref(), Some("NoExecute"));
    assert!(desired("node-1", &slices(), &BTreeMap::new(), TaintEffect::None).is_empty());
    assert!(desired("node-1", &SliceState::Unknown, &faulty, TaintEffect::None).is_empty());
    // Node node-1-x sees node-1's slice (its pool is not node-1-x's): no rule of its own there.
    assert!(desired("node-1-x", &slices(), &faulty, TaintEffect::None).is_empty());
}

/// Two nodes whose names are prefixes of each other: each name belongs to exactly one node, the
/// released version's names are still found after an upgrade, and a rule another node named so
/// it reads as this node's is not this node's.
#[test]
fn a_rule_name_tells_exactly_one_node_and_device() {
    let spec = |pool: &str, device: &str| DeviceSelector {
        driver: Some(DRIVER.into()),
        pool: Some(pool.into()),
        device: Some(device.into()),
    };
    assert_eq!(rule_name("gpu-3", "gpu-1-a"), "nvlabel-gpu-3.gpu-1-a");
    assert_ne!(rule_name("a-gpu-3", "gpu-1"), rule_name("gpu-3", "gpu-1-a"));
    assert!(owned("gpu-1-a", "nvlabel-gpu-3.gpu-1-a", &spec("gpu-1-a", "gpu-3")));
    assert!(owned("gpu-1-a", "nvlabel-gpu-1-a-gpu-3", &spec("gpu-1-a", "gpu-3")), "the released version's");
    // gpu-1's rules, however named, are not gpu-1-a's (the old policy let gpu-1 create this one).
    assert!(!owned("gpu-1-a", "nvlabel-gpu-1-a-gpu-3", &spec("gpu-1", "gpu-3")));
    assert!(!owned("gpu-1-a", "nvlabel-gpu-1-a-gpu-3", &spec("gpu-1", "a-gpu-3")));
    assert!(!owned("gpu-1", "nvlabel-gpu-1-a-gpu-3", &spec("gpu-1-a", "gpu-3")));
    assert!(!owned("gpu-1", "nvlabel-gpu-3.gpu-1-a", &spec("gpu-1-a", "gpu-3")));
    assert!(owned("gpu-1", "nvlabel-a-gpu-3.gpu-1", &spec("gpu-1", "a-gpu-3")));
    // A name not derived from the rule's own device is no one's.
    assert!(!owned("gpu-1", "nvlabel-gpu-4.gpu-1", &spec("gpu-1", "gpu-3")));
    assert!(!owned("gpu-1", "nvlabel-gpu-1-gpu-4", &spec("gpu-1", "gpu-3")));
    let no_device = DeviceSelector { device: None, ..spec("gpu-1", "gpu-3") };
    assert!(!owned("gpu-1", "nvlabel-gpu-3.gpu-1", &no_device));
}

/// The rule as the server returns it: what it adds (`timeAdded`) is no part of the spec, so the
/// rule is unchanged; any of the six fields nvlabel writes differing, or missing, is a change.
#[test]
fn a_rule_is_the_same_whatever_the_server_added() {
    let faulty = BTreeMap::from([("GPU-aaa".to_string(), "GpuLost")]);
    let want = desired("node-1", &slices(), &faulty, TaintEffect::NoSchedule)
        .remove("nvlabel-gpu-12.node-1")
        .unwrap();
    let mut server = serde_json::to_value(&want).unwrap();
    server["taint"]["timeAdded"] = json!("2026-11-25T00:00:00Z");
    let read = |v: &serde_json::Value| serde_json::from_value::<Spec>(v.clone()).unwrap();
    assert_eq!(read(&server), want);
    for field in [
        "/deviceSelector/driver",
        "/deviceSelector/pool",
        "/deviceSelector/device",
        "/taint/key",
        "/taint/value",
        "/taint/effect",
    ] {
        let mut changed = server.clone();
        *changed.pointer_mut(field).unwrap() = json!("other");
        assert_ne!(read(&changed), want, "{field} changed");
        let (parent, key) = field.rsplit_once('/').unwrap();
        changed.pointer_mut(parent).unwrap().as_object_mut().unwrap().remove(key);
        assert_ne!(read(&changed), want, "{field} missing");
    }
}

/// The typed rule is applied as the very bytes of the JSON value nvlabel built before it was
/// typed.
#[test]
fn the_typed_rule_sends_the_bytes_the_json_form_sent() {
    let resource = kube::api::ApiResource {
        group: "resource.k8s.io".into(),
        version: "v1beta2".into(),
        api_version: "resource.k8s.io/v1beta2".into(),
        kind: "DeviceTaintRule".into(),
        plural: "devicetaintrules".into(),
    };
    let spec = Spec::new(DRIVER, "node-1", "gpu-12", "GpuLost", TaintEffect::NoExecute.as_str());
    let name = rule_name("gpu-12", "node-1");
    let before = |labels: serde_json::Value| {
        json!({
            "apiVersion": "resource.k8s.io/v1beta2",
            "kind": "DeviceTaintRule",
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "deviceSelector": {"driver": DRIVER, "pool": "node-1", "device": "gpu-12"},
                "taint": {"key": KEY, "value": "GpuLost", "effect": "NoExecute"},
            },
        })
        .to_string()
    };
    let typed =
        serde_json::to_string(&crate::health::writing::taint_api::rule(&resource, "node-1", &name, &spec))
            .unwrap();
    let labels = json!({"app.kubernetes.io/managed-by": "nvlabel", NODE_LABEL: "node-1"});
    assert_eq!(typed, before(labels));
    // A node name too long for a label value: the node label is left out.
    let long = "n".repeat(64);
    let typed =
        serde_json::to_string(&crate::health::writing::taint_api::rule(&resource, &long, &name, &spec))
            .unwrap();
    assert_eq!(typed, before(json!({"app.kubernetes.io/managed-by": "nvlabel"})));
    // And the log lines show the selector and the taint as they always did.
    let old = serde_json::from_str::<serde_json::Value>(&before(json!({}))).unwrap();
    assert_eq!(spec.taint.to_string(), old["spec"]["taint"].to_string());
    assert_eq!(spec.device_selector.to_string(), old["spec"]["deviceSelector"].to_string());
}
