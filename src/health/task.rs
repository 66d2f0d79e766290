//! Health as one of the daemon's tasks: a reading every pass interval and each NVML event as it
//! comes, the settings of every reload, and a stop that ends the event thread too. Started and
//! stopped by the daemon's owner, never on its own.

use super::metrics::HealthMetrics;
use super::monitor::Monitor;
use super::nvml;
use super::taints::DeviceTaints;
use crate::config::Settings;
use crate::duration::Interval;
use crate::kubeapi::slices::{SliceState, SliceWatch};
use crate::probe::Session;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

pub use super::monitor::HealthError;

impl crate::exit::Classify for HealthError {
    /// `--health` where labels do not go to the API has nowhere to write its condition.
    fn is_bad_configuration(&self) -> bool {
        match self {
            HealthError::NoApi => true,
            HealthError::Thread(..) => false,
        }
    }
}

/// How long a stop waits for the event thread (it looks at its stop flag every half second).
pub const STOP_WAIT: Duration = Duration::from_secs(2);

/// The time between health passes: the labelling interval (at least 1 s; 60 s when it is
/// infinite, since health must still be looked at).
pub fn interval(settings: &Settings) -> Duration {
    match settings.sleep_interval {
        Interval::Every(d) => d.max(Duration::from_secs(1)),
        Interval::Infinite => Duration::from_secs(60),
    }
}

/// The event thread, and how to stop it.
struct EventThread {
    stop: Arc<AtomicBool>,
    /// Closed when the thread ends.
    ended: oneshot::Receiver<()>,
}

/// GPU health, ready to run.
pub struct HealthTask {
    monitor: Monitor,
    events: mpsc::Receiver<super::rules::Event>,
    thread: EventThread,
    every: Duration,
    metrics: Arc<HealthMetrics>,
    /// The slices' changes, where devices are tainted.
    slices: Option<watch::Receiver<SliceState>>,
}

/// What health reads of the cluster besides its own writes: this node's ResourceSlices (in `dra`
/// or `auto` mode, to taint a faulty GPU's devices) and this Node (its expected GPU count label).
#[derive(Default)]
pub struct Watches {
    /// This node's `gpu.nvidia.com` ResourceSlices.
    pub slices: Option<SliceWatch>,
    /// This Node.
    pub node: Option<crate::kubeapi::object_watch::ObjectWatch<k8s_openapi::api::core::v1::Node>>,
}

/// GPU health when `--health` is on: the monitor, its event thread (started now, reading through
/// `session`) and its metrics, following `watches`. `None` when health is off.
pub fn start(
    settings: &Settings,
    client: Option<kube::Client>,
    session: Session,
    watches: Watches,
) -> Result<Option<HealthTask>, HealthError> {
    let Watches { slices, node } = watches;
    if !settings.health.enabled {
        return Ok(None);
    }
    let client = client.ok_or(HealthError::NoApi)?;
    let opts = settings.probe_options();
    if session.backend(&opts) == crate::probe::Backend::Tegra
        && !crate::probe::source::loadable(&opts.library)
    {
        // A condition that stays Unknown would read as unhealthy to remediation tools.
        tracing::warn!(
            nvml_library = %opts.library.display(),
            "GPU health is off: this integrated-GPU node has no NVML (JetPack 5 and earlier), so no GPU health signal can be read; the GPU is labelled through CUDA and no health condition is published"
        );
        return Ok(None);
    }
    let metrics = Arc::new(HealthMetrics::default());
    let mut monitor = Monitor::new(settings, client.clone(), session.clone(), metrics.clone())?;
    if let Some(node) = node {
        monitor.follow_node(node);
    }
    let dra = settings.allocation_mode != crate::labels::AllocationMode::DevicePlugin;
    let slices = slices.filter(|_| dra);
    if let (Some(slices), Some(node)) = (&slices, &settings.node_name) {
        let taints = DeviceTaints::new(client, node, settings.health.taint_effect, metrics.clone());
        monitor.taint_devices(taints, slices.clone());
    }
    let (tx, events) = mpsc::channel(256);
    let stop = Arc::new(AtomicBool::new(false));
    let (ended_tx, ended) = oneshot::channel::<()>();
    let opts = monitor.probe_options().clone();
    let flag = stop.clone();
    std::thread::Builder::new()
        .name("nvml-events".into())
        .spawn(move || {
            let _ended = ended_tx;
            nvml::listen_events(session, opts, tx, flag);
        })
        .map_err(|e| HealthError::Thread("nvml-events", e))?;
    Ok(Some(HealthTask {
        monitor,
        events,
        thread: EventThread { stop, ended },
        every: interval(settings),
        metrics,
        slices: slices.map(|s| s.changes()),
    }))
}

impl HealthTask {
    /// Its metrics, to register.
    pub fn metrics(&self) -> Arc<HealthMetrics> {
        self.metrics.clone()
    }

    /// Runs until `stop` resolves, following `settings` (each reload, taken up before the next
    /// reading). A reading or an API call in progress is abandoned for the stop; the event thread
    /// is stopped and waited for up to [`STOP_WAIT`] (a thread stuck in a driver call is left to
    /// the process's exit). Returns whether the event thread ended in time.
    pub async fn run(
        &mut self,
        mut settings: watch::Receiver<Arc<Settings>>,
        stop: impl std::future::Future<Output = ()>,
    ) -> bool {
        let mut tick = tokio::time::interval(self.every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(stop);
        loop {
            let work = async {
                tokio::select! {
                    biased;
                    Ok(()) = settings.changed() => {
                        let now = settings.borrow_and_update().clone();
                        self.monitor.reconfigure(&now);
                        if interval(&now) != self.every {
                            self.every = interval(&now);
                            tick = tokio::time::interval(self.every);
                            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                        }
                    }
                    Some(event) = self.events.recv() => self.monitor.event(event).await,
                    () = changed(&mut self.slices) => self.monitor.sync_taints().await,
                    _ = tick.tick() => self.monitor.pass().await,
                }
            };
            tokio::select! {
                () = work => {}
                () = &mut stop => break,
            }
        }
        self.thread.stop.store(true, Ordering::Relaxed);
        if tokio::time::timeout(STOP_WAIT, &mut self.thread.ended).await.is_err() {
            tracing::warn!(waited = ?STOP_WAIT, "the NVML event thread did not stop in time (a driver call hangs); leaving it to the exit");
            return false;
        }
        true
    }
}

/// Waits for the next change of the slices (forever without them, or once their watch ended).
async fn changed(slices: &mut Option<watch::Receiver<SliceState>>) {
    let ended = match slices {
        Some(rx) => rx.changed().await.is_err(),
        None => true,
    };
    if ended {
        futures::future::pending::<()>().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(args: &[&str]) -> Settings {
        let mut all = vec!["nvlabel", "--health", "--node-name=n1", "--sink=node"];
        all.extend_from_slice(args);
        let cli = crate::config::Cli::try_from_args(all).unwrap();
        let state = crate::config::ConfigState::load(
            cli,
            Default::default(),
            crate::config::ConfigSource::None,
            None,
        )
        .unwrap();
        state.loaded().settings.clone()
    }

    #[tokio::test]
    async fn a_reload_reaches_health_and_a_stop_ends_the_event_thread() {
        // No driver: the event thread waits in its backoff, as on a node whose driver is late.
        let first = settings(&["--nvml-library=/nonexistent/libnvidia-ml.so.1"]);
        let url = "http://127.0.0.1:9".parse().unwrap();
        let client = kube::Client::try_from(kube::Config::new(url)).unwrap();
        let mut task =
            start(&first, Some(client), Session::new(), Watches::default()).unwrap().expect("--health is on");
        assert!(!task.monitor.ignored_xids().contains(&79));
        let (tx, rx) = watch::channel(Arc::new(first.clone()));
        let reloaded =
            settings(&["--nvml-library=/nonexistent/libnvidia-ml.so.1", "--health-ignore-xids=79"]);
        tx.send_replace(Arc::new(reloaded));
        let stopped = task.run(rx, tokio::time::sleep(Duration::from_millis(200))).await;
        assert!(task.monitor.ignored_xids().contains(&79), "the reload reached health");
        assert!(stopped, "the event thread ended with the stop");
        assert!(matches!(task.thread.ended.try_recv(), Err(oneshot::error::TryRecvError::Closed)));
    }

    #[test]
    fn health_off_starts_nothing() {
        let off = crate::config::Cli::try_from_args(["nvlabel", "--node-name=n1", "--sink=node"]).unwrap();
        let state = crate::config::ConfigState::load(
            off,
            Default::default(),
            crate::config::ConfigSource::None,
            None,
        )
        .unwrap();
        assert!(start(&state.loaded().settings, None, Session::new(), Watches::default()).unwrap().is_none());
    }

    /// A Jetson without NVML (JetPack 5) has no health signal to read: no task, so no condition
    /// that stays Unknown; the same node asked to use NVML starts health as any node does.
    #[tokio::test]
    async fn a_tegra_node_without_nvml_starts_no_health() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/platforms/jetson-agx-orin-jp5");
        let (sys, host) = (format!("--sysfs-root={root}/sys"), format!("--host-root={root}/host"));
        let jp5 = settings(&["--nvml-library=/nonexistent/libnvidia-ml.so.1", &sys, &host]);
        let url = "http://127.0.0.1:9".parse().unwrap();
        let client = kube::Client::try_from(kube::Config::new(url)).unwrap();
        assert!(start(&jp5, Some(client.clone()), Session::new(), Watches::default()).unwrap().is_none());
        let nvml = settings(&[
            "--nvml-library=/nonexistent/libnvidia-ml.so.1",
            &sys,
            &host,
            "--device-discovery-strategy=nvml",
        ]);
        let mut task =
            start(&nvml, Some(client), Session::new(), Watches::default()).unwrap().expect("NVML asked for");
        let (_tx, rx) = watch::channel(Arc::new(nvml.clone()));
        assert!(task.run(rx, tokio::time::sleep(Duration::from_millis(50))).await, "stopped");
    }
}
