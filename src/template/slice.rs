//! The ResourceSlice a node of a DRA pool will publish under NVIDIA's DRA driver
//! (`gpu.nvidia.com`): one device per GPU, or per MIG device where the GPU has MIG on, with the
//! attributes and capacity that driver gives them. What only the node knows (its name, the
//! devices' UUIDs and PCIe roots) is not guessed: the slice names the node `--name` and leaves
//! the UUIDs out, so an autoscaler that synthesises slices (cluster-api) sees what it will get.

use crate::snapshot::{Gpu, MigDevice, Snapshot};
use serde_json::{json, Map, Value};

/// The DRA driver whose slices a DRA pool's nodes publish.
pub const DRA_DRIVER: &str = "gpu.nvidia.com";

/// The slice of a node like `node` whose pool (and node) is called `name`, as JSON.
pub fn of(node: &Snapshot, name: &str) -> Value {
    let devices: Vec<Value> = node
        .gpus
        .iter()
        .flat_map(|g| match g.mig.as_ref().filter(|m| m.enabled) {
            Some(mig) => mig.devices.iter().map(|d| mig_device(node, g, d)).collect::<Vec<_>>(),
            None => vec![gpu(node, g)],
        })
        .collect();
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": format!("{name}-{DRA_DRIVER}")},
        "spec": {
            "driver": DRA_DRIVER,
            "nodeName": name,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    })
}

/// A whole GPU.
fn gpu(node: &Snapshot, g: &Gpu) -> Value {
    let mut attributes = common(node, g);
    attributes.insert("type".into(), json!({"string": "gpu"}));
    attributes.insert("index".into(), json!({"int": g.index}));
    let mut capacity = Map::new();
    if let Some(bytes) = g.memory_bytes {
        capacity.insert("memory".into(), json!({"value": format!("{}Mi", bytes / (1024 * 1024))}));
    }
    json!({"name": format!("gpu-{}", g.index), "attributes": attributes, "capacity": capacity})
}

/// A MIG device of GPU `g`.
fn mig_device(node: &Snapshot, g: &Gpu, d: &MigDevice) -> Value {
    let mut attributes = common(node, g);
    attributes.insert("type".into(), json!({"string": "mig"}));
    attributes.insert("profile".into(), json!({"string": d.profile}));
    attributes.insert("parentIndex".into(), json!({"int": g.index}));
    attributes.insert("index".into(), json!({"int": d.index}));
    let capacity = json!({
        "memory": {"value": format!("{}Mi", d.memory_mib)},
        "multiprocessors": {"value": d.multiprocessors.to_string()},
        "copyEngines": {"value": d.copy_engines.to_string()},
        "decoders": {"value": d.decoders.to_string()},
        "encoders": {"value": d.encoders.to_string()},
        "jpegEngines": {"value": d.jpeg_decoders.to_string()},
        "ofaEngines": {"value": d.ofa.to_string()},
    });
    json!({"name": format!("gpu-{}-mig-{}", g.index, d.index), "attributes": attributes, "capacity": capacity})
}

/// What a GPU and its MIG devices share: the product, its architecture and the versions.
fn common(node: &Snapshot, g: &Gpu) -> Map<String, Value> {
    let [major, minor] = g.compute_capability;
    let mut a = Map::new();
    a.insert("productName".into(), json!({"string": g.name}));
    a.insert("architecture".into(), json!({"string": architecture(crate::labels::family(major, minor))}));
    a.insert("cudaComputeCapability".into(), json!({"version": format!("{major}.{minor}.0")}));
    if let Some(v) = node.driver_version.as_deref().and_then(semver) {
        a.insert("driverVersion".into(), json!({"version": v}));
    }
    if let Some(v) = node.cuda_driver_version.filter(|v| *v > 0) {
        a.insert("cudaDriverVersion".into(), json!({"version": format!("{}.{}.0", v / 1000, v % 1000 / 10)}));
    }
    a
}

/// GFD's family as the DRA driver spells the architecture (`ada-lovelace` is `Ada Lovelace`).
fn architecture(family: &str) -> String {
    let words = family.split('-').map(|w| {
        let mut c = w.chars();
        c.next().map(|f| f.to_uppercase().chain(c).collect::<String>()).unwrap_or_default()
    });
    words.collect::<Vec<_>>().join(" ")
}

/// A driver version as a semantic version (`535.104.05` is `535.104.5`; `550.54` is `550.54.0`);
/// `None` where it is not one.
fn semver(driver: &str) -> Option<String> {
    let parts: Vec<u64> = driver.split('.').map(|p| p.parse().ok()).collect::<Option<_>>()?;
    match parts[..] {
        [major, minor] => Some(format!("{major}.{minor}.0")),
        [major, minor, patch] => Some(format!("{major}.{minor}.{patch}")),
        _ => None,
    }
}
