//! Topology facts: per GPU its NVLink links, maximum PCIe link and NUMA node; per node the
//! confidential-computing capabilities and the GPUDirect kernel modules. Everything is
//! tolerant: `NOT_SUPPORTED` (or a symbol an older driver lacks) leaves the fact unknown, any
//! other failure does the same and is recorded; a GPU is never excluded for its topology.

use super::raw_topology;
use crate::snapshot::{ConfCompute, GpuDirect, Issue, NvLink, NvLinkLink, NvLinkRemote};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::*;
use std::path::Path;

/// The topology facts of one GPU.
#[derive(Debug, Default)]
pub struct GpuTopology {
    /// NVLink version and links.
    pub nvlink: Option<NvLink>,
    /// Maximum PCIe generation.
    pub pcie_max_generation: Option<u32>,
    /// Maximum PCIe width.
    pub pcie_max_width: Option<u32>,
    /// NUMA node.
    pub numa_node: Option<u32>,
}

/// `nvmlIntNvLinkDeviceType_t` values.
const REMOTE_GPU: u32 = nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_GPU;
const REMOTE_SWITCH: u32 = nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_SWITCH;
const REMOTE_IBMNPU: u32 = nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_IBMNPU;

/// Where the failures of one device go.
struct Recorder<'a> {
    device: Option<String>,
    issues: &'a mut Vec<Issue>,
}

impl Recorder<'_> {
    /// `Ok(Some)` on success, `Ok(None)` when NVML says the fact does not exist here, `Err` (after
    /// recording it) for any other failure.
    fn read<T>(&mut self, r: Result<T, NvmlError>, function: &str, effect: &str) -> Result<Option<T>, ()> {
        match r {
            Ok(v) => Ok(Some(v)),
            Err(NvmlError::NotSupported | NvmlError::FailedToLoadSymbol(_)) => Ok(None),
            Err(e) => {
                self.issues.push(Issue {
                    device: self.device.clone(),
                    function: function.into(),
                    error: super::nvml_error::describe(&e),
                    effect: effect.into(),
                    source: Some(crate::snapshot::Source::Nvml),
                });
                Err(())
            }
        }
    }

    /// A single fact: unknown on any failure.
    fn fact<T>(&mut self, r: Result<T, NvmlError>, function: &str, effect: &str) -> Option<T> {
        self.read(r, function, effect).ok().flatten()
    }
}

/// Reads the topology of one GPU.
pub fn gpu(nvml: &Nvml, dev: &Device, index: u32, issues: &mut Vec<Issue>) -> GpuTopology {
    let mut rec = Recorder { device: Some(index.to_string()), issues };
    let pcie_effect = "gpu.pcie labels omitted";
    GpuTopology {
        nvlink: nvlink(nvml, dev, &mut rec),
        pcie_max_generation: rec.fact(
            dev.max_pcie_link_gen(),
            "nvmlDeviceGetMaxPcieLinkGeneration",
            pcie_effect,
        ),
        pcie_max_width: rec.fact(dev.max_pcie_link_width(), "nvmlDeviceGetMaxPcieLinkWidth", pcie_effect),
        numa_node: rec.fact(dev.numa_node_id(), "nvmlDeviceGetNumaNodeId", "gpu.numa-nodes omitted"),
    }
}

/// NVLink version and links; `None` for a driver without the calls. A GPU whose link 0 is
/// `NOT_SUPPORTED` has no NVLink (an empty list); other links that are `NOT_SUPPORTED` do not exist
/// and are skipped, as NVML numbers links up to its maximum. A link that answers with an error
/// makes the list unknown, not the version.
fn nvlink(nvml: &Nvml, dev: &Device, rec: &mut Recorder) -> Option<NvLink> {
    let first = dev.link_wrapper_for(0).is_active();
    match first {
        Err(NvmlError::NotSupported) => return Some(NvLink { version: None, links: Some(Vec::new()) }),
        Err(NvmlError::FailedToLoadSymbol(_)) => return None,
        _ => {}
    }
    let version = dev.link_wrapper_for(0).version();
    let version = rec.fact(version, "nvmlDeviceGetNvLinkVersion", "gpu.nvlink.version omitted");
    Some(NvLink { version, links: links(nvml, dev, first, rec).ok() })
}

/// Every link's state, and what is behind the active ones; `Err` when one could not be read.
fn links(
    nvml: &Nvml,
    dev: &Device,
    first: Result<bool, NvmlError>,
    rec: &mut Recorder,
) -> Result<Vec<NvLinkLink>, ()> {
    let effect = "gpu.nvlink.links, gpu.nvlink.nvswitch and gpu.p2p omitted";
    let state = |l: u32| dev.link_wrapper_for(l).is_active();
    let mut first = Some(first);
    let mut links = Vec::new();
    for l in 0..NVML_NVLINK_MAX_LINKS {
        let answer = first.take().unwrap_or_else(|| state(l));
        let Some(active) = rec.read(answer, "nvmlDeviceGetNvLinkState", effect)? else { continue };
        if !active {
            // An inactive link counts for nothing, so what is behind it is not asked.
            links.push(NvLinkLink { active, remote: NvLinkRemote::Unknown, remote_pci_bus_id: None });
            continue;
        }
        let kind = rec.read(
            raw_topology::remote_device_type(nvml, dev, l),
            "nvmlDeviceGetNvLinkRemoteDeviceType",
            effect,
        )?;
        let remote = match kind {
            Some(REMOTE_GPU) => NvLinkRemote::Gpu,
            Some(REMOTE_SWITCH) => NvLinkRemote::Switch,
            Some(REMOTE_IBMNPU) => NvLinkRemote::Ibmnpu,
            _ => NvLinkRemote::Unknown,
        };
        let remote_pci_bus_id = if remote == NvLinkRemote::Gpu {
            let pci = dev.link_wrapper_for(l).remote_pci_info();
            rec.read(pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2", effect)?.map(|p| p.bus_id)
        } else {
            None
        };
        links.push(NvLinkLink { active, remote, remote_pci_bus_id });
    }
    Ok(links)
}

/// The system's confidential-computing capabilities.
pub fn conf_compute(nvml: &Nvml, issues: &mut Vec<Issue>) -> Option<ConfCompute> {
    let mut rec = Recorder { device: None, issues };
    let caps = raw_topology::conf_compute_caps(nvml);
    let (cpu, gpus) = rec.fact(caps, "nvmlSystemGetConfComputeCapabilities", "cc.capable omitted")?;
    Some(ConfCompute { cpu_caps: cpu, gpus_capable: gpus == NVML_CC_SYSTEM_GPUS_CC_CAPABLE })
}

/// The GPUDirect modules under `<sysfs>/module`; `None` when that directory cannot be read
/// (no module information at all, so nothing is known).
pub fn gpudirect(sysfs_root: &Path, issues: &mut Vec<Issue>) -> Option<GpuDirect> {
    let dir = sysfs_root.join("module");
    if let Err(e) = std::fs::read_dir(&dir) {
        issues.push(Issue {
            device: None,
            function: "sysfs modules".into(),
            error: format!("cannot read {}: {e}", dir.display()),
            effect: "gpudirect labels omitted".into(),
            source: None,
        });
        return None;
    }
    let loaded = |name: &str| dir.join(name).try_exists().ok();
    let either = |a: Option<bool>, b: Option<bool>| match (a, b) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (Some(false), Some(false)) => Some(false),
        _ => None,
    };
    Some(GpuDirect {
        rdma: either(loaded("nvidia_peermem"), loaded("nv_peer_mem")),
        storage: loaded("nvidia_fs"),
        gdrcopy: loaded("gdrdrv"),
    })
}
