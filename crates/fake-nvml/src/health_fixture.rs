//! The health keys of a GPU in the fixture schema (`ecc`, `remapped_rows`, `recovery_action`); the calls that
//! read them are in [`crate::health`].

use serde::Deserialize;

/// `ecc:` of one GPU.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ecc {
    /// `nvmlDeviceGetEccMode` current = pending.
    pub enabled: bool,
    /// `nvmlDeviceGetTotalEccErrors(CORRECTED, VOLATILE_ECC)`.
    #[serde(default)]
    pub corrected_volatile: u64,
    /// `nvmlDeviceGetTotalEccErrors(UNCORRECTED, VOLATILE_ECC)`.
    #[serde(default)]
    pub uncorrected_volatile: u64,
    /// `nvmlDeviceGetTotalEccErrors(CORRECTED, AGGREGATE_ECC)`.
    #[serde(default)]
    pub corrected_aggregate: u64,
    /// `nvmlDeviceGetTotalEccErrors(UNCORRECTED, AGGREGATE_ECC)`.
    #[serde(default)]
    pub uncorrected_aggregate: u64,
}

/// `remapped_rows:` of one GPU.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemappedRows {
    /// Rows remapped for correctable errors.
    #[serde(default)]
    pub correctable: u32,
    /// Rows remapped for uncorrectable errors.
    #[serde(default)]
    pub uncorrectable: u32,
    /// A remapping is pending (a GPU reset applies it).
    #[serde(default)]
    pub pending: bool,
    /// A remapping failed (no spare rows left).
    #[serde(default)]
    pub failure: bool,
}

/// `recovery_action:` of one GPU: what the driver says the GPU needs (field 230), by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryAction {
    /// 0.
    None,
    /// 1.
    GpuReset,
    /// 2.
    NodeReboot,
    /// 3.
    DrainP2p,
    /// 4.
    DrainAndReset,
    /// 5.
    RecoverImexDomain,
}

impl RecoveryAction {
    /// Every name, in NVML's order (its position is the field's value).
    pub const NAMES: [&'static str; 6] =
        ["none", "gpu_reset", "node_reboot", "drain_p2p", "drain_and_reset", "recover_imex_domain"];

    /// `nvmlDeviceGpuRecoveryAction_t`'s value.
    pub fn value(self) -> u64 {
        self as u64
    }
}
