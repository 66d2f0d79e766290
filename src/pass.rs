//! One labelling pass: the snapshot (the session's device source, or a snapshot file), then the
//! labels, with what went wrong along the way and which source could not start, if one could
//! not. Publishing is the caller's.

use crate::exit::Classify;
use crate::labels::{self, LabelConfig, Labels};
use crate::probe::{self, ProbeError, Session, Source};
use crate::snapshot::{Snapshot, SnapshotError};
use crate::troubles::{Trouble, Troubles};

/// What a pass is told, made by `config/` from the flags, env and the config file.
#[derive(Debug, Clone, PartialEq)]
pub struct PassConfig {
    /// `--snapshot`: a snapshot file read instead of the driver.
    pub snapshot: Option<std::path::PathBuf>,
    /// Where the probe reads.
    pub probe: probe::ProbeOptions,
    /// `--fail-on-init-error`: whether a driver that does not start fails the pass.
    pub fail_on_init_error: bool,
    /// What the labelers are told, the label profile included (the daemon sets it for each
    /// pass where `--allocation-mode auto` decides it).
    pub labels: LabelConfig,
}

/// Why a pass failed.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    /// The device source could not be used.
    #[error(transparent)]
    Probe(#[from] ProbeError),
    /// The `--snapshot` file is unusable.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// The labelling pass itself failed (a panic on, or the loss of, its thread).
    #[error("labelling pass failed: {0}")]
    Worker(#[from] crate::worker::WorkerError),
    /// The pass's work has not returned within `--health-nvml-timeout`.
    #[error("the labelling pass has not returned for {} (--health-nvml-timeout is {}): {waiting_on}", humantime::format_duration(*.waited), humantime::format_duration(*.limit))]
    Unresponsive {
        /// How long the pass has waited so far.
        waited: std::time::Duration,
        /// The timeout.
        limit: std::time::Duration,
        /// What it waits on: the driver call it is in, or none.
        waiting_on: String,
    },
}

impl Classify for PassError {
    fn is_bad_configuration(&self) -> bool {
        match self {
            PassError::Probe(e) => e.is_bad_configuration(),
            PassError::Snapshot(e) => e.is_bad_configuration(),
            PassError::Worker(e) => e.is_bad_configuration(),
            PassError::Unresponsive { .. } => false,
        }
    }
}

/// The node's snapshot: from `--snapshot`, or probed through `session`. A device source that
/// does not start, with `--fail-on-init-error=false`, yields the node-level facts only, as GFD's
/// null manager does.
pub fn snapshot(config: &PassConfig, session: &Session) -> Result<Snapshot, PassError> {
    Ok(probed(config, session)?.snapshot)
}

/// What probing gave: the snapshot, and the device source that could not start, if one could not.
struct Probed {
    snapshot: Snapshot,
    down: Option<Source>,
}

/// [`snapshot`], and the device source that could not start, if one could not.
fn probed(config: &PassConfig, session: &Session) -> Result<Probed, PassError> {
    if let Some(path) = &config.snapshot {
        return Ok(Probed { snapshot: Snapshot::load(path)?, down: None });
    }
    let opts = &config.probe;
    match probe::probe(session, opts) {
        Ok(snapshot) => Ok(Probed { snapshot, down: None }),
        Err(e) if e.is_init() && !config.fail_on_init_error => {
            let mut snapshot = probe::probe_files(session, opts);
            let driver = e.source().driver();
            snapshot.issues.push(crate::snapshot::Issue {
                device: None,
                function: e.function().into(),
                error: e.to_string(),
                effect: format!(
                    "Failed to initialize {driver}; labelling without GPUs, {driver} is tried again"
                ),
                source: Some(e.source()),
            });
            Ok(Probed { snapshot, down: Some(e.source()) })
        }
        Err(e) => Err(e.into()),
    }
}

/// Computes the labels of one pass, with the warnings that came with them.
pub fn label(snapshot: &Snapshot, config: &LabelConfig) -> labels::Outcome {
    let mut outcome = labels::compute(snapshot, config);
    // GFD's warning, but only when there really is nothing besides the timestamp.
    if outcome.labels.keys().all(|k| k == labels::TIMESTAMP_KEY) {
        outcome.warnings.push("No labels generated from any source".into());
    }
    outcome
}

/// Seconds since the epoch (the clock lives in a leaf, [`crate::clock`]).
pub use crate::clock::now;

/// What one pass found.
#[derive(Debug, Clone, PartialEq)]
pub struct Pass {
    /// The labels.
    pub labels: Labels,
    /// What the probe could not read.
    pub issues: Vec<crate::snapshot::Issue>,
    /// The labelers' warnings.
    pub warnings: Vec<String>,
    /// MPS is configured on a node with MIG enabled, so no sharing is labelled.
    pub mps_on_mig: bool,
    /// The device source that could not start (with `--fail-on-init-error=false`): the labels
    /// lack every GPU label.
    pub down: Option<Source>,
}

impl Pass {
    /// Everything that went wrong, for [`crate::troubles::Troubles`].
    pub fn troubles(&self) -> Vec<Trouble> {
        let issues = self.issues.iter().cloned().map(Trouble::Issue);
        issues.chain(self.warnings.iter().cloned().map(Trouble::Warning)).collect()
    }
}

/// One pass through `session`: the snapshot, then the labels.
pub fn run(config: &PassConfig, session: &Session) -> Result<Pass, PassError> {
    let Probed { snapshot, down } = probed(config, session)?;
    let outcome = label(&snapshot, &config.labels);
    Ok(Pass {
        labels: outcome.labels,
        issues: snapshot.issues,
        warnings: outcome.warnings,
        mps_on_mig: outcome.mps_on_mig,
        down,
    })
}

/// The NFD hook (`nvlabel hook`): feature-file lines without a timestamp (NFD runs hooks on every
/// rescan, so one would change every run); nothing at all when there is no driver.
pub fn hook(config: &PassConfig) -> Result<String, PassError> {
    let strict = PassConfig {
        fail_on_init_error: true,
        labels: LabelConfig { timestamp: None, ..config.labels.clone() },
        ..config.clone()
    };
    match run(&strict, &Session::new()) {
        Ok(pass) => {
            Troubles::default().update(pass.troubles());
            Ok(crate::publish::render::render_text(&pass.labels))
        }
        Err(PassError::Probe(e)) if e.is_init() => {
            tracing::info!(error = %e, "no NVIDIA driver; the hook reports nothing");
            Ok(String::new())
        }
        Err(e) => Err(e),
    }
}
