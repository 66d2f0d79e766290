//! What the labelling loop is told, and where it comes from: plain values made by `config/`
//! (the loop never reads flags, env or the config file), and the [`Inputs`] that read them again
//! on a reload or when this node's config label changes.

use crate::duration::Interval;
use crate::health::config::HealthConfig;
use crate::labels::AllocationMode;
use crate::pass::PassConfig;
use crate::publish::{SetupError, Target};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The labelling loop's configuration.
#[derive(Debug, Clone)]
pub struct LoopConfig {
    /// What each pass is told (its profile aside, which `allocation` decides).
    pub pass: PassConfig,
    /// `--allocation-mode`: the fixed profile, or `auto` decided by this node's slices.
    pub allocation: AllocationMode,
    /// `--node-name`: this node (its Node is watched where the writer, the config label or
    /// health needs it).
    pub node: Option<String>,
    /// Where labels go, or why the writer cannot be set up (retried every pass).
    pub target: Result<Target, Arc<SetupError>>,
    /// `--sleep-interval`.
    pub interval: Interval,
    /// `--health-nvml-timeout`: how long a pass's NVML work may run.
    pub nvml_timeout: Duration,
    /// With `--extended-labels`, the sharing cross-check's grace period (`--sharing-check-grace`).
    pub sharing_check: Option<Duration>,
    /// Notes for the log about how values were read (bare-number durations).
    pub notes: Vec<String>,
    /// Health's configuration, handed on to health when it changes.
    pub health: HealthConfig,
}

/// A reload that was rejected: the last good configuration stays.
pub type Rejected = Box<dyn std::error::Error + Send + Sync>;

/// Where the loop's configuration comes from (the command line, env and the config file, in the
/// process): read again on a reload, and when this node's config label changes.
pub trait Inputs: Send + Sync {
    /// The configuration in force.
    fn current(&self) -> &LoopConfig;
    /// Reads the configuration again (`force`: even if no file changed); whether it changed.
    fn reload(&mut self, force: bool) -> Result<bool, Rejected>;
    /// Sets this node's config label; whether it differs from the one in force.
    fn set_label(&mut self, label: Option<String>) -> bool;
    /// Whether the configuration follows this node's config label (a ConfigMap of several keys).
    fn follows_label(&self) -> bool;
    /// The directories whose changes may change the configuration.
    fn watched_dirs(&self) -> Vec<PathBuf>;
}
