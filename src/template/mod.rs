//! `nvlabel template`: the labels and the capacity every node of a GPU pool will have, for an
//! autoscaler that scales the pool from zero and so must know them before the pool's first node
//! exists. A template is a snapshot of one node of the kind put through the same labelers a pass
//! uses ([`crate::labels::compute`]), less what only a running node knows ([`RUN_TIME`]); the
//! capacity is what the device plugin will advertise ([`capacity`]). [`forms`] prints it the way
//! each autoscaler reads it.

pub mod capacity;
pub mod catalogue;
pub mod cluster;
pub mod command;
pub mod forms;
pub mod slice;

use crate::labels::{self, LabelConfig, Labels, Profile};
use crate::snapshot::{MachineType, Snapshot, Source};
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
    /// The node the template was made from (a DRA pool's slice is made from its GPUs); `None`
    /// for a pool learnt from the labels of its nodes.
    pub node: Option<Snapshot>,
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
    if snapshot.machine_type.path.is_empty() && snapshot.machine_type.content.is_none() {
        labels.remove("nvidia.com/gpu.machine");
        let why = "the pool's machine type is not known: give --machine-type (the DMI product name), or take the snapshot of one node";
        left_out.push(LeftOut { key: "nvidia.com/gpu.machine".into(), why: why.into() });
    }
    let dra = config.profile == Profile::Dra;
    let capacity = if dra { Capacity::default() } else { capacity::of(snapshot, &config, &labels) };
    Template { labels, capacity, dra, left_out, warnings: outcome.warnings, node: Some(snapshot.clone()) }
}

#[cfg(test)]
mod template_tests;

/// What the pool pins besides its GPUs: the driver and the machine type, each where given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pins {
    /// `--driver-version` (`550.54.15`).
    pub driver_version: Option<String>,
    /// `--cuda-version` in NVML's integer form (`12.4` is 12040).
    pub cuda_version: Option<i32>,
    /// `--machine-type`: the DMI product name of the pool's machines.
    pub machine_type: Option<String>,
}

/// A value of `--driver-version` or `--cuda-version` that is no version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{flag} {value:?}: not a version ({want})")]
pub struct VersionError {
    /// The flag.
    pub flag: &'static str,
    /// Its value.
    pub value: String,
    /// What it must look like.
    pub want: &'static str,
}

impl crate::exit::Classify for VersionError {
    /// The command line's.
    fn is_bad_configuration(&self) -> bool {
        true
    }
}

impl Pins {
    /// The pins of `--driver-version`, `--cuda-version` and `--machine-type`, each checked.
    pub fn parse(
        driver: Option<&str>,
        cuda: Option<&str>,
        machine: Option<&str>,
    ) -> Result<Pins, VersionError> {
        let digits = |p: &str| !p.is_empty() && p.len() <= 6 && p.bytes().all(|b| b.is_ascii_digit());
        if let Some(d) = driver {
            let parts: Vec<&str> = d.split('.').collect();
            if !(2..=4).contains(&parts.len()) || !parts.iter().all(|p| digits(p)) {
                let want = "two to four numbers with dots, as 550.54.15";
                return Err(VersionError { flag: "--driver-version", value: d.into(), want });
            }
        }
        let cuda_version = match cuda {
            None => None,
            Some(c) => {
                let bad =
                    || VersionError { flag: "--cuda-version", value: c.into(), want: "MAJOR.MINOR, as 12.4" };
                let (major, minor) = c.split_once('.').ok_or_else(bad)?;
                let (major, minor): (i32, i32) = match (digits(major), digits(minor)) {
                    (true, true) => (major.parse().map_err(|_| bad())?, minor.parse().map_err(|_| bad())?),
                    _ => return Err(bad()),
                };
                if minor > 99 || major > 999 {
                    return Err(bad());
                }
                Some(major * 1000 + minor * 10)
            }
        };
        Ok(Pins {
            driver_version: driver.map(Into::into),
            cuda_version,
            machine_type: machine.map(Into::into),
        })
    }

    /// `node` as a node of the pool would be: its driver and machine type the pinned ones.
    pub fn apply(&self, mut node: Snapshot) -> Snapshot {
        if self.driver_version.is_some() {
            node.driver_version = self.driver_version.clone();
        }
        if self.cuda_version.is_some() {
            node.cuda_driver_version = self.cuda_version;
        }
        if let Some(machine) = &self.machine_type {
            node.machine_type =
                MachineType { path: "--machine-type".into(), content: Some(machine.clone()), error: None };
        }
        node
    }
}
#[cfg(test)]
mod catalogue_tests;
