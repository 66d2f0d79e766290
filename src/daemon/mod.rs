//! The long-running labeler: a pass (probe → labels → publish), then wait for the interval, the
//! feature file's expiry refresh, a config change (the file, or the node label choosing another
//! ConfigMap key), or a signal. A config change is applied without restarting; an invalid one
//! keeps the last good config and labels. Everything else lives in modules named for it: the
//! configuration in `config::source`, the metrics in [`metrics`], the file watch in [`watch`].

pub mod drift;
pub mod metrics;
pub mod watch;

pub use metrics::{Metrics, NvmlFunction, PublishFailure};

use crate::conditions::Conditions;
use crate::config::{ConfigState, ReloadError, Settings};
use crate::config_label::NodeView;
use crate::duration::Interval;
use crate::labels::Labels;
use crate::pass::{self, PassError};
use crate::publish::object_watch::ObjectWatch;
use crate::publish::{PublishError, SetupError, Target, Writer};
use crate::sharing_check::{self, Finding, SharingCheck};
use futures::stream::BoxStream;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use metrics::Resource;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// What the process is told from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// SIGHUP: re-read the configuration and label again.
    Reload,
    /// SIGTERM/SIGINT/SIGQUIT: stop after the write in flight; labels stay.
    Shutdown,
}

/// Why the daemon stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The configuration at start-up is invalid.
    #[error(transparent)]
    Config(#[from] ReloadError),
    /// A pass failed in a way that ends the process (NVML init with `--fail-on-init-error`).
    #[error(transparent)]
    Pass(#[from] PassError),
    /// Publishing failed in a one-shot run.
    #[error(transparent)]
    Publish(#[from] PublishError),
    /// The writer could not be set up.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// The config watch could not be set up.
    #[error("cannot watch the configuration: {0}")]
    Watch(#[from] notify::Error),
}

/// The shortest time between passes.
const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// The longest wait between retries while NVML is down or publishing fails.
const RETRY_CAP: Duration = Duration::from_secs(300);

/// The labeler's state between passes.
pub struct Daemon {
    config: ConfigState,
    metrics: Arc<Metrics>,
    /// The labels last published, for logging what changed and for expiry refreshes.
    published: Option<Labels>,
    /// NVML was down or the publish failed in the last pass: look again sooner, with backoff.
    retry_soon: Option<Duration>,
    /// The writer and the target it was built for.
    writer: Option<(Target, Box<dyn Writer>)>,
    client: Option<kube::Client>,
    /// What went wrong in the last pass, logged when it starts and when it ends.
    conditions: Conditions,
    /// The Node's allocatable resources as the node watch last saw them.
    watched_allocatable: Option<BTreeMap<String, String>>,
    /// The sharing cross-check's memory (created with the grace period in force).
    sharing_check: Option<SharingCheck>,
    /// Whether the API writers decide from watches (the daemon), and this Node's one watch.
    watching: Option<Option<ObjectWatch<Node>>>,
    /// Drift repairs, so a fight with another writer does not become a hot loop.
    drift: drift::DriftGuard,
    /// When the next drift repair runs, if one is waiting.
    repair_due: Option<std::time::Instant>,
    /// The changes of the object the writer publishes into, kept across passes so none is missed.
    object_changes: Option<tokio::sync::watch::Receiver<u64>>,
}

impl Daemon {
    /// The daemon for a configuration already loaded.
    pub fn new(config: ConfigState, metrics: Arc<Metrics>) -> Daemon {
        Daemon {
            config,
            metrics,
            published: None,
            retry_soon: None,
            writer: None,
            client: None,
            conditions: Conditions::default(),
            watched_allocatable: None,
            sharing_check: None,
            watching: None,
            drift: drift::DriftGuard::default(),
            repair_due: None,
            object_changes: None,
        }
    }

    /// The settings in force.
    pub fn settings(&self) -> &Settings {
        &self.config.loaded().settings
    }

    /// Where labels go, as the settings in force say.
    pub fn target(&self) -> Result<Target, SetupError> {
        self.settings().target()
    }

    /// Makes the API writers decide from watches, the Node writer from `node_watch` (this Node's
    /// one watch, shared with the config-label watch): a pass that changes nothing sends nothing,
    /// and someone else's change to our labels is repaired at once.
    pub fn watch_objects(&mut self, node_watch: Option<ObjectWatch<Node>>) {
        self.watching = Some(node_watch);
        self.writer = None;
    }

    /// Gives the API writers (and nothing else) their client.
    pub fn set_client(&mut self, client: Option<kube::Client>) {
        self.client = client;
        self.writer = None;
    }

    /// The writer for the current target; rebuilt when a reload changed the target.
    async fn writer(&mut self) -> Result<&mut Box<dyn Writer>, SetupError> {
        let target = self.target()?;
        if self.writer.as_ref().is_none_or(|(built_for, _)| *built_for != target) {
            let writer = match &self.watching {
                Some(node_watch) => target.build_with(self.client.as_ref(), true, node_watch.clone()).await?,
                None => target.build(self.client.as_ref()).await?,
            };
            self.object_changes = writer.changes();
            self.writer = Some((target, writer));
        }
        Ok(&mut self.writer.as_mut().expect("just built").1)
    }

    /// Re-reads the configuration. Returns whether it changed; a rejected one is logged, counted,
    /// and the last good configuration stays.
    pub fn reload(&mut self, force: bool) -> bool {
        match self.config.reload(force) {
            Ok(changed) => changed,
            Err(e) => {
                self.metrics.config_reload_failures.inc();
                tracing::error!(error = %e, "configuration rejected; keeping the last good one");
                false
            }
        }
    }

    /// Sets the node's config label; returns whether it differs from the one in force.
    pub fn set_label(&mut self, label: Option<String>) -> bool {
        self.config.set_label(label)
    }

    /// The one-shot run: one pass, and any failure is the process's.
    pub async fn oneshot(&mut self) -> Result<(), DaemonError> {
        let pass = self.compute().await?;
        self.conditions.update(pass.conditions());
        self.writer().await?.publish(&pass.labels).await?;
        Ok(())
    }

    /// Probes and labels on the blocking thread (NVML calls block).
    async fn compute(&self) -> Result<pass::Pass, PassError> {
        let loaded = self.config.loaded();
        let (settings, sharing, timestamp) =
            (loaded.settings.clone(), loaded.config.sharing.clone(), loaded.timestamp);
        tokio::task::spawn_blocking(move || pass::run(&settings, sharing, timestamp))
            .await
            .unwrap_or_else(|e| Err(PassError::Panicked(e)))
    }

    /// One daemon pass, publishing only what changed. Only an NVML init failure with
    /// `--fail-on-init-error` ends the process; other failures are logged and the labels stay.
    pub async fn run_pass(&mut self) -> Result<(), PassError> {
        let started = std::time::Instant::now();
        self.metrics.passes.inc();
        let computed = self.compute().await;
        self.metrics.pass_duration.observe(started.elapsed().as_secs_f64());
        let pass = match computed {
            Ok(pass) => pass,
            Err(PassError::Probe(e)) if e.is_init() && self.settings().fail_on_init_error => {
                return Err(PassError::Probe(e));
            }
            Err(e) => {
                tracing::error!(error = %e, "labelling pass failed; the published labels stay");
                if let PassError::Probe(p) = &e {
                    self.metrics
                        .nvml_errors
                        .get_or_create(&NvmlFunction { function: p.function().into() })
                        .inc();
                }
                self.metrics.health.record(false);
                return Ok(());
            }
        };
        for issue in pass.issues.iter().filter(|i| i.function.starts_with("nvml")) {
            self.metrics.nvml_errors.get_or_create(&NvmlFunction { function: issue.function.clone() }).inc();
        }
        self.conditions.update(pass.conditions());
        self.metrics.mps_on_mig.set(i64::from(pass.mps_on_mig));
        let nvml_down = pass.nvml_down();
        let labels = pass.labels;
        let writer = match self.writer().await {
            Ok(w) => w,
            Err(e) => {
                tracing::error!(error = %e, "cannot set up the label writer; will retry");
                self.metrics.publish_failed("setup", "setup");
                self.back_off(true);
                return Ok(());
            }
        };
        let name = writer.name();
        // What someone else did to our output since the last pass (a feature file removed or
        // overwritten): this publish repairs it, and it is counted as drift.
        let drifted = writer.drifted();
        let result = writer.publish(&labels).await;
        self.back_off(nvml_down || result.is_err());
        match result {
            Ok(changed) => {
                if changed && drifted && self.published.as_ref() == Some(&labels) {
                    self.metrics.drift_repairs.inc();
                    tracing::info!(writer = name, "someone changed nvlabel's labels; put them back");
                } else if changed {
                    log_changes(self.published.as_ref(), &labels, name);
                }
                self.metrics.health.record(true);
                self.metrics.labels_published.set(labels.len() as i64);
                self.metrics.last_success.set(pass::now() as f64);
                self.published = Some(labels);
                self.cross_check();
            }
            Err(e) => {
                tracing::error!(writer = name, error = %e, "publishing labels failed; will retry");
                self.metrics.publish_failed(name, e.reason());
            }
        }
        tracing::debug!(elapsed_ms = started.elapsed().as_millis() as u64, "pass done");
        Ok(())
    }

    /// With `--extended-labels`: compares what the published labels promise with the Node's
    /// allocatable resources, from the writer's read of the Node or the node watch.
    fn cross_check(&mut self) {
        let (extended, grace) = {
            let s = self.settings();
            (s.extended_labels, s.sharing_check_grace)
        };
        if !extended {
            return;
        }
        let from_writer = self.writer.as_ref().and_then(|(_, w)| w.node_allocatable());
        let (Some(labels), Some(allocatable)) =
            (&self.published, from_writer.or(self.watched_allocatable.clone()))
        else {
            return;
        };
        let promised = sharing_check::promised(labels, &self.config.loaded().config.sharing);
        for resource in promised.keys() {
            // Present at 0 from the first check, so alerts see the series.
            let _ = self.metrics.sharing_mismatch.get_or_create(&Resource { resource: resource.clone() });
        }
        let check = self.sharing_check.get_or_insert_with(|| SharingCheck::new(grace));
        for finding in check.check(&promised, &allocatable, std::time::Instant::now()) {
            match finding {
                Finding::Mismatch { resource, promised, allocatable } => {
                    let shown = allocatable.map_or("none".to_string(), |a| a.to_string());
                    tracing::warn!(
                        %resource,
                        promised,
                        allocatable = %shown,
                        "the sharing labels promise {promised} {resource}, the node has {shown} allocatable; labels unchanged"
                    );
                    self.metrics.sharing_mismatch.get_or_create(&Resource { resource }).set(1);
                }
                Finding::Cleared { resource } => {
                    tracing::info!(%resource, "resolved: the sharing labels and the node's allocatable agree");
                    self.metrics.sharing_mismatch.get_or_create(&Resource { resource }).set(0);
                }
            }
        }
    }

    /// Puts the last published labels back after someone changed them (the writer's watch saw it).
    async fn repair_drift(&mut self) {
        let Some(labels) = self.published.clone() else { return };
        let Some((_, writer)) = self.writer.as_mut() else { return };
        if !writer.drifted() {
            return;
        }
        let name = writer.name();
        match writer.publish(&labels).await {
            Ok(_) => {
                self.metrics.drift_repairs.inc();
                tracing::info!(writer = name, "someone changed nvlabel's labels; put them back");
                if self.drift.repaired(std::time::Instant::now()) {
                    self.metrics.drift_fights.inc();
                    tracing::warn!(
                        writer = name,
                        "another writer keeps changing nvlabel's labels back; repairing at most once a minute"
                    );
                }
            }
            Err(e) => {
                tracing::error!(writer = name, error = %e, "repairing the published labels failed; will retry");
                self.metrics.publish_failed(name, e.reason());
                self.back_off(true);
            }
        }
    }

    /// Writes the last published labels again because the writer asked for it (an expiry that
    /// must move forward); no probe, no new labels.
    async fn refresh(&mut self) {
        let Some(labels) = self.published.clone() else { return };
        let Some((_, writer)) = self.writer.as_mut() else { return };
        if let Err(e) = writer.publish(&labels).await {
            let name = writer.name();
            tracing::error!(writer = name, error = %e, "refreshing the published labels failed; will retry");
            self.metrics.publish_failed(name, e.reason());
            self.back_off(true);
        }
    }

    /// After a pass that could not do its whole job (NVML down, publish failed), the next one
    /// comes after 1 s, 2 s, 4 s ... up to the cap, instead of after the full interval.
    fn back_off(&mut self, failed: bool) {
        self.retry_soon = match (failed, self.retry_soon) {
            (false, _) => None,
            (true, None) => Some(Duration::from_secs(1)),
            (true, Some(d)) => Some((d * 2).min(RETRY_CAP)),
        };
    }

    /// The time to the next pass: the interval (with its 1 s floor), or sooner while retrying.
    fn next_pass_in(&self, floor_noted: &mut Option<Duration>) -> Option<Duration> {
        let interval = match self.settings().sleep_interval {
            // GFD relabels in a busy loop on 0; one second is the floor here.
            Interval::Every(d) if d < MIN_INTERVAL => {
                if *floor_noted != Some(d) {
                    tracing::warn!(
                        requested = %humantime::format_duration(d),
                        used = "1s",
                        "--sleep-interval is below the 1s floor; passes run every second"
                    );
                    *floor_noted = Some(d);
                }
                Some(MIN_INTERVAL)
            }
            Interval::Every(d) => Some(d),
            Interval::Infinite => None,
        };
        *self.metrics.health.fresh_for.lock().unwrap_or_else(|p| p.into_inner()) =
            interval.map(|d| d * 3 + Duration::from_secs(60));
        match (self.retry_soon, interval) {
            (Some(retry), Some(i)) => Some(retry.min(i)),
            (Some(retry), None) => Some(retry),
            (None, i) => i,
        }
    }

    /// Runs until `control` says stop (or closes). `node` is the Node's view as it changes, if
    /// watched.
    pub async fn serve(
        mut self,
        mut node: Option<BoxStream<'static, NodeView>>,
        mut control: mpsc::Receiver<Control>,
    ) -> Result<(), DaemonError> {
        for note in &self.settings().notes {
            tracing::info!("{note}");
        }
        let mut watch = watch::ConfigWatch::new();
        watch.follow(self.config.watched_dirs())?;
        self.run_pass().await?;
        let mut floor_noted = None;
        loop {
            let next_pass = sleep_or_never(self.next_pass_in(&mut floor_noted));
            // The feature file's expiry is refreshed on its own clock, whatever the interval; a
            // failed refresh waits like a failed pass, so a broken file is not a hot loop.
            let refresh_in = self
                .writer
                .as_ref()
                .and_then(|(_, w)| w.refresh_in())
                .map(|d| d.max(self.retry_soon.unwrap_or(Duration::ZERO)));
            let refresh = sleep_or_never(refresh_in);
            // A change of the watched object may be drift; repairs are rate-limited, and a repair
            // that must wait is a timer here, so signals are still heard meanwhile.
            let repair = sleep_or_never(
                self.repair_due.map(|at| at.saturating_duration_since(std::time::Instant::now())),
            );
            let object_changed = async {
                match self.object_changes.as_mut() {
                    Some(rx) => rx.changed().await.ok(),
                    None => futures::future::pending().await,
                }
            };
            let next_view = async {
                match node.as_mut() {
                    Some(s) => s.next().await,
                    None => futures::future::pending().await,
                }
            };
            tokio::select! {
                () = next_pass => {}
                () = refresh => {
                    self.refresh().await;
                    continue;
                }
                Some(()) = object_changed => {
                    let drifted = self.writer.as_ref().is_some_and(|(_, w)| w.drifted());
                    if drifted && self.repair_due.is_none() {
                        self.repair_due = Some(self.drift.allowed_at(std::time::Instant::now()));
                    }
                    if self.settings().extended_labels {
                        self.cross_check();
                    }
                    continue;
                }
                () = repair => {
                    self.repair_due = None;
                    self.repair_drift().await;
                    continue;
                }
                () = watch.changed() => {
                    if !self.reload(false) {
                        watch.follow(self.config.watched_dirs())?;
                        continue;
                    }
                }
                Some(view) = next_view => {
                    self.watched_allocatable = Some(view.allocatable);
                    if !self.set_label(view.config_label) || !self.reload(false) {
                        self.cross_check();
                        continue;
                    }
                }
                // A signal that arrived during a pass waits in the channel: none is lost.
                message = control.recv() => match message {
                    Some(Control::Reload) => {
                        tracing::info!("Received SIGHUP, reloading");
                        self.reload(true);
                    }
                    Some(Control::Shutdown) | None => {
                        tracing::info!("shutting down; published labels stay in place");
                        return Ok(());
                    }
                },
            }
            watch.follow(self.config.watched_dirs())?;
            self.run_pass().await?;
        }
    }
}

/// Sleeps for `d`, or forever.
async fn sleep_or_never(d: Option<Duration>) {
    match d {
        Some(d) => tokio::time::sleep(d).await,
        None => futures::future::pending().await,
    }
}

/// Logs what a publish changed: one line, at info, only when something changed.
fn log_changes(before: Option<&Labels>, after: &Labels, writer: &str) {
    let empty = Labels::new();
    let before = before.unwrap_or(&empty);
    let added: Vec<&String> = after.keys().filter(|k| !before.contains_key(*k)).collect();
    let removed: Vec<&String> = before.keys().filter(|k| !after.contains_key(*k)).collect();
    let changed: Vec<String> = after
        .iter()
        .filter_map(|(k, v)| before.get(k).filter(|old| *old != v).map(|old| format!("{k}: {old} -> {v}")))
        .collect();
    tracing::info!(writer, labels = after.len(), ?added, ?removed, ?changed, "published labels");
}
