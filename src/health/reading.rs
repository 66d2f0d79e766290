//! What NVML reported of the node's GPUs: each pass's reading and the events that come between
//! passes, as plain values the rules judge ([`super::rules`]) and the signals watch
//! ([`super::signals`]).

/// One GPU's health values as NVML reported them this pass; `None` where it could not say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuReading {
    /// NVML index.
    pub index: u32,
    /// UUID, when known.
    pub uuid: Option<String>,
    /// NVML answered `GPU_IS_LOST`.
    pub lost: bool,
    /// Volatile uncorrected ECC errors.
    pub uncorrected_volatile: Option<u64>,
    /// Volatile corrected ECC errors (a metric, never a fault).
    pub corrected_volatile: Option<u64>,
    /// Rows remapped for correctable / uncorrectable errors, and pending / failure.
    pub remapped: Option<Remapped>,
    /// Retired pages pending.
    pub retired_pages_pending: Option<bool>,
    /// Each NVLink link's state (true: active), in link order.
    pub nvlink_active: Option<Vec<bool>>,
    /// The driver's recovery action (field 230; 0 is none), where the driver answers it.
    pub recovery_action: Option<u64>,
    /// `nvmlDeviceValidateInforom` answered `CORRUPTED_INFOROM`.
    pub inforom_corrupted: bool,
    /// PCIe replays since the driver loaded (field 94), where the GPU answers it.
    pub pcie_replays: Option<u64>,
    /// Why the clocks are held down now: nvml.h's clock event reason bits.
    pub clock_events: Option<u64>,
}

/// `nvmlDeviceGetRemappedRows`, or fields 142-145.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Remapped {
    /// Rows remapped for correctable errors.
    pub correctable: u64,
    /// Rows remapped for uncorrectable errors.
    pub uncorrectable: u64,
    /// A remapping waits for a reset.
    pub pending: bool,
    /// Remapping failed.
    pub failure: bool,
}

/// The whole node this pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reading {
    /// Every GPU NVML enumerates.
    pub gpus: Vec<GpuReading>,
    /// NVIDIA GPUs on the PCI bus, when sysfs could say.
    pub pci_gpus: Option<u32>,
}

/// Something NVML reported as it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// An Xid critical error (MIG: with the instance ids).
    Xid {
        /// GPU index.
        index: u32,
        /// The Xid.
        xid: u64,
        /// GPU-instance and compute-instance id.
        mig: Option<(u32, u32)>,
    },
    /// A double-bit ECC error.
    DoubleBitEcc {
        /// GPU index.
        index: u32,
    },
    /// The GPU became unavailable.
    Lost {
        /// GPU index.
        index: u32,
    },
}

/// Whether GPU `index`'s driver answered its recovery action in the reading `last`.
pub fn driver_answers(last: Option<&Reading>, index: u32) -> bool {
    last.and_then(|r| r.gpus.iter().find(|g| g.index == index)).is_some_and(|g| g.recovery_action.is_some())
}
