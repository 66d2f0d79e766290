//! The health keys of a GPU in the fixture schema (`ecc`, `remapped_rows`); the calls that
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
