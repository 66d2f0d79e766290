//! Which rules a set of faults asks for: the devices found by `uuid` and `parentUUID`, whatever
//! their names; and what counts as the same rule.

use super::*;
use k8s_openapi::api::resource::v1::ResourceSlice;

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
    assert_eq!(
        spec["deviceSelector"],
        json!({"driver": "gpu.nvidia.com", "pool": "node-1", "device": "gpu-13-mig-19-0-1"})
    );
    assert_eq!(
        spec["taint"],
        json!({"key": "nvidia.com/gpu-health", "value": "XidCriticalError", "effect": "NoSchedule"})
    );
    let faulty = BTreeMap::from([("GPU-aaa".to_string(), "GpuLost")]);
    let got = desired("node-1", &slices(), &faulty, TaintEffect::NoExecute);
    assert_eq!(got.keys().collect::<Vec<_>>(), ["nvlabel-gpu-12.node-1"]);
    assert_eq!(got["nvlabel-gpu-12.node-1"]["taint"]["effect"], "NoExecute");
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
    let spec = |pool: &str, device: &str| json!({"deviceSelector": {"driver": DRIVER, "pool": pool, "device": device}});
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
    assert!(!owned("gpu-1", "nvlabel-gpu-3.gpu-1", &json!({"deviceSelector": {"pool": "gpu-1"}})));
}

#[test]
fn a_rule_is_the_same_whatever_the_server_added() {
    let faulty = BTreeMap::from([("GPU-aaa".to_string(), "GpuLost")]);
    let want = desired("node-1", &slices(), &faulty, TaintEffect::NoSchedule)
        .remove("nvlabel-gpu-12.node-1")
        .unwrap();
    let mut server = want.clone();
    server["taint"]["timeAdded"] = json!("2026-11-25T00:00:00Z");
    assert!(same(&server, &want));
    server["taint"]["value"] = json!("RowRemapFailure");
    assert!(!same(&server, &want));
    let mut moved = want.clone();
    moved["deviceSelector"]["pool"] = json!("node-2");
    assert!(!same(&moved, &want));
}
