//! The daemon's owner: one value that holds the NVML session and runs the labelling loop, GPU
//! health and the HTTP endpoint as sibling tasks, with one reload path (signals reach the loop,
//! whose configuration reaches health) and one shutdown path (every task is told at once; the
//! loop, then health with its event thread, each waited for up to [`STOP_DEADLINE`]).

use super::config::Inputs;
use super::{Control, Daemon, DaemonError, Metrics, Parts};
use crate::health::task::HealthTask;
use crate::http::Endpoint;
use crate::probe::Session;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// How long a stop waits for the labelling loop (then aborted), and then for health.
pub const STOP_DEADLINE: Duration = Duration::from_secs(5);

/// What the service is built from, resolved from the configuration in one place
/// ([`crate::app::startup::plan`]).
pub struct Plan {
    /// The labelling loop's configuration and how it is read again.
    pub inputs: Box<dyn Inputs>,
    /// The API client, where the writer or the config label needs one, or `auto` could make one
    /// (health starts only with it).
    pub client: Option<kube::Client>,
    /// Config reloads rejected before the service started (counted by its metrics).
    pub rejected_reloads: u64,
    /// Where labels go (checked before anything starts).
    pub target: crate::publish::Target,
    /// Whether this node's ResourceSlices are watched (`auto` decides by them; health taints
    /// their devices).
    pub slices_wanted: bool,
    /// `--metrics-addr`; empty means none.
    pub metrics_addr: String,
}

/// The running daemon's parts, started in one step by [`Service::start`].
pub struct Service {
    daemon: Daemon,
    health: Option<HealthTask>,
    /// Served until the service ends.
    endpoint: Option<Endpoint>,
}

impl Service {
    /// Builds everything the daemon runs from `plan`: the one NVML session, the labeller (with
    /// its Node watch), health (with its event thread) and the HTTP endpoint (bound now, so a bad
    /// address fails at start-up).
    pub async fn start(plan: Plan) -> Result<Service, DaemonError> {
        let Plan { inputs, client, rejected_reloads, target, slices_wanted, metrics_addr } = plan;
        let current = inputs.current().clone();
        let metrics = Arc::new(Metrics::default());
        metrics.config_reload_failures.inc_by(rejected_reloads);
        metrics.zero(&target);
        let session = Session::new();
        // This node's ResourceSlices, watched once for the labeller (`auto`) and health (taints).
        let slices = match (&client, &current.node) {
            (Some(client), Some(node)) if slices_wanted => {
                Some(crate::kubeapi::slices::SliceWatch::spawn(client.clone(), node))
            }
            _ => None,
        };
        let daemon = Daemon::new(Parts {
            config: inputs,
            metrics: metrics.clone(),
            client: client.clone(),
            session: session.clone(),
            views: None,
            slices: slices.clone(),
            draw: super::RANDOM,
        })?;
        let watches = crate::health::task::Watches { slices, node: daemon.node_watch() };
        let health = crate::health::task::start(&current.health, client, session, watches)?;
        let endpoint = match metrics_addr.as_str() {
            "" => None,
            addr => {
                let addr = crate::http::parse_listen_addr(addr).map_err(DaemonError::ListenAddr)?;
                let mut registry = prometheus_client::registry::Registry::default();
                metrics.register(&mut registry);
                if let Some(health) = &health {
                    health.metrics().register(&mut registry);
                }
                Some(crate::http::serve(addr, metrics.liveness.clone(), Arc::new(registry)).await?)
            }
        };
        Ok(Service { daemon, health, endpoint })
    }

    /// Runs every task until `control` says stop (or closes), or the labelling loop ends with an
    /// error; then stops the others. Published labels and the health condition stay.
    pub async fn run(self, mut control: mpsc::Receiver<Control>) -> Result<(), DaemonError> {
        let Service { daemon, health, endpoint } = self;
        let (stop_tx, stop_rx) = watch::channel(false);
        let stopped = |mut rx: watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|stop| *stop).await;
        };
        let health = health.map(|mut h| {
            let (settings, stop) = (daemon.subscribe(), stopped(stop_rx.clone()));
            tokio::spawn(async move { h.run(settings, stop).await })
        });
        let (to_loop, from_owner) = mpsc::channel(4);
        let mut labelling = tokio::spawn(daemon.serve(from_owner));
        let ended = loop {
            tokio::select! {
                ended = &mut labelling => break Some(ended),
                message = control.recv() => {
                    let message = message.unwrap_or(Control::Shutdown);
                    forward(&to_loop, message);
                    if message == Control::Shutdown {
                        break None;
                    }
                }
            }
        };
        let _ = stop_tx.send(true);
        let result = match ended {
            Some(ended) => ended,
            None => match tokio::time::timeout(STOP_DEADLINE, &mut labelling).await {
                Ok(ended) => ended,
                Err(_) => {
                    labelling.abort();
                    Ok(Ok(()))
                }
            },
        };
        if let Some(health) = health {
            if tokio::time::timeout(STOP_DEADLINE, health).await.is_err() {
                tracing::warn!("GPU health did not stop in time; leaving it to the exit");
            }
        }
        drop(endpoint);
        match result {
            Ok(ended) => ended,
            Err(e) => Err(DaemonError::Panicked(e)),
        }
    }
}

/// Hands the labelling loop a control message. A reload while one is still queued adds nothing
/// (the queued one reads everything again) and is dropped, so at most one message ever waits
/// and a shutdown always finds room behind it: it waits behind one reload at most, never four.
fn forward(to_loop: &mpsc::Sender<Control>, message: Control) {
    if message == Control::Shutdown || to_loop.capacity() == to_loop.max_capacity() {
        let _ = to_loop.try_send(message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reloads_coalesce_and_a_shutdown_is_never_dropped() {
        let (to_loop, mut from_owner) = mpsc::channel(4);
        for _ in 0..10 {
            forward(&to_loop, Control::Reload);
        }
        forward(&to_loop, Control::Shutdown);
        assert_eq!(from_owner.try_recv().ok(), Some(Control::Reload));
        assert_eq!(from_owner.try_recv().ok(), Some(Control::Shutdown), "right behind one reload");
        assert!(from_owner.try_recv().is_err());
        forward(&to_loop, Control::Reload);
        assert_eq!(from_owner.try_recv().ok(), Some(Control::Reload), "a reload once none waits");
    }
}
