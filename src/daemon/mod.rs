//! The long-running labeler: a pass (probe → labels through [`runner`], then publish), then
//! wait for the next pass's time, doing meanwhile what comes (the feature file's expiry refresh, a
//! change of the watched object, a drift repair, slices that switch `auto`'s profile, a config
//! change from the file or the node label choosing another ConfigMap key, the Node's allocatable,
//! a signal). A config change is applied without restarting; an invalid one keeps the last good
//! config and labels. [`service`] owns the process: this loop, health, the HTTP endpoint and the
//! NVML session; [`crate::app::startup`] resolves what they start from. The loop's waiting is in
//! `serve.rs`, its retry schedule in `retry.rs`, the metrics in [`metrics`], the file watch in
//! [`watch`].

mod allocation;
pub mod config;
mod cross_check;
mod error;
pub mod metrics;
pub mod publisher;
mod retry;
pub mod runner;
mod serve;
pub mod service;
pub mod watch;

pub use error::{DaemonError, ThreadError};
pub use metrics::{DriverFunction, Metrics, PublishFailure};

use crate::health::config::HealthConfig;
use crate::kubeapi::node_view::NodeView;
use crate::kubeapi::object_watch::ObjectWatch;
use crate::kubeapi::remind::Say;
use crate::pass::{self, PassError};
use crate::probe::Session;
use crate::publish::Target;
use crate::troubles::Troubles;
use config::{Inputs, LoopConfig};
use cross_check::CrossCheck;
use futures::stream::BoxStream;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use publisher::Publisher;
use retry::{Retry, MIN_INTERVAL};
use runner::PassRunner;
use std::sync::Arc;
use tokio::sync::watch as broadcast;

/// What the process is told from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// SIGHUP: re-read the configuration and label again.
    Reload,
    /// SIGTERM/SIGINT/SIGQUIT: stop (a pass in flight is abandoned, a refresh or repair in
    /// flight finishes first); labels stay.
    Shutdown,
}

/// What the labeller is made of, given in one step (nothing can be set in the wrong order).
pub struct Parts {
    /// The configuration and how it is read again.
    pub config: Box<dyn Inputs>,
    /// The metrics it counts into.
    pub metrics: Arc<Metrics>,
    /// The API client, where the writer or the config label needs one.
    pub client: Option<kube::Client>,
    /// The process's NVML session.
    pub session: Session,
    /// Where the Node's config label and allocatable come from: `None` is this Node's own watch
    /// (when the settings ask for one); tests without an API server give a stream.
    pub views: Option<BoxStream<'static, NodeView>>,
    /// This node's ResourceSlices, watched by the owner: they decide `--allocation-mode auto`.
    pub slices: Option<crate::kubeapi::slices::SliceWatch>,
    /// How retry waits are drawn within their window: [`RANDOM`] in the process (tests draw the
    /// largest wait to count attempts exactly).
    pub draw: fn() -> f64,
}

/// Retry waits drawn at random in their window (full jitter).
pub const RANDOM: fn() -> f64 = rand::random::<f64>;

/// The labeler's state between passes.
pub struct Daemon {
    config: Box<dyn Inputs>,
    metrics: Arc<Metrics>,
    session: Session,
    /// Runs each pass on the labelling thread, with its deadline.
    runner: PassRunner,
    /// Health's configuration in force, for the health task after every reload that changes it.
    health: broadcast::Sender<Arc<HealthConfig>>,
    /// In a mutex only so the daemon is `Sync` (the loop takes it out when it starts).
    views: std::sync::Mutex<Option<BoxStream<'static, NodeView>>>,
    /// The writer, the labels last published, drift repair and refresh.
    publisher: Publisher,
    /// When the next pass comes after one that could not do its whole job.
    retry: Retry,
    /// What went wrong in the last pass, logged when it starts and when it ends.
    troubles: Troubles,
    /// Passes that failed whole, said when it starts, at most once a minute while it lasts, and
    /// when a pass works again (a hung driver fails every pass).
    failed_passes: crate::kubeapi::remind::Failures,
    /// The sharing labels against the Node's allocatable resources.
    cross: CrossCheck,
    /// What the session had cost at the last count (for the metrics' counters).
    costs: metrics::SessionCosts,
    /// The allocation mode, and the slices that decide `auto`.
    allocation: allocation::Allocation,
    /// This Node, watched (for the writer, the config label and health's expected GPU count).
    node_watch: Option<ObjectWatch<Node>>,
}

impl Daemon {
    /// The labeller, with this Node's one watch when the Node writer, the config label or health
    /// needs it (shared by all three, so a pass that changes nothing sends nothing).
    pub fn new(parts: Parts) -> Result<Daemon, ThreadError> {
        let Parts { config, metrics, client, session, views, slices, draw } = parts;
        let current = config.current().clone();
        let follows_label = config.follows_label();
        let node_writer = matches!(current.target, Ok(Target::Node(_)));
        let node_watch = match (&client, &current.node) {
            // Health reads the expected GPU count from the Node's labels too, and a clear by hand
            // of its condition.
            (Some(client), Some(node)) if follows_label || node_writer || current.health.settings.enabled => {
                Some(ObjectWatch::spawn(Api::all(client.clone()), node))
            }
            _ => None,
        };
        let views = views.or_else(|| {
            node_watch.clone().filter(|_| follows_label).map(|w| crate::kubeapi::node_view::views(w).boxed())
        });
        let publisher = Publisher::new(client, crate::publish::Watches::On(node_watch.clone()));
        let runner = PassRunner::new(session.clone())?;
        let allocation = allocation::Allocation::new(current.allocation, slices);
        Ok(Daemon {
            allocation,
            health: broadcast::channel(Arc::new(current.health)).0,
            config,
            metrics,
            session,
            runner,
            views: std::sync::Mutex::new(views),
            publisher,
            retry: Retry::new(draw),
            troubles: Troubles::default(),
            failed_passes: Default::default(),
            cross: CrossCheck::default(),
            costs: metrics::SessionCosts::default(),
            node_watch,
        })
    }

    /// This Node's watch, where the daemon keeps one (health shares it).
    pub fn node_watch(&self) -> Option<ObjectWatch<Node>> {
        self.node_watch.clone()
    }

    /// The configuration in force.
    pub fn config(&self) -> &LoopConfig {
        self.config.current()
    }

    /// Health's configuration now and after every reload that changes it.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<HealthConfig>> {
        self.health.subscribe()
    }

    /// Re-reads the configuration. Returns whether it changed; a rejected one is logged, counted,
    /// and the last good configuration stays. A change reaches the other tasks here.
    pub fn reload(&mut self, force: bool) -> bool {
        match self.config.reload(force) {
            Ok(changed) => {
                let health = self.config().health.clone();
                // Health hears only of a change of its own configuration.
                self.health.send_if_modified(|now| {
                    let differs = **now != health;
                    if differs {
                        *now = Arc::new(health);
                    }
                    differs
                });
                changed
            }
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

    /// One daemon pass, publishing only what changed. Only an NVML init failure with
    /// `--fail-on-init-error` ends the process; other failures are logged and the labels stay.
    pub async fn run_pass(&mut self) -> Result<(), PassError> {
        let started = std::time::Instant::now();
        self.metrics.passes.inc();
        let (mut config, limit) = (self.config().pass.clone(), self.config().nvml_timeout);
        config.labels.profile = self.allocation.profile().await;
        let computed = self.runner.run(&config, limit).await;
        self.metrics.pass_duration.observe(started.elapsed().as_secs_f64());
        self.costs = self.metrics.count_session(&self.session, self.costs);
        let pass = match computed {
            Ok(pass) => {
                if let Some(r) = self.failed_passes.succeeded(tokio::time::Instant::now().into_std()) {
                    let failed_for_s = r.failed_for.as_secs();
                    tracing::info!(last_error = %r.error, failed_for_s, "resolved: labelling passes work again");
                }
                pass
            }
            Err(PassError::Probe(e)) if e.is_init() && config.fail_on_init_error => {
                return Err(PassError::Probe(e));
            }
            Err(e) => {
                let now = tokio::time::Instant::now().into_std();
                match self.failed_passes.failed(e.to_string(), now) {
                    Say::Starts => {
                        tracing::error!(error = %e, "labelling pass failed; the published labels stay")
                    }
                    Say::Still { failing_for } => {
                        let failing_for_s = failing_for.as_secs();
                        tracing::error!(error = %e, failing_for_s, "still: labelling passes fail; the published labels stay")
                    }
                    Say::Quiet => {}
                }
                if let PassError::Probe(p) = &e {
                    self.metrics.source_failed(p.source(), p.function());
                }
                self.metrics.liveness.record(false);
                self.retry.driver(true);
                self.retry.back_off(true);
                return Ok(());
            }
        };
        for issue in &pass.issues {
            if let Some(source) = issue.source {
                self.metrics.source_failed(source, &issue.function);
            }
        }
        self.troubles.update(pass.troubles());
        self.metrics.mps_on_mig.set(i64::from(pass.mps_on_mig));
        let driver_down = pass.down.is_some();
        self.retry.driver(driver_down);
        let labels = pass.labels;
        let count = labels.len() as i64;
        let published = match self.config().target.clone() {
            Ok(target) => self.publisher.publish(target, labels, &self.metrics).await,
            Err(e) => {
                tracing::error!(error = %e, "cannot set up the label writer; will retry");
                self.metrics.publish_failed("setup", crate::publish::FailureReason::Setup);
                Err(crate::publish::FailureReason::Setup)
            }
        };
        match (&published, driver_down) {
            (Err(reason), false) => self.retry.publish_failed(*reason),
            _ => self.retry.back_off(driver_down || published.is_err()),
        }
        if published.is_ok() {
            self.metrics.liveness.record(true);
            self.metrics.labels_published.set(count);
            self.metrics.last_success.set(pass::now() as f64);
            self.cross_check();
        }
        tracing::debug!(elapsed_ms = started.elapsed().as_millis() as u64, "pass done");
        Ok(())
    }

    /// A failed publish went through outside a pass (the watched object changed, so it was tried
    /// at once): the pass's retry schedule and unreadiness end with it, unless NVML failed too.
    fn publish_recovered(&mut self) {
        if self.retry.publish_recovered() {
            self.metrics.liveness.record(true);
        }
    }

    /// The sharing labels against the Node's allocatable resources (`--extended-labels`).
    fn cross_check(&mut self) {
        let config = self.config.current();
        let with = cross_check::Against {
            grace: config.sharing_check,
            published: self.publisher.published(),
            from_writer: self.publisher.node_allocatable(),
            sharing: &config.pass.labels.sharing,
        };
        self.cross.run(with, &self.metrics);
    }
}

/// The one-shot run: one pass through a session of its own, run as the daemon runs its passes,
/// published once to `target`; any failure is the process's.
pub async fn oneshot(
    config: &LoopConfig,
    target: Target,
    client: Option<kube::Client>,
) -> Result<(), DaemonError> {
    let mut pass_config = config.pass.clone();
    pass_config.labels.profile = match config.allocation.fixed() {
        Some(profile) => profile,
        None => {
            let slices = match (&client, &config.node) {
                (Some(client), Some(node)) => crate::kubeapi::slices::list_once(client.clone(), node).await,
                _ => crate::kubeapi::slices::SliceState::Unknown,
            };
            allocation::Allocation::new(config.allocation, None).decide(slices)
        }
    };
    let mut runner = PassRunner::new(Session::new())?;
    let pass = runner.run(&pass_config, config.nvml_timeout).await?;
    Troubles::default().update(pass.troubles());
    target.build(client.as_ref()).await?.publish(&pass.labels).await?;
    Ok(())
}
