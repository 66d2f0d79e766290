//! Snapshot + config → labels. Each labeler is a pure function in its own file; they are merged
//! in GFD's order, the one list in `labelers.rs` that both profiles walk (a later labeler
//! overwrites an earlier one's key), then every key and value is
//! checked against the Kubernetes rules so nothing invalid is ever published.

mod clique;
pub mod dra;
pub mod extended;
mod labelers;
mod machine;
mod mig_capable;
mod mig_strategy;
mod mode;
mod mps;
mod resource;
mod timestamp;
mod topology;
pub mod value;
mod version;
mod vgpu;

use crate::sharing::Sharing;
use crate::snapshot::Snapshot;
pub use dra::{AllocationMode, Profile};
pub use resource::family;
use std::collections::BTreeMap;

/// A label set, sorted by key.
pub type Labels = BTreeMap<String, String>;

/// The key of the configuration-load timestamp.
pub const TIMESTAMP_KEY: &str = "nvidia.com/gfd.timestamp";

/// Every label key starts with this.
pub const PREFIX: &str = "nvidia.com/";

/// How MIG devices are exposed (`--mig-strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MigStrategy {
    /// Only full-GPU labels.
    None,
    /// MIG devices are `nvidia.com/gpu`; all must have one profile.
    Single,
    /// One `nvidia.com/mig-<profile>` resource per profile.
    Mixed,
}

impl MigStrategy {
    /// From its flag spelling (`none`, `single`, `mixed`).
    pub fn parse(s: &str) -> Option<MigStrategy> {
        <MigStrategy as clap::ValueEnum>::from_str(s, false).ok()
    }

    /// The flag and label spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            MigStrategy::None => "none",
            MigStrategy::Single => "single",
            MigStrategy::Mixed => "mixed",
        }
    }
}

/// The configuration the labelers read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelConfig {
    /// `--mig-strategy`.
    pub mig_strategy: MigStrategy,
    /// The device-plugin sharing config.
    pub sharing: Sharing,
    /// `gfd.timestamp` (set when the config is loaded); `None` with `--no-timestamp`.
    pub timestamp: Option<u64>,
    /// `--extended-labels`: nvlabel's own labels on top of GFD's.
    pub extended: bool,
    /// GFD's labels, or the DRA profile's.
    pub profile: Profile,
}

/// Labels plus the warnings computing them raised (returned rather than logged, so tests see them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The label set.
    pub labels: Labels,
    /// Human-readable warnings, in the order they arose.
    pub warnings: Vec<String>,
    /// MPS is configured but a GPU has MIG enabled: the device plugin cannot share such devices,
    /// so the labels describe no sharing at all.
    pub mps_on_mig: bool,
}

/// Computes the full label set for one pass: [`merge`], then the final check that keeps anything
/// invalid from being published (a safety net: the labelers themselves emit only valid labels).
pub fn compute(snapshot: &Snapshot, config: &LabelConfig) -> Outcome {
    let mut out = merge(snapshot, config);
    let w = &mut out.warnings;
    out.labels.retain(|k, v| {
        let ok = value::is_valid_key(k) && value::is_valid_value(v);
        if !ok {
            w.push(format!("omitting invalid label {k}={v:?}"));
        }
        ok
    });
    out
}

/// Every labeler's labels merged in GFD's order, before the final validity check.
pub fn merge(snapshot: &Snapshot, config: &LabelConfig) -> Outcome {
    let mut out = Outcome::default();
    let no_sharing = Sharing::default();
    let sharing = match config.profile {
        Profile::Dra => {
            out.warnings.extend(dra::ignored(config));
            &no_sharing
        }
        Profile::DevicePlugin => {
            // The device plugin refuses MPS on MIG-enabled GPUs: the labels must not promise sharing.
            out.mps_on_mig = mps::on_mig(&snapshot.gpus, &config.sharing).is_some();
            if out.mps_on_mig {
                &no_sharing
            } else {
                &config.sharing
            }
        }
    };
    let input = labelers::Input { snapshot, config, sharing };
    for labeler in labelers::ORDER.into_iter().filter(|l| l.runs(&input)) {
        let labels = labeler.labels(&input, &mut out.warnings);
        out.labels.extend(labels);
    }
    out
}

/// The resources the device plugin advertises for `gpus` under `strategy` (what a sharing
/// config can match): MIG devices by profile under mixed, else `nvidia.com/gpu`.
fn resources(gpus: &[crate::snapshot::Gpu], strategy: MigStrategy) -> Vec<String> {
    advertised(gpus, strategy).into_keys().collect()
}

/// Each resource the device plugin advertises for `gpus` under `strategy`, with how many devices
/// it counts before sharing: under mixed a MIG-enabled GPU's devices by profile and the other
/// GPUs as `nvidia.com/gpu`; under single each MIG device as one `nvidia.com/gpu`; else each GPU.
pub fn advertised(gpus: &[crate::snapshot::Gpu], strategy: MigStrategy) -> BTreeMap<String, usize> {
    let mut out: BTreeMap<String, usize> = BTreeMap::new();
    if strategy != MigStrategy::Mixed {
        out.insert(resource::GPU_RESOURCE.into(), 0);
    }
    for g in gpus {
        let devices = g.mig.iter().filter(|_| resource::mig_enabled(g)).flat_map(|m| &m.devices);
        match strategy {
            MigStrategy::Mixed if resource::mig_enabled(g) => {
                for d in devices {
                    *out.entry(format!("nvidia.com/mig-{}", d.profile)).or_default() += 1;
                }
            }
            MigStrategy::Single if resource::mig_enabled(g) => {
                *out.entry(resource::GPU_RESOURCE.into()).or_default() += devices.count();
            }
            _ => *out.entry(resource::GPU_RESOURCE.into()).or_default() += 1,
        }
    }
    out
}

/// `nvidia.com/<name>`.
fn key(name: &str) -> String {
    format!("{PREFIX}{name}")
}

#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;
