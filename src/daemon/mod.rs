//! The long-running labeler: a pass (probe → labels → publish), then wait for the interval, the
//! feature file's expiry refresh, a config change (the file, or the node label choosing another
//! ConfigMap key), or a signal. A config change is applied without restarting; an invalid one
//! keeps the last good config and labels. [`service`] owns the process: this loop, health, the
//! HTTP endpoint and the NVML session; [`crate::startup`] resolves what they start from. The loop's
//! waiting is in `serve.rs`, the metrics in [`metrics`], the file watch in [`watch`].

mod allocation;
pub mod config;
mod cross_check;
pub mod drift;
mod error;
pub mod metrics;
pub mod publisher;
pub mod runner;
mod serve;
pub mod service;
pub mod watch;

pub use error::{DaemonError, ThreadError};
pub use metrics::{Metrics, NvmlFunction, PublishFailure};

use crate::health::config::HealthConfig;
use crate::kubeapi::backoff::FullJitter;
use crate::kubeapi::node_view::NodeView;
use crate::kubeapi::object_watch::ObjectWatch;
use crate::pass::{self, PassError};
use crate::probe::Session;
use crate::publish::Target;
use crate::sharing_check::SharingCheck;
use crate::troubles::Troubles;
use config::{Inputs, LoopConfig};
use futures::stream::BoxStream;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use publisher::Publisher;
use runner::PassRunner;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
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

/// The shortest time between passes.
const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// Retries while NVML is down or publishing fails: full jitter from 2 s, doubling to 5 minutes.
const RETRY: FullJitter = FullJitter::new(Duration::from_secs(2), Duration::from_secs(300));

/// Retries after the API refused a publish: a uniform wait in `[0, 8 s)`, every time, which
/// [`Daemon::publish_failed`] raises to the 1 s floor ([`MIN_INTERVAL`]).
const REFUSED_RETRY: FullJitter = FullJitter::new(Duration::from_secs(8), Duration::from_secs(8));

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
    /// Failed passes in a row, and the wait before the next attempt.
    retry: FullJitter,
    retry_wait: Option<Duration>,
    /// Whether the last pass found NVML down (a publish that goes through later does not end
    /// that pass's retry schedule).
    nvml_down: bool,
    /// Draws the jitter (a test seam: tests draw the largest wait to count attempts exactly).
    draw: fn() -> f64,
    /// What went wrong in the last pass, logged when it starts and when it ends.
    troubles: Troubles,
    /// The Node's allocatable resources as the node watch last saw them.
    watched_allocatable: Option<BTreeMap<String, String>>,
    /// The sharing cross-check's memory (created with the grace period in force).
    sharing_check: Option<SharingCheck>,
    /// What the session had cost at the last count (for the metrics' counters).
    costs: (u64, u64),
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
            // Health reads the expected GPU count from the Node's labels too.
            (Some(client), Some(node)) if follows_label || node_writer || current.health.enabled => {
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
            retry: RETRY,
            retry_wait: None,
            nvml_down: false,
            draw,
            troubles: Troubles::default(),
            watched_allocatable: None,
            sharing_check: None,
            costs: (0, 0),
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
        let profile = self.allocation.profile().await;
        let (config, limit) = (self.config().pass.clone(), self.config().nvml_timeout);
        let computed = self.runner.run(&config, profile, limit).await;
        self.metrics.pass_duration.observe(started.elapsed().as_secs_f64());
        self.costs = self.metrics.count_session(&self.session, self.costs);
        let pass = match computed {
            Ok(pass) => pass,
            Err(PassError::Probe(e)) if e.is_init() && config.fail_on_init_error => {
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
                self.metrics.liveness.record(false);
                self.nvml_down = true;
                self.back_off(true);
                return Ok(());
            }
        };
        for issue in pass.issues.iter().filter(|i| i.function.starts_with("nvml")) {
            self.metrics.nvml_errors.get_or_create(&NvmlFunction { function: issue.function.clone() }).inc();
        }
        self.troubles.update(pass.troubles());
        self.metrics.mps_on_mig.set(i64::from(pass.mps_on_mig));
        let nvml_down = pass.nvml_down();
        self.nvml_down = nvml_down;
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
        match (&published, nvml_down) {
            (Err(reason), false) => self.publish_failed(*reason),
            _ => self.back_off(nvml_down || published.is_err()),
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

    /// After a publish the API refused (RBAC, a missing CRD or Node: what an operator fixes by
    /// hand), the next try comes 1 to 8 s later ([`REFUSED_RETRY`], floored at [`MIN_INTERVAL`])
    /// however long the refusal lasts, so the fix is used within seconds (a refusal is cheap for the server); any other
    /// failure backs off as [`RETRY`] says.
    fn publish_failed(&mut self, reason: crate::publish::FailureReason) {
        use crate::publish::FailureReason::{NodeMissing, Refused};
        match reason {
            Refused | NodeMissing => {
                let mut window = REFUSED_RETRY;
                self.retry_wait = Some(window.next_with((self.draw)()).max(MIN_INTERVAL));
            }
            _ => self.back_off(true),
        }
    }

    /// A failed publish went through outside a pass (the watched object changed, so it was tried
    /// at once): the pass's retry schedule and unreadiness end with it, unless NVML failed too.
    fn publish_recovered(&mut self) {
        if !self.nvml_down {
            self.back_off(false);
            self.metrics.liveness.record(true);
        }
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
}

/// The one-shot run: one pass through a session of its own, run as the daemon runs its passes,
/// published once to `target`; any failure is the process's.
pub async fn oneshot(
    config: &LoopConfig,
    target: Target,
    client: Option<kube::Client>,
) -> Result<(), DaemonError> {
    let profile = match config.allocation.fixed() {
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
    let pass = runner.run(&config.pass, profile, config.nvml_timeout).await?;
    Troubles::default().update(pass.troubles());
    target.build(client.as_ref()).await?.publish(&pass.labels).await?;
    Ok(())
}
