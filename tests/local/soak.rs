//! Soak (ignored by default; `benches/run.sh --soak`): the daemon loop for 30 minutes
//! (`NVLABEL_SOAK_SECONDS` to change) at a 1 s interval against the fake NVML library and a mocked
//! API server that fails 10 % of requests. At the end every label change was published, memory
//! is flat, and every injected failure is in the log.

use nvlabel::config::Cli;
use nvlabel::config::{ConfigSource, ConfigState};
use nvlabel::daemon::{Control, Daemon, Metrics, Parts};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing_subscriber::layer::SubscriberExt;

use crate::common;
use common::mock_api;

/// Counts the "retrying" warnings the API writers log for each failed attempt.
struct RetryCounter(Arc<AtomicU64>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for RetryCounter {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Message(bool);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" && format!("{value:?}") == "retrying" {
                    self.0 = true;
                }
            }
        }
        let mut m = Message(false);
        event.record(&mut m);
        if m.0 {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[test]
#[ignore = "30 minutes; run by benches/run.sh --soak"]
fn soak() {
    let seconds: u64 =
        std::env::var("NVLABEL_SOAK_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(1800);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let lib = ["release", "debug"]
        .iter()
        .map(|p| root.join("target").join(p).join("libnvidia_ml.so"))
        .find(|p| p.exists())
        .expect("run `cargo build --workspace` first");
    // In a process of its own: the fake reads its environment at init.
    let Some(env) = common::in_child("soak", &["FAKE_NVML_FIXTURE"]) else { return };
    let fixture = env["FAKE_NVML_FIXTURE"].clone();
    let dir = tempfile::tempdir().unwrap();
    // A sysfs tree of its own: each change of machine hot-plugs a GPU, which makes the daemon
    // initialise NVML again (the fake reads its fixture at nvmlInit).
    let sysfs = common::sysfs_copy(dir.path());
    let base = std::fs::read_to_string(root.join("testdata/machines/h100-x8.yaml")).unwrap();
    std::fs::write(&fixture, &base).unwrap();
    let retries = Arc::new(AtomicU64::new(0));
    let subscriber = tracing_subscriber::registry()
        .with(RetryCounter(retries.clone()))
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::sink));
    tracing::subscriber::set_global_default(subscriber).unwrap();

    // The binary's own runtime shape.
    let runtime = nvlabel::runtime().unwrap();
    runtime.block_on(async move {
        let (client, state) = mock_api::node_server("soak-node", 10, true);
        let cli = Cli::try_from_args([
            "nvlabel",
            "--sink=node",
            "--node-name=soak-node",
            "--use-node-feature-api=false",
            "--no-timestamp",
            "--sleep-interval=1s",
            "--nvml-library",
            lib.to_str().unwrap(),
            "--sysfs-root",
            sysfs.to_str().unwrap(),
        ])
        .unwrap();
        let config = ConfigState::load(cli, Default::default(), ConfigSource::None, None).unwrap();
        let parts = Parts {
            config: Box::new(nvlabel::config::DaemonInputs::new(config)),
            metrics: Arc::new(Metrics::default()),
            client: Some(client),
            session: nvlabel::probe::Session::new(),
            views: None,
            slices: None,
            draw: nvlabel::daemon::RANDOM,
        };
        let daemon = Daemon::new(parts).unwrap();
        let (control, control_rx) = tokio::sync::mpsc::channel(4);
        let task = tokio::spawn(async move { daemon.serve(control_rx).await.unwrap() });

        // The machine changes every 30 s (every 3 s in short runs): a new driver version each time.
        let change_every = if seconds >= 300 { 30 } else { 3 };
        let start = Instant::now();
        let mut versions = vec!["550.90.07".to_string()];
        let mut rss_early = None;
        let mut step = 0;
        while start.elapsed() < Duration::from_secs(seconds) {
            tokio::time::sleep(Duration::from_secs(change_every)).await;
            step += 1;
            let version = format!("550.90.{}", 100 + step);
            std::fs::write(&fixture, base.replace("550.90.07", &version)).unwrap();
            common::hot_plug(&sysfs, "0000:ff:00.0", step % 2 == 1);
            versions.push(version);
            if rss_early.is_none() && start.elapsed() >= Duration::from_secs(seconds / 10) {
                rss_early = Some(mock_api::rss_kib());
            }
        }
        // Let the last change through (retries included), then stop.
        tokio::time::sleep(Duration::from_secs(5)).await;
        control.send(Control::Shutdown).await.unwrap();
        task.await.unwrap();
        let rss_end = mock_api::rss_kib();

        let s = state.lock().unwrap();
        let version = |labels: &serde_json::Value| {
            labels["nvidia.com/cuda.driver-version.full"].as_str().unwrap_or_default().to_string()
        };
        let mut applied = s.applied_versions.clone();
        applied.dedup();
        assert_eq!(applied, versions, "every label change was published, in order");
        assert_eq!(Some(version(&s.labels)), versions.last().cloned(), "the node ends with the last labels");
        assert!(s.failures > 0, "failures were injected");
        // Failed writes are retried (each logged at debug as "retrying"); failed watches and reads
        // are logged once per outage, not per failure, so not every failure has its own line.
        let retried = retries.load(Ordering::Relaxed);
        assert!(retried > 0 && retried <= s.failures, "{retried} retries for {} injected failures", s.failures);
        let early = rss_early.unwrap_or(rss_end);
        assert!(rss_end <= early + 512, "memory grew from {early} KiB to {rss_end} KiB");
        println!(
            "soak: {seconds} s, {} changes, {} requests, {} injected failures (all logged), RSS {early} -> {rss_end} KiB",
            versions.len() - 1,
            s.requests,
            s.failures
        );
    });
}
