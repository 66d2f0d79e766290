//! The topology labels (`--extended-labels`): how the primary model's GPUs are wired and what the
//! node can do around them. Each is the minimum over those GPUs, so a selector never promises
//! more than every GPU has, and is left out when any of them is unknown (never a guess).
//!
//! - `gpu.nvlink.version`, `gpu.nvlink.links` (active links per GPU), `gpu.nvlink.nvswitch`:
//!   absent where NVML reports no NVLink. A link counts when it is active and goes to an
//!   NVSwitch, a CPU port, or one of this node's GPUs (by PCI address).
//! - `gpu.p2p`: `nvlink` when every pair reaches each other over NVLink (both on NVSwitches, or a
//!   direct link), else `pcie`; absent with one GPU, when an unknown peer could change it, or
//!   when some of the GPUs report NVLink and others none (one model: a failing answer).
//! - `gpu.pcie.generation`, `gpu.pcie.width`: the link's maximum, not its current state.
//! - `gpu.numa-nodes`: how many NUMA nodes the GPUs sit on.
//! - `gpu.fabric.state`: the least advanced GPU's fabric state.
//! - `gpudirect.rdma`, `gpudirect.storage`, `gpudirect.gdrcopy`: the kernel module is loaded.
//! - `cc.capable`: the CPU and the GPUs support confidential computing.

use super::resource::primary_model;
use super::{key, Labels};
use crate::snapshot::{Gpu, NvLinkRemote, Snapshot};
use std::collections::BTreeSet;

/// Marketed NVLink versions by `nvmlNvlinkVersion_t` (1 is 1.0, ..., 7 is 5.0).
const NVLINK_VERSIONS: [&str; 7] = ["1.0", "2.0", "2.2", "3.0", "3.1", "4.0", "5.0"];

/// Fabric states by `nvmlGpuFabricState_t` (0, not supported, has no label).
const FABRIC_STATES: [&str; 3] = ["not-started", "in-progress", "completed"];

/// A PCI address compared by value: NVML writes 8 domain digits, sysfs 4, and case varies.
fn pci_address(bus_id: &str) -> Option<(u32, u32, u32, u32)> {
    let mut parts = bus_id.trim().split([':', '.']).map(|p| u32::from_str_radix(p, 16).ok());
    let address = (parts.next()??, parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some(address)
}

/// One GPU's NVLinks as they count.
#[derive(Debug, Default)]
struct Links {
    /// Active links that count.
    count: usize,
    /// Active links to an NVSwitch.
    to_switch: usize,
    /// Addresses of the node's GPUs this one has an active direct link to.
    peers: BTreeSet<(u32, u32, u32, u32)>,
    /// An active link whose far end is not known (it might be a peer on this node).
    unknown_end: bool,
}

/// The links of `g` that count, given the PCI addresses of the node's GPUs; `None` when unknown.
fn links(g: &Gpu, node: &BTreeSet<(u32, u32, u32, u32)>) -> Option<Links> {
    let mut l = Links::default();
    for link in g.nvlink.as_ref()?.links.as_ref()?.iter().filter(|l| l.active) {
        match link.remote {
            NvLinkRemote::Switch => {
                l.count += 1;
                l.to_switch += 1;
            }
            NvLinkRemote::Ibmnpu => l.count += 1,
            NvLinkRemote::Gpu => match link.remote_pci_bus_id.as_deref().map(pci_address) {
                Some(Some(peer)) if node.contains(&peer) => {
                    l.count += 1;
                    l.peers.insert(peer);
                }
                // A GPU that is not one of this node's (another partition, or gone).
                Some(Some(_)) => {}
                _ => l.unknown_end = true,
            },
            NvLinkRemote::Unknown => l.unknown_end = true,
        }
    }
    Some(l)
}

/// The value for every GPU, or `None` when any is unknown.
fn all<'a, T>(gpus: &[&'a Gpu], f: impl Fn(&'a Gpu) -> Option<T>) -> Option<Vec<T>> {
    gpus.iter().map(|g| f(g)).collect()
}

/// The topology labels of a snapshot.
pub fn labels(snapshot: &Snapshot) -> Labels {
    let mut l = Labels::new();
    let gpus = &snapshot.gpus;
    let Some(primary) = primary_model(gpus) else { return l };
    let of: Vec<&Gpu> = gpus.iter().filter(|g| g.name == primary).collect();
    let node: BTreeSet<_> =
        gpus.iter().filter_map(|g| g.pci_bus_id.as_deref().and_then(pci_address)).collect();
    let mut put = |k: &str, v: String| {
        l.insert(key(k), v);
    };

    let with_nvlink = all(&of, |g| g.nvlink.as_ref()?.links.as_ref().filter(|l| !l.is_empty()));
    if let Some(v) = all(&of, |g| g.nvlink.as_ref()?.version).and_then(|v| v.into_iter().min()) {
        if let Some(name) = (v as usize).checked_sub(1).and_then(|i| NVLINK_VERSIONS.get(i)) {
            put("gpu.nvlink.version", name.to_string());
        }
    }
    let counted = all(&of, |g| links(g, &node));
    // A link whose far end is unknown might or might not count: no exact number then.
    let exact = counted.as_ref().filter(|c| c.iter().all(|c| !c.unknown_end));
    if let (Some(_), Some(counted)) = (&with_nvlink, exact) {
        if let Some(min) = counted.iter().map(|c| c.count).min() {
            put("gpu.nvlink.links", min.to_string());
        }
        let switched = counted.iter().all(|c| c.count > 0 && c.to_switch == c.count);
        put("gpu.nvlink.nvswitch", switched.to_string());
    }
    if let (true, Some(counted)) = (of.len() > 1, &counted) {
        let address = |g: &Gpu| g.pci_bus_id.as_deref().and_then(pci_address);
        let reach = |a: usize, b: usize| {
            let (ca, cb) = (&counted[a], &counted[b]);
            let direct = |c: &Links, peer: &Gpu| address(peer).is_some_and(|p| c.peers.contains(&p));
            (ca.to_switch > 0 && cb.to_switch > 0) || direct(ca, of[b]) || direct(cb, of[a])
        };
        let every_pair = (0..of.len()).all(|a| (a + 1..of.len()).all(|b| reach(a, b)));
        // GPUs of one model either all have NVLink or none does; a mix is an answer not to trust.
        let has_nvlink =
            |g: &&Gpu| g.nvlink.as_ref().and_then(|n| n.links.as_ref()).is_some_and(|l| !l.is_empty());
        let consistent = of.iter().all(has_nvlink) || !of.iter().any(has_nvlink);
        if consistent && every_pair {
            put("gpu.p2p", "nvlink".into());
        } else if consistent && !counted.iter().any(|c| c.unknown_end) {
            put("gpu.p2p", "pcie".into());
        }
    }

    if let Some(v) = all(&of, |g| g.pcie_max_generation).and_then(|v| v.into_iter().min()) {
        put("gpu.pcie.generation", v.to_string());
    }
    if let Some(v) = all(&of, |g| g.pcie_max_width).and_then(|v| v.into_iter().min()) {
        put("gpu.pcie.width", v.to_string());
    }
    if let Some(nodes) = all(&of, |g| g.numa_node) {
        put("gpu.numa-nodes", nodes.iter().collect::<BTreeSet<_>>().len().to_string());
    }
    let state = |g: &Gpu| g.fabric.as_ref().map(|f| f.state).filter(|s| (1..=3).contains(s));
    if let Some(s) = all(&of, state).and_then(|v| v.into_iter().min()) {
        put("gpu.fabric.state", FABRIC_STATES[usize::from(s) - 1].into());
    }

    if let Some(d) = &snapshot.gpudirect {
        for (k, v) in
            [("gpudirect.rdma", d.rdma), ("gpudirect.storage", d.storage), ("gpudirect.gdrcopy", d.gdrcopy)]
        {
            if let Some(v) = v {
                put(k, v.to_string());
            }
        }
    }
    if let Some(cc) = &snapshot.confidential_compute {
        put("cc.capable", (cc.cpu_caps != 0 && cc.gpus_capable).to_string());
    }
    l
}

#[cfg(test)]
#[path = "topology_tests.rs"]
mod tests;
