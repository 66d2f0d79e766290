//! The health keys of a GPU in the fixture schema (`ecc`, `remapped_rows`, `recovery_action`,
//! `clock_event_reasons`); the calls that read them are in [`crate::health`].

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

/// One `clock_event_reasons` entry: a reason the clocks are held down, by nvml.h's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockEventReason {
    /// `nvmlClocksEventReasonGpuIdle`.
    GpuIdle,
    /// `nvmlClocksEventReasonApplicationsClocksSetting`.
    ApplicationsClocksSetting,
    /// `nvmlClocksEventReasonSwPowerCap`.
    SwPowerCap,
    /// `nvmlClocksThrottleReasonHwSlowdown`.
    HwSlowdown,
    /// `nvmlClocksEventReasonSyncBoost`.
    SyncBoost,
    /// `nvmlClocksEventReasonSwThermalSlowdown`.
    SwThermalSlowdown,
    /// `nvmlClocksThrottleReasonHwThermalSlowdown`.
    HwThermalSlowdown,
    /// `nvmlClocksThrottleReasonHwPowerBrakeSlowdown`.
    HwPowerBrakeSlowdown,
    /// `nvmlClocksEventReasonDisplayClockSetting`.
    DisplayClockSetting,
}

impl ClockEventReason {
    /// Every name, in bit order (a name's position is its bit).
    pub const NAMES: [&'static str; 9] = [
        "gpu_idle",
        "applications_clocks_setting",
        "sw_power_cap",
        "hw_slowdown",
        "sync_boost",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
        "display_clock_setting",
    ];

    /// The mask of `reasons` as nvml.h defines the bits.
    pub fn mask(reasons: &[ClockEventReason]) -> u64 {
        reasons.iter().fold(0, |m, r| m | (1 << (*r as u64)))
    }

    /// The mask of a `set` line's value: names separated by commas, `-` for none.
    pub fn parse_list(text: &str) -> Result<u64, String> {
        if text == "-" {
            return Ok(0);
        }
        text.split(',').try_fold(0, |m, name| match Self::NAMES.iter().position(|n| *n == name) {
            Some(bit) => Ok(m | (1 << bit)),
            None => Err(format!(
                "clock_event_reasons takes names from {} separated by commas (or -), not {name:?}",
                Self::NAMES.join(", ")
            )),
        })
    }
}
