//! Builders shared by the labelers' unit tests: GFD's mock devices (its `NewFullGPU`,
//! `NewMigEnabledDevice`, `NewMigDevice`) and short ways to write sharing configs and label sets.

use super::Labels;
use crate::sharing::Sharing;
use crate::snapshot::{Gpu, Mig, MigDevice};

/// GFD's `NewFullGPU()`: MOCKMODEL, compute 8.0, 300 MiB, PCI class 0.
pub fn full() -> Gpu {
    Gpu {
        index: 0,
        name: "MOCKMODEL".into(),
        uuid: None,
        pci_bus_id: None,
        pci_device_id: None,
        pci_class: Some(0),
        memory_bytes: Some(300 << 20),
        compute_capability: [8, 0],
        mig: None,
        fabric: None,
        nvlink: None,
        pcie_max_generation: None,
        pcie_max_width: None,
        numa_node: None,
    }
}

/// GFD's `NewMigEnabledDevice(migs...)`: as `full()`, MIG enabled, compute 0.0.
pub fn mig_enabled(devices: Vec<MigDevice>) -> Gpu {
    Gpu { compute_capability: [0, 0], mig: Some(Mig { enabled: true, devices }), ..full() }
}

/// GFD's `NewMigDevice(gi, ci, gb)`: profile `<gi>g.<gb>gb`, memory `gb`, slices gi/ci, all else 0.
pub fn m(gi: u32, ci: u32, gb: u64) -> MigDevice {
    MigDevice {
        index: 0,
        uuid: None,
        profile: format!("{gi}g.{gb}gb"),
        gi_id: 0,
        ci_id: 0,
        gi_profile_id: 0,
        ci_profile_id: 0,
        memory_mib: gb,
        multiprocessors: 0,
        gpu_instance_slices: gi,
        compute_instance_slices: ci,
        copy_engines: 0,
        decoders: 0,
        encoders: 0,
        jpeg_decoders: 0,
        ofa: 0,
    }
}

/// The GPUs numbered 0, 1, ... in order, as the probe numbers them.
pub fn indexed(mut gpus: Vec<Gpu>) -> Vec<Gpu> {
    for (i, g) in gpus.iter_mut().enumerate() {
        g.index = i as u32;
    }
    gpus
}

/// Time-slicing of `(resource, replicas)`.
pub fn ts(resources: &[(&str, u32)]) -> Sharing {
    Sharing::time_slicing(resources)
}

/// Every shared resource renamed to `<name>.shared`.
pub fn renamed(mut s: Sharing) -> Sharing {
    for block in [&mut s.time_slicing, &mut s.mps].into_iter().flatten() {
        for r in &mut block.resources {
            r.rename = Some(format!("{}.shared", r.name));
        }
    }
    s
}

/// `"k=v"` pairs, prefixing `nvidia.com/`.
pub fn l(pairs: &[&str]) -> Labels {
    pairs
        .iter()
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap();
            (format!("nvidia.com/{k}"), v.to_string())
        })
        .collect()
}

/// The compute labels of `full()`.
pub const COMPUTE: [&str; 3] = ["gpu.compute.major=8", "gpu.compute.minor=0", "gpu.family=ampere"];

/// `l` of both lists.
pub fn plus(a: &[&str], b: &[&str]) -> Labels {
    l(&[a, b].concat())
}
