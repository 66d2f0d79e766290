//! What health is told: its own configuration as plain values, made by `config/` from the flags,
//! env and the config file, and handed to health at start and after every accepted reload that
//! changes it, whole: the monitor keeps the very struct it was sent and its parts read from it.
//! Health never reads the command line or the settings of the rest of nvlabel.

use crate::probe::ProbeOptions;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

/// The Node label that says how many GPUs the node should have (it wins over the flag, so one
/// chart serves a fleet of different machines).
pub const EXPECTED_COUNT_LABEL: &str = "nvidia.com/gpu.expected-count";

/// A GPU count: a whole number from 1 (the flag's and the label's rule).
pub fn gpu_count(text: &str) -> Option<u32> {
    text.trim().parse().ok().filter(|n| *n >= 1)
}

/// The effect of a device taint (`--health-taint-effect`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
#[value(rename_all = "PascalCase")]
pub enum TaintEffect {
    /// No new allocation of the device.
    #[default]
    NoSchedule,
    /// No new allocation, and pods using the device are evicted.
    NoExecute,
    /// Informational only.
    None,
}

impl TaintEffect {
    /// From its API spelling.
    pub fn parse(s: &str) -> Option<TaintEffect> {
        match s {
            "NoSchedule" => Some(TaintEffect::NoSchedule),
            "NoExecute" => Some(TaintEffect::NoExecute),
            "None" => Some(TaintEffect::None),
            _ => None,
        }
    }

    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::NoExecute => "NoExecute",
            TaintEffect::None => "None",
        }
    }
}

/// Which Xids decide a fault (alone or repeated), and how many GPUs the node should have: what a
/// reading is judged by (the daemon, `nvlabel health`). The one home of these values: their rows
/// write them into [`HealthSettings::judging`], held whole by [`HealthConfig::settings`], which
/// the rules borrow.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Judging {
    /// `--health-ignore-xids`: Xids that are never faults.
    pub ignored_xids: BTreeSet<u64>,
    /// `--health-fatal-xids`: Xids that are always faults.
    pub fatal_xids: BTreeSet<u64>,
    /// `--health-expected-gpus`: the GPUs the node should have (the node label wins).
    pub expected_gpus: Option<u32>,
    /// `--health-xid-thresholds`: Xids that are a fault when they repeat on one GPU.
    pub xid_thresholds: crate::health::values::fault::Thresholds,
}

/// The default condition type.
pub const DEFAULT_CONDITION_TYPE: &str = "GPUHealthy";
/// Where Linux keeps the id of the current boot.
pub const DEFAULT_BOOT_ID_FILE: &str = "/proc/sys/kernel/random/boot_id";

/// Health's flags, as their rows in `config/` resolve them: held whole by the settings and by
/// [`HealthConfig::settings`], never copied field by field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthSettings {
    /// `--health`: publish the Node condition.
    pub enabled: bool,
    /// `--health-condition-type`.
    pub condition_type: String,
    /// `--health-ignore-xids`, `--health-fatal-xids`, `--health-xid-thresholds` and
    /// `--health-expected-gpus`: written by their rows here and read by health's rules as this
    /// very struct (handed over whole).
    pub judging: Judging,
    /// `--boot-id-file`.
    pub boot_id_file: PathBuf,
    /// `--instance`: the deployment's ServiceAccount, where several share a cluster.
    pub instance: Option<String>,
    /// `--health-taint-effect`: the effect of the DRA device taints.
    pub taint_effect: TaintEffect,
    /// `--health-nvml-timeout`: how long an NVML call may run.
    pub nvml_timeout: Duration,
    /// `--health-recovery-hold`: how long a fault must read as gone, in every reading, before
    /// it clears in place.
    pub recovery_hold: Duration,
}

/// The default `--health-nvml-timeout`.
pub const DEFAULT_NVML_TIMEOUT: Duration = Duration::from_secs(30);

/// The default `--health-recovery-hold`: at the default 60 s interval, three readings in a row
/// (two minutes) must agree that a fault is gone, so a reset still settling or a value that
/// flickers never clears it, and a repaired node is back well within NodeHealthCheck's usual
/// five-minute wait.
pub const DEFAULT_RECOVERY_HOLD: Duration = Duration::from_secs(120);

impl Default for HealthSettings {
    fn default() -> HealthSettings {
        HealthSettings {
            enabled: false,
            condition_type: DEFAULT_CONDITION_TYPE.into(),
            // No listed Xids (the catalog decides, `crate::health::judging::action`), no expected count.
            judging: Judging::default(),
            boot_id_file: DEFAULT_BOOT_ID_FILE.into(),
            instance: None,
            taint_effect: TaintEffect::default(),
            nvml_timeout: DEFAULT_NVML_TIMEOUT,
            recovery_hold: DEFAULT_RECOVERY_HOLD,
        }
    }
}

/// Health's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthConfig {
    /// Health\'s own flags, whole.
    pub settings: HealthSettings,
    /// `--node-name`: the Node health writes to (none: health cannot run in the daemon).
    pub node: Option<String>,
    /// `--pod-name`: the instance named in Events (`nvlabel-<node>` without one).
    pub pod: Option<String>,
    /// `--instance`: the deployment whose health this is, where several share a cluster.
    pub instance: Option<crate::health::values::instance::Instance>,
    /// Whether faulty GPUs' devices are tainted (`--allocation-mode` `dra` or `auto`).
    pub taints_devices: bool,
    /// Where NVML and sysfs are read.
    pub probe: ProbeOptions,
    /// The time between readings: the labelling interval (at least 1 s; 60 s when it is
    /// infinite, since health must still be looked at).
    pub every: Duration,
}

impl HealthConfig {
    /// Health on node `n1` reading through `probe`, every default otherwise: the unit tests' base.
    #[cfg(test)]
    pub(crate) fn for_tests(probe: ProbeOptions) -> HealthConfig {
        HealthConfig {
            settings: HealthSettings { enabled: true, ..Default::default() },
            node: Some("n1".into()),
            pod: None,
            instance: None,
            taints_devices: false,
            probe,
            every: Duration::from_secs(60),
        }
    }

    /// The reporting instance health's Events carry.
    pub fn event_instance(&self, node: &str) -> String {
        self.pod.clone().unwrap_or_else(|| format!("nvlabel-{node}"))
    }
}
