//! The long-running labeler: a pass (probe → labels → publish), then wait for the interval, the
//! feature file's expiry refresh, a config change (the file, or the node label choosing another
//! ConfigMap key), or a signal. A config change is applied without restarting; an invalid one
//! keeps the last good config and labels. Everything else lives in modules named for it: the
//! configuration in `config::source`, the metrics in [`metrics`], the file watch in [`watch`].

mod cross_check;
pub mod drift;
pub mod metrics;
pub mod publisher;
pub mod watch;

pub use metrics::{Metrics, NvmlFunction, PublishFailure};

use crate::conditions::Conditions;
use crate::config::{ConfigState, ReloadError, Settings};
use crate::duration::Interval;
use crate::kubeapi::backoff::FullJitter;
use crate::kubeapi::node_view::NodeView;
use crate::kubeapi::object_watch::ObjectWatch;
use crate::pass::{self, PassError};
use crate::publish::{PublishError, SetupError, Target};
use crate::sharing_check::SharingCheck;
use futures::stream::BoxStream;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use publisher::Publisher;
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

/// Retries while NVML is down or publishing fails: full jitter from 2 s, doubling to 5 minutes.
const RETRY: FullJitter = FullJitter::new(Duration::from_secs(2), Duration::from_secs(300));

/// The labeler's state between passes.
pub struct Daemon {
    config: ConfigState,
    metrics: Arc<Metrics>,
    /// The writer, the labels last published, drift repair and refresh.
    publisher: Publisher,
    /// Failed passes in a row, and the wait before the next attempt.
    retry: FullJitter,
    retry_wait: Option<Duration>,
    /// Draws the jitter (a test seam: tests draw the largest wait to count attempts exactly).
    draw: fn() -> f64,
    /// What went wrong in the last pass, logged when it starts and when it ends.
    conditions: Conditions,
    /// The Node's allocatable resources as the node watch last saw them.
    watched_allocatable: Option<BTreeMap<String, String>>,
    /// The sharing cross-check's memory (created with the grace period in force).
    sharing_check: Option<SharingCheck>,
}

impl Daemon {
    /// The daemon for a configuration already loaded.
    pub fn new(config: ConfigState, metrics: Arc<Metrics>) -> Daemon {
        Daemon {
            config,
            metrics,
            publisher: Publisher::new(None),
            retry: RETRY,
            retry_wait: None,
            draw: rand::random::<f64>,
            conditions: Conditions::default(),
            watched_allocatable: None,
            sharing_check: None,
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
        self.publisher.watch_objects(node_watch);
    }

    /// Gives the API writers (and nothing else) their client.
    pub fn set_client(&mut self, client: Option<kube::Client>) {
        self.publisher = Publisher::new(client);
    }

    /// Draws retry waits with `draw` (a number in `[0, 1)`) instead of at random.
    pub fn with_jitter(mut self, draw: fn() -> f64) -> Daemon {
        self.draw = draw;
        self
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
        let target = self.target()?;
        self.publisher.writer(target).await?.publish(&pass.labels).await?;
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
                self.back_off(true);
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
        let count = labels.len() as i64;
        let published = match self.target() {
            Ok(target) => self.publisher.publish(target, labels, &self.metrics).await,
            Err(e) => {
                tracing::error!(error = %e, "cannot set up the label writer; will retry");
                self.metrics.publish_failed("setup", crate::publish::FailureReason::Setup);
                Err(crate::publish::FailureReason::Setup)
            }
        };
        self.back_off(nvml_down || published.is_err());
        if published.is_ok() {
            self.metrics.health.record(true);
            self.metrics.labels_published.set(count);
            self.metrics.last_success.set(pass::now() as f64);
            self.cross_check();
        }
        tracing::debug!(elapsed_ms = started.elapsed().as_millis() as u64, "pass done");
        Ok(())
    }

    /// After a pass that could not do its whole job (NVML down, publish failed), the next one
    /// waits a full-jitter backoff (from 2 s, doubling to 5 minutes, never under the 1 s floor)
    /// instead of the interval; a good pass goes back to the interval.
    fn back_off(&mut self, failed: bool) {
        self.retry_wait = if failed {
            Some(self.retry.next_with((self.draw)()).max(MIN_INTERVAL))
        } else {
            self.retry.reset();
            None
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
        self.retry_wait.or(interval)
    }

    /// Runs until `control` says stop (or closes). `node` is the Node's view as it changes, if
    /// watched. Passes run on a deadline set when the last one ended: no other event moves it.
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
        let mut floor_noted = None;
        loop {
            self.metrics.health.busy(true);
            // A pass is abandoned for a signal: shutdown never waits on the network.
            let heard = tokio::select! {
                result = self.run_pass() => { result?; None }
                message = control.recv() => Some(message),
            };
            if let Some(message) = heard {
                // A reload abandons the pass and starts a new one with the new configuration.
                match self.heard(message, "during a pass") {
                    true => return Ok(()),
                    false => continue,
                }
            }
            self.metrics.health.busy(false);
            watch.follow(self.config.watched_dirs())?;
            let next_pass = self.next_pass_in(&mut floor_noted).map(|d| tokio::time::Instant::now() + d);
            loop {
                // The feature file's expiry is refreshed on its own clock, whatever the interval; a
                // failed refresh waits like a failed pass, so a broken file is not a hot loop.
                let refresh_in =
                    self.publisher.refresh_in().map(|d| d.max(self.retry_wait.unwrap_or(Duration::ZERO)));
                // A repair that must wait (a fight) is a timer here, so signals are heard meanwhile.
                let repair_in = self
                    .publisher
                    .repair_due()
                    .map(|at| at.saturating_duration_since(std::time::Instant::now()));
                let next_view = async {
                    match node.as_mut() {
                        Some(s) => s.next().await,
                        None => futures::future::pending().await,
                    }
                };
                tokio::select! {
                    () = sleep_until_or_never(next_pass) => break,
                    () = sleep_or_never(refresh_in) => {
                        let failed = self.publisher.refresh(&self.metrics).await.is_err();
                        self.back_off(failed);
                    }
                    Some(()) = self.publisher.next_change() => {
                        self.publisher.object_changed(std::time::Instant::now());
                        if self.settings().extended_labels {
                            self.cross_check();
                        }
                    }
                    () = sleep_or_never(repair_in) => {
                        if self.publisher.repair(&self.metrics).await.is_err() {
                            self.back_off(true);
                        }
                    }
                    () = watch.changed() => {
                        if self.reload(false) {
                            break;
                        }
                        watch.follow(self.config.watched_dirs())?;
                    }
                    Some(view) = next_view => {
                        self.watched_allocatable = Some(view.allocatable);
                        if self.set_label(view.config_label) && self.reload(false) {
                            break;
                        }
                        self.cross_check();
                    }
                    // A signal that arrived during a pass waits in the channel: none is lost.
                    message = control.recv() => {
                        if self.heard(message, "") {
                            return Ok(());
                        }
                        break;
                    }
                }
            }
        }
    }

    /// Acts on a control message; returns true to stop.
    fn heard(&mut self, message: Option<Control>, when: &str) -> bool {
        match message {
            Some(Control::Reload) => {
                tracing::info!("Received SIGHUP, reloading");
                self.reload(true);
                false
            }
            Some(Control::Shutdown) | None if when.is_empty() => {
                tracing::info!("shutting down; published labels stay in place");
                true
            }
            Some(Control::Shutdown) | None => {
                tracing::info!("shutting down {when} (abandoned); published labels stay in place");
                true
            }
        }
    }
}

/// Sleeps until `at`, or forever.
async fn sleep_until_or_never(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => futures::future::pending().await,
    }
}

/// Sleeps for `d`, or forever.
async fn sleep_or_never(d: Option<Duration>) {
    match d {
        Some(d) => tokio::time::sleep(d).await,
        None => futures::future::pending().await,
    }
}
