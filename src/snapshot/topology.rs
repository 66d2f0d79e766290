//! The topology part of the snapshot: how each GPU is wired (NVLink, PCIe, NUMA) and what the
//! node can do around it (confidential computing, GPUDirect modules). Every field is optional
//! and `None` means "not known", so snapshots written before these existed still load and give
//! no topology labels rather than guessed ones.

use serde::{Deserialize, Serialize};

/// The NVLink side of one GPU.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvLink {
    /// `nvmlDeviceGetNvLinkVersion` (`nvmlNvlinkVersion_t`: 6 is NVLink 4.0); `None` when NVML
    /// did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u32>,
    /// Every link NVML answers for, in link order; empty when the GPU has no NVLink, `None` when
    /// a link could not be read (the version may still be known).
    #[serde(default)]
    pub links: Option<Vec<NvLinkLink>>,
}

/// One NVLink of a GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvLinkLink {
    /// `nvmlDeviceGetNvLinkState` is enabled.
    pub active: bool,
    /// What is at the other end (`nvmlDeviceGetNvLinkRemoteDeviceType`); asked for active links
    /// only, so `unknown` for an inactive one.
    pub remote: NvLinkRemote,
    /// The peer's PCI bus id, read for links to a GPU (`nvmlDeviceGetNvLinkRemotePciInfo_v2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_pci_bus_id: Option<String>,
}

/// The far end of an NVLink (`nvmlIntNvLinkDeviceType_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NvLinkRemote {
    /// Another GPU (a direct link or a bridge).
    Gpu,
    /// An NVSwitch.
    Switch,
    /// An IBM POWER CPU's NVLink port.
    Ibmnpu,
    /// NVML did not say.
    Unknown,
}

/// The system's confidential-computing capabilities (`nvmlSystemGetConfComputeCapabilities`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfCompute {
    /// `NVML_CC_SYSTEM_CPU_CAPS_*`: 0 none, 1 AMD SEV, 2 Intel TDX, 3 AMD SEV-SNP, 4 AMD SNP vTOM.
    pub cpu_caps: u32,
    /// `gpusCaps` is `NVML_CC_SYSTEM_GPUS_CC_CAPABLE`.
    pub gpus_capable: bool,
}

/// The GPUDirect kernel modules (`<sysfs>/module/<name>` exists); `None` where unreadable.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuDirect {
    /// `nvidia_peermem` or the older `nv_peer_mem` (GPUDirect RDMA).
    #[serde(default)]
    pub rdma: Option<bool>,
    /// `nvidia_fs` (GPUDirect Storage).
    #[serde(default)]
    pub storage: Option<bool>,
    /// `gdrdrv` (GDRCopy).
    #[serde(default)]
    pub gdrcopy: Option<bool>,
}

#[cfg(test)]
mod tests {
    use crate::labels::{compute, LabelConfig, MigStrategy};
    use crate::snapshot::Snapshot;

    /// A snapshot written before the topology fields existed still loads, and gives no topology
    /// label: unknown, not "no NVLink".
    #[test]
    fn old_snapshots_load_and_give_no_topology_labels() {
        let old = "driver_version: 550.54.15\ncuda_driver_version: 12040\ngpus:\n\
                   - index: 0\n  name: NVIDIA H100 80GB HBM3\n  pci_bus_id: 00000000:1B:00.0\n  \
                   memory_bytes: 85520809984\n  compute_capability: [9, 0]\n  mig: null\n  fabric: null\n\
                   - index: 1\n  name: NVIDIA H100 80GB HBM3\n  pci_bus_id: 00000000:43:00.0\n  \
                   memory_bytes: 85520809984\n  compute_capability: [9, 0]\n";
        let snap = Snapshot::from_yaml(old).unwrap();
        assert!(snap.gpus.iter().all(|g| g.nvlink.is_none() && g.numa_node.is_none()));
        assert_eq!((&snap.confidential_compute, &snap.gpudirect), (&None, &None));
        let config = LabelConfig {
            mig_strategy: MigStrategy::None,
            sharing: Default::default(),
            timestamp: None,
            extended: true,
            profile: crate::labels::Profile::DevicePlugin,
        };
        let labels = compute(&snap, &config).labels;
        assert!(labels.contains_key("nvidia.com/gpu.model"), "{labels:?}");
        for k in labels.keys() {
            for topo in ["nvlink", "p2p", "pcie", "numa", "fabric", "gpudirect", "cc."] {
                assert!(!k.contains(topo), "{k} from a snapshot without topology");
            }
        }
    }
}
