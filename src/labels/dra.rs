//! The DRA label profile (`--allocation-mode dra`): on a node whose GPUs are handed out by a DRA
//! driver, sharing and MIG are claimed per pod, so every label that describes how the device
//! plugin would slice the GPUs (`gpu.replicas`, `gpu.sharing-strategy`, the `-SHARED` and MIG
//! products, `mps.capable`, `mig.strategy`, `mig-<profile>.*`) would be untrue there. What is left
//! describes the physical GPUs, whatever MIG or a sharing config say, plus `gpu.present`, which
//! the DRA driver's kubelet plugin is placed by where NFD's PCI labels are absent.

use super::{key, resource, LabelConfig, Labels, MigStrategy};
use crate::sharing::Sharing;

/// Which label set a pass computes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Profile {
    /// GFD's labels, byte for byte.
    #[default]
    DevicePlugin,
    /// Physical facts only (this module).
    Dra,
}

/// `--allocation-mode`: a profile, or `auto` (DRA while the node has a `gpu.nvidia.com`
/// ResourceSlice).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum AllocationMode {
    /// GFD's labels.
    #[default]
    DevicePlugin,
    /// The DRA profile.
    Dra,
    /// Decided per pass from this node's ResourceSlices.
    Auto,
}

impl AllocationMode {
    /// From its flag spelling.
    pub fn parse(s: &str) -> Option<AllocationMode> {
        <AllocationMode as clap::ValueEnum>::from_str(s, false).ok()
    }

    /// The flag spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            AllocationMode::DevicePlugin => "device-plugin",
            AllocationMode::Dra => "dra",
            AllocationMode::Auto => "auto",
        }
    }

    /// The profile this mode fixes; `None` for `auto`, which the node's slices decide.
    pub fn fixed(self) -> Option<Profile> {
        match self {
            AllocationMode::DevicePlugin => Some(Profile::DevicePlugin),
            AllocationMode::Dra => Some(Profile::Dra),
            AllocationMode::Auto => None,
        }
    }
}

impl From<Profile> for AllocationMode {
    fn from(p: Profile) -> AllocationMode {
        match p {
            Profile::DevicePlugin => AllocationMode::DevicePlugin,
            Profile::Dra => AllocationMode::Dra,
        }
    }
}

/// Keys of the device-plugin profile that describe sharing or the MIG strategy, not the GPUs.
const NOT_PHYSICAL: [&str; 2] = ["gpu.replicas", "gpu.sharing-strategy"];

/// The DRA profile's resource labels: no sharing and no MIG strategy, so count, product and
/// memory of the physical GPUs (its place in the order is `labelers.rs`').
pub fn physical(gpus: &[crate::snapshot::Gpu], warnings: &mut Vec<String>) -> Labels {
    let mut physical = resource::full_gpu_labels(gpus, &Sharing::default(), warnings);
    physical.retain(|k, _| !NOT_PHYSICAL.iter().any(|n| *k == key(n)));
    physical
}

/// `gpu.present`, which the DRA driver's kubelet plugin is placed by.
pub fn present() -> Labels {
    Labels::from([(key("gpu.present"), "true".into())])
}

/// The warning saying what of the device-plugin configuration the DRA profile leaves aside, if
/// anything.
pub fn ignored(config: &LabelConfig) -> Option<String> {
    let mut what = Vec::new();
    if config.sharing != Sharing::default() {
        what.push("the device-plugin config's sharing section".to_string());
    }
    if config.mig_strategy != MigStrategy::None {
        what.push(format!("--mig-strategy={}", config.mig_strategy.as_str()));
    }
    (!what.is_empty()).then(|| {
        format!(
            "allocation mode dra ignores {}: a DRA driver shares GPUs and MIG devices per claim, so the labels describe the physical GPUs",
            what.join(" and ")
        )
    })
}

#[cfg(test)]
#[path = "dra_tests.rs"]
mod tests;
