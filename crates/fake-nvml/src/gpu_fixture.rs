//! One GPU's keys of the fixture schema (`docs/fake-nvml.md`): the GPU, its MIG devices and its
//! fabric, parsed strictly; `fixture.rs` validates them with the rest of the machine.

use crate::topology_fixture::{NvLink, Pcie};
use serde::Deserialize;

/// One physical GPU.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    /// `nvmlDeviceGetName`.
    pub name: String,
    /// `nvmlDeviceGetUUID`; derived from the index when absent.
    pub uuid: Option<String>,
    /// PCI bus id; `00000000:<index+1>:00.0` when absent.
    pub pci_bus_id: Option<String>,
    /// PCI device id (16 bits); `pciDeviceId` is `(id << 16) | 0x10de`, or 0 (unknown) when absent.
    pub pci_device_id: Option<u16>,
    /// Total memory in MiB.
    pub memory_mib: u64,
    /// `[major, minor]`.
    pub compute_capability: [i32; 2],
    /// nvmlBrandType name in lower case.
    pub brand: Option<String>,
    /// nvmlDeviceArchitecture name in lower case.
    pub architecture: Option<String>,
    /// MIG state; absent means not MIG capable.
    pub mig: Option<Mig>,
    /// Fabric (IMEX) info; absent means NOT_SUPPORTED.
    pub fabric: Option<Fabric>,
    /// PCIe link; absent means NOT_SUPPORTED.
    pub pcie: Option<Pcie>,
    /// `nvmlDeviceGetNumaNodeId`; absent means NOT_SUPPORTED.
    pub numa_node: Option<u32>,
    /// NVLink version and links; absent means NOT_SUPPORTED on every link.
    pub nvlink: Option<NvLink>,
    /// ECC mode and counters; absent means ECC is not supported.
    pub ecc: Option<crate::health_fixture::Ecc>,
    /// `nvmlDeviceGetRetiredPagesPendingStatus` (field 31); absent means NOT_SUPPORTED.
    pub retired_pages_pending: Option<bool>,
    /// `nvmlDeviceGetRemappedRows` (fields 142-145); absent means NOT_SUPPORTED.
    pub remapped_rows: Option<crate::health_fixture::RemappedRows>,
    /// Field 230 (`NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`); absent means NOT_SUPPORTED.
    pub recovery_action: Option<crate::health_fixture::RecoveryAction>,
    /// `nvmlDeviceValidateInforom`: false answers CORRUPTED_INFOROM; absent means NOT_SUPPORTED.
    pub inforom_valid: Option<bool>,
    /// `nvmlDeviceGetCurrentClocksEventReasons`, nvml.h's bits by name; absent means NOT_SUPPORTED.
    pub clock_event_reasons: Option<Vec<crate::health_fixture::ClockEventReason>>,
}

/// MIG mode and devices of one GPU.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mig {
    /// Current (= pending) mode.
    pub enabled: bool,
    /// `nvmlDeviceGetMaxMigDeviceCount` while enabled.
    #[serde(default = "default_max_devices")]
    pub max_devices: u32,
    /// MIG devices in index order; ignored while disabled.
    #[serde(default)]
    pub devices: Vec<MigDevice>,
}

fn default_max_devices() -> u32 {
    7
}

/// One MIG device (a compute instance inside a GPU instance).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigDevice {
    /// NVML GPU-instance profile id, 0..=17.
    pub gi_profile: u32,
    /// NVML compute-instance profile id, 0..=8.
    pub ci_profile: u32,
    /// GPU instance id; index + 1 within the GPU when absent.
    pub gi_id: Option<u32>,
    /// Compute instance id; 0 when absent.
    pub ci_id: Option<u32>,
    /// MIG device UUID; derived when absent.
    pub uuid: Option<String>,
    /// `memorySizeMB` attribute (MiB).
    pub memory_mib: u64,
    /// `multiprocessorCount`.
    #[serde(default)]
    pub multiprocessors: u32,
    /// `gpuInstanceSliceCount`; from the GI profile when absent.
    pub gpu_instance_slices: Option<u32>,
    /// `computeInstanceSliceCount`; from the CI profile when absent.
    pub compute_instance_slices: Option<u32>,
    /// `sharedCopyEngineCount`.
    #[serde(default)]
    pub copy_engines: u32,
    /// `sharedDecoderCount`.
    #[serde(default)]
    pub decoders: u32,
    /// `sharedEncoderCount`.
    #[serde(default)]
    pub encoders: u32,
    /// `sharedJpegCount`.
    #[serde(default)]
    pub jpeg_decoders: u32,
    /// `sharedOfaCount`.
    #[serde(default)]
    pub ofa: u32,
}

/// `nvmlGpuFabricInfo_t` contents.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fabric {
    /// Canonical UUID text; dashes optional.
    pub cluster_uuid: String,
    /// Clique id.
    pub clique_id: u32,
    /// `not_started`, `in_progress` or `completed`.
    pub state: String,
    /// An NVML return name in lower case (`success`).
    pub status: String,
}

impl MigDevice {
    /// The GPU instance id of the device at position `index`.
    pub fn gi_id(&self, index: usize) -> u32 {
        self.gi_id.unwrap_or(index as u32 + 1)
    }

    /// The compute instance id.
    pub fn ci_id(&self) -> u32 {
        self.ci_id.unwrap_or(0)
    }
}
