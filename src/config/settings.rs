//! Settings: the command line, env, the config file's `flags` and defaults resolved into one
//! value ([`super::resolve`]), which `main` and [`crate::app::startup`] read; the rooms get their own
//! configuration made from it (`rooms.rs`).

use super::file::FileFlags;
pub use super::flags::DEFAULT_OUTPUT_FILE;
use crate::duration::Interval;
use crate::labels::{AllocationMode, MigStrategy};
use crate::logging::LogFormat;
use crate::publish::{Format, Sink};
use std::path::{Path, PathBuf};

/// Everything resolved: command line over env over the config file over defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// `--mig-strategy`.
    pub mig_strategy: MigStrategy,
    /// `--fail-on-init-error`.
    pub fail_on_init_error: bool,
    /// `--oneshot`.
    pub oneshot: bool,
    /// `--no-timestamp`.
    pub no_timestamp: bool,
    /// `--extended-labels`.
    pub extended_labels: bool,
    /// `--allocation-mode`.
    pub allocation_mode: AllocationMode,
    /// `--sharing-check-grace`.
    pub sharing_check_grace: std::time::Duration,
    /// `--sleep-interval`.
    pub sleep_interval: Interval,
    /// `--output-file`; empty means stdout.
    pub output_file: String,
    /// `--expiry`.
    pub expiry: Option<std::time::Duration>,
    /// `--config-file`.
    pub config_file: Option<PathBuf>,
    /// `--config-dir`.
    pub config_dir: Option<PathBuf>,
    /// `--config-default`.
    pub config_default: Option<String>,
    /// `--use-node-feature-api`.
    pub use_node_feature_api: bool,
    /// `--namespace`.
    pub namespace: String,
    /// `--node-name`.
    pub node_name: Option<String>,
    /// `--pod-name`.
    pub pod_name: Option<String>,
    /// `--kubeconfig`.
    pub kubeconfig: Option<String>,
    /// `--kube-api-qps`.
    pub kube_api_qps: f64,
    /// `--kube-api-burst`.
    pub kube_api_burst: u32,
    /// `--format`.
    pub format: Format,
    /// `--sink`.
    pub sink: Sink,
    /// `--metrics-addr`; empty means none.
    pub metrics_addr: String,
    /// Where the probe reads, as the probe takes it: `--device-discovery-strategy`,
    /// `--nvml-library`, `--cuda-library`, `--host-root`, `--pci-ids`, `--sysfs-root`,
    /// `--machine-type-file` (their rows write it; `topology` follows `--extended-labels`).
    pub probe: crate::probe::ProbeOptions,
    /// `--snapshot`.
    pub snapshot: Option<PathBuf>,
    /// `--log-format`.
    pub log_format: LogFormat,
    /// Notes for the log about how values were read (bare-number durations).
    pub notes: Vec<String>,
    /// `--health` and its options.
    pub health: super::health_checks::HealthSettings,
}

/// The flags section of a config file and where it came from.
pub type FileLayer<'a> = Option<(&'a Path, &'a FileFlags)>;
