//! `nvlabel template`: the labels and the capacity every node of a GPU pool will have, for an
//! autoscaler that scales the pool from zero and so must know them before the pool's first node
//! exists. A template is a snapshot of one node of the kind put through the same labelers a pass
//! uses ([`crate::labels::compute`]), less what only a running node knows ([`RUN_TIME`]); the
//! capacity is what the device plugin will advertise ([`capacity`]). [`forms`] prints it the way
//! each autoscaler reads it.

pub mod capacity;
pub mod forms;
pub mod slice;

use crate::labels::{self, LabelConfig, Labels, Profile};
use crate::snapshot::{Snapshot, Source};
use capacity::Capacity;

/// Label keys only a running node knows, never a template's, and why.
pub const RUN_TIME: &[(&str, &str)] = &[
    ("nvidia.com/gfd.timestamp", "the time a node loaded its configuration"),
    ("nvidia.com/gpu.clique", "a node's NVLink domain, known only once its fabric manager has placed it"),
];

/// Why the driver labels are left out of a pool that pins no driver.
const UNPINNED: &str =
    "the pool pins no driver: give --driver-version and --cuda-version, or take the snapshot of one node";

/// What every node of a pool will have.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    /// The labels nvlabel will give each node, sorted.
    pub labels: Labels,
    /// The extended resources the device plugin will advertise (none under DRA).
    pub capacity: Capacity,
    /// Whether the pool's GPUs are handed out by a DRA driver (its slices, no extended resources).
    pub dra: bool,
    /// What a template cannot say and was left out, each with why, in the order met.
    pub left_out: Vec<LeftOut>,
    /// The labelers' warnings.
    pub warnings: Vec<String>,
    /// The node the template was made from (a DRA pool's slice is made from its GPUs).
    pub node: Snapshot,
}

/// A label, or a group of them, a template leaves out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    /// The key, or the prefix of the keys (`nvidia.com/cuda.driver*`).
    pub key: String,
    /// Why.
    pub why: String,
}

impl std::fmt::Display for LeftOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "left out {}: {}", self.key, self.why)
    }
}

/// The template of a pool whose nodes are all like `snapshot`, labelled as `config` says (its
/// timestamp is never used). The snapshot's driver is the pool's where it names one.
pub fn of_snapshot(snapshot: &Snapshot, config: &LabelConfig) -> Template {
    let config = LabelConfig { timestamp: None, ..config.clone() };
    let outcome = labels::compute(snapshot, &config);
    let mut labels = outcome.labels;
    let mut left_out = Vec::new();
    for (key, why) in RUN_TIME {
        if labels.remove(*key).is_some() {
            left_out.push(LeftOut { key: (*key).into(), why: (*why).into() });
        }
    }
    // A snapshot without a driver is a pool that pins none: its version labels are left out,
    // as the labelers leave them out of a node whose NVML could not say.
    let pins = |v: bool| v || snapshot.gpus.is_empty() || snapshot.source != Source::Nvml;
    if !pins(snapshot.driver_version.is_some()) {
        left_out.push(LeftOut { key: "nvidia.com/cuda.driver*".into(), why: UNPINNED.into() });
    }
    if !pins(snapshot.cuda_driver_version.is_some()) {
        left_out.push(LeftOut { key: "nvidia.com/cuda.runtime*".into(), why: UNPINNED.into() });
    }
    let dra = config.profile == Profile::Dra;
    let capacity = if dra { Capacity::default() } else { capacity::of(snapshot, &config, &labels) };
    Template { labels, capacity, dra, left_out, warnings: outcome.warnings, node: snapshot.clone() }
}

#[cfg(test)]
mod tests;
