//! Health as one of the daemon's tasks: a reading every labelling interval (60 s where that is
//! infinite) and each NVML event as it comes, the configuration of every reload that changes it,
//! and a stop that ends the event thread too. Started and stopped by the daemon's owner, never on
//! its own.

use crate::health::config::HealthConfig;
use crate::health::metrics::HealthMetrics;
use crate::health::monitor::Monitor;
use crate::health::reading::nvml_reads;
use crate::health::writing::taints::DeviceTaints;
use crate::kubeapi::slices::{SliceState, SliceWatch};
use crate::probe::Session;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

pub use super::HealthError;

/// How long a stop waits for the event thread (it looks at its stop flag every half second).
pub const STOP_WAIT: Duration = Duration::from_secs(2);

/// The event thread, and how to stop it.
struct EventThread {
    stop: Arc<AtomicBool>,
    /// Closed when the thread ends.
    ended: oneshot::Receiver<()>,
}

/// GPU health, ready to run.
pub struct HealthTask {
    monitor: Monitor,
    events: mpsc::Receiver<crate::health::values::reading::Event>,
    thread: EventThread,
    metrics: Arc<HealthMetrics>,
    /// The slices' changes, where devices are tainted.
    slices: Option<watch::Receiver<SliceState>>,
    /// This Node's changes, where another writer's change of the condition is seen.
    node: Option<watch::Receiver<u64>>,
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
    config: &HealthConfig,
    client: Option<kube::Client>,
    session: Session,
    watches: Watches,
) -> Result<Option<HealthTask>, HealthError> {
    let Watches { slices, node } = watches;
    if !config.settings.enabled {
        return Ok(None);
    }
    let client = client.ok_or(HealthError::NoApi)?;
    let opts = &config.probe;
    // Files and libraries only: nothing that may touch a driver runs on the runtime's thread.
    if crate::probe::cuda_without_nvml(opts) {
        // A condition that stays Unknown would read as unhealthy to remediation tools.
        tracing::warn!(
            nvml_library = %opts.library.display(),
            "GPU health is off: this integrated-GPU node has no NVML (JetPack 5 and earlier), so no GPU health signal can be read; the GPU is labelled through CUDA and no health condition is published"
        );
        return Ok(None);
    }
    let metrics = Arc::new(HealthMetrics::default());
    let slices = slices.filter(|_| config.taints_devices);
    let taints = match (&slices, &config.node) {
        (Some(slices), Some(node)) => Some((
            DeviceTaints::new(client.clone(), node, config.settings.taint_effect, metrics.clone()),
            slices.clone(),
        )),
        _ => None,
    };
    let node_changes = node.as_ref().map(|n| n.changes());
    let monitor = Monitor::new(config, client, session.clone(), metrics.clone(), node, taints)?;
    let (tx, events) = mpsc::channel(256);
    let stop = Arc::new(AtomicBool::new(false));
    let (ended_tx, ended) = oneshot::channel::<()>();
    let opts = monitor.probe_options().clone();
    let flag = stop.clone();
    std::thread::Builder::new()
        .name("nvml-events".into())
        .spawn(move || {
            let _ended = ended_tx;
            nvml_reads::listen_events(session, opts, tx, flag);
        })
        .map_err(|e| HealthError::Thread("nvml-events", e))?;
    Ok(Some(HealthTask {
        monitor,
        events,
        thread: EventThread { stop, ended },
        metrics,
        slices: slices.map(|s| s.changes()),
        node: node_changes,
    }))
}

impl HealthTask {
    /// Its metrics, to register.
    pub fn metrics(&self) -> Arc<HealthMetrics> {
        self.metrics.clone()
    }

    /// The configuration the running monitor works by now (the struct the last reload sent).
    pub fn config(&self) -> &Arc<HealthConfig> {
        self.monitor.config()
    }

    /// Runs until `stop` resolves, following `configs` (each reload, taken up before the next
    /// reading). A reading or an API call in progress is abandoned for the stop; the event thread
    /// is stopped and waited for up to [`STOP_WAIT`] (a thread stuck in a driver call is left to
    /// the process's exit). Returns whether the event thread ended in time.
    pub async fn run(
        &mut self,
        mut configs: watch::Receiver<Arc<HealthConfig>>,
        stop: impl std::future::Future<Output = ()>,
    ) -> bool {
        let mut every = self.config().every;
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(stop);
        loop {
            let work = async {
                tokio::select! {
                    biased;
                    Ok(()) = configs.changed() => {
                        let now = configs.borrow_and_update().clone();
                        self.monitor.reconfigure(now);
                        if self.config().every != every {
                            every = self.config().every;
                            tick = tokio::time::interval(every);
                            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                        }
                    }
                    Some(event) = self.events.recv() => self.monitor.event(event).await,
                    () = until(self.monitor.due()) => self.monitor.write_due().await,
                    () = tokio::time::sleep(self.monitor.stall_in()) => self.monitor.recheck_stall().await,
                    () = changed(&mut self.node) => self.monitor.node_changed().await,
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
            tracing::warn!(
                waited_ms = STOP_WAIT.as_millis() as u64,
                "the NVML event thread did not stop in time (a driver call hangs); leaving it to the exit"
            );
            return false;
        }
        true
    }
}

/// Waits until `at` (forever without).
async fn until(at: Option<std::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => futures::future::pending::<()>().await,
    }
}

/// Waits for the next change a watch sends (forever without it, or once it ended).
async fn changed<T>(slices: &mut Option<watch::Receiver<T>>) {
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
    use crate::probe::ProbeOptions;

    /// Health on node `n1` with no driver: the event thread waits in its backoff, as on a node
    /// whose driver is late.
    fn config(probe: ProbeOptions) -> HealthConfig {
        HealthConfig::for_tests(probe)
    }

    fn no_driver() -> ProbeOptions {
        ProbeOptions { library: "/nonexistent/libnvidia-ml.so.1".into(), ..ProbeOptions::default() }
    }

    fn client() -> kube::Client {
        let url = "http://127.0.0.1:9".parse().unwrap();
        kube::Client::try_from(kube::Config::new(url)).unwrap()
    }

    /// A reload hands the monitor the very struct it sent (the parts of health read it where
    /// they use it), and a stop ends the event thread.
    #[tokio::test]
    async fn a_reload_reaches_health_and_a_stop_ends_the_event_thread() {
        let first = HealthConfig { taints_devices: true, ..config(no_driver()) };
        let slices = Some(crate::kubeapi::slices::SliceWatch::spawn(client(), "n1"));
        let watches = Watches { slices, node: None };
        let mut task = start(&first, Some(client()), Session::new(), watches).unwrap().expect("on");
        assert_eq!(**task.config(), first);
        let (tx, rx) = watch::channel(Arc::new(first.clone()));
        let mut reloaded = config(ProbeOptions { sysfs_root: "/elsewhere/sys".into(), ..no_driver() });
        reloaded.taints_devices = true;
        reloaded.settings.taint_effect = crate::health::config::TaintEffect::NoExecute;
        reloaded.settings.judging.ignored_xids = [79].into();
        reloaded.settings.judging.fatal_xids = [31].into();
        reloaded.settings.judging.expected_gpus = Some(8);
        reloaded.settings.nvml_timeout = Duration::from_secs(7);
        reloaded.settings.recovery_hold = Duration::from_secs(9);
        reloaded.every = Duration::from_secs(5);
        assert_ne!(reloaded.settings.judging, first.settings.judging);
        let sent = Arc::new(reloaded.clone());
        tx.send_replace(sent.clone());
        let stopped = task.run(rx, tokio::time::sleep(Duration::from_millis(200))).await;
        assert!(Arc::ptr_eq(task.config(), &sent), "the struct the reload sent is the one in force");
        assert_eq!(**task.config(), reloaded, "every reloadable value reached the monitor");
        assert!(stopped, "the event thread ended with the stop");
        assert!(matches!(task.thread.ended.try_recv(), Err(oneshot::error::TryRecvError::Closed)));
    }

    #[test]
    fn health_off_starts_nothing() {
        let mut off = config(no_driver());
        off.settings.enabled = false;
        assert!(start(&off, None, Session::new(), Watches::default()).unwrap().is_none());
    }

    /// A Jetson without NVML (JetPack 5) has no health signal to read: no task, so no condition
    /// that stays Unknown; the same node asked to use NVML starts health as any node does.
    #[tokio::test]
    async fn a_tegra_node_without_nvml_starts_no_health() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/platforms/jetson-agx-orin-jp5");
        let jetson = ProbeOptions {
            sysfs_root: format!("{root}/sys").into(),
            host_root: format!("{root}/host").into(),
            ..no_driver()
        };
        let jp5 = config(jetson.clone());
        assert!(start(&jp5, Some(client()), Session::new(), Watches::default()).unwrap().is_none());
        let nvml = config(ProbeOptions { strategy: crate::probe::Strategy::Nvml, ..jetson });
        let mut task =
            start(&nvml, Some(client()), Session::new(), Watches::default()).unwrap().expect("NVML");
        let (_tx, rx) = watch::channel(Arc::new(nvml.clone()));
        assert!(task.run(rx, tokio::time::sleep(Duration::from_millis(50))).await, "stopped");
    }
}
