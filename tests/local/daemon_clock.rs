//! The daemon's schedule on tokio's virtual clock (`start_paused`): passes on their deadline
//! whatever the watches deliver, failed publishes backing off, readiness after a failed pass.
//! Time moves only when every task waits, so nothing here depends on machine speed.

use crate::common;

use common::logs::Logs;
use common::*;
use futures::StreamExt;
use nvlabel::config::{Cli, ConfigSource, ConfigState};
use nvlabel::daemon::{Control, Daemon, Metrics, PublishFailure};
use nvlabel::kubeapi::node_view::NodeView;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// A file-writing daemon labelling from a T4 snapshot.
fn daemon(dir: &Path, output: &Path, interval: &str) -> (Daemon, Arc<Metrics>, PathBuf) {
    daemon_with(dir, output, interval, None)
}

/// [`daemon`] with the Node's views coming from `views`.
fn daemon_with(
    dir: &Path,
    output: &Path,
    interval: &str,
    views: Option<futures::stream::BoxStream<'static, NodeView>>,
) -> (Daemon, Arc<Metrics>, PathBuf) {
    let (parts, metrics, snapshot) = parts_with(dir, output, interval, views);
    (Daemon::new(parts).unwrap(), metrics, snapshot)
}

/// What [`daemon_with`] builds its daemon from.
fn parts_with(
    dir: &Path,
    output: &Path,
    interval: &str,
    views: Option<futures::stream::BoxStream<'static, NodeView>>,
) -> (nvlabel::daemon::Parts, Arc<Metrics>, PathBuf) {
    let snapshot = t4_snapshot(dir);
    let cli = Cli::try_from_args([
        "nvlabel",
        "--no-timestamp",
        "--use-node-feature-api=false",
        &format!("--sleep-interval={interval}"),
        "--output-file",
        output.to_str().unwrap(),
        "--snapshot",
        snapshot.to_str().unwrap(),
    ])
    .unwrap();
    let state = ConfigState::load(cli, Default::default(), ConfigSource::None, None).unwrap();
    let metrics = Arc::new(Metrics::default());
    (common::parts_of(state, None, metrics.clone(), views), metrics, snapshot)
}

fn failures(metrics: &Metrics) -> u64 {
    let key = PublishFailure { writer: "feature-file".into(), reason: "file".into() };
    metrics.publish_failures.get_or_create(&key).get()
}

/// Lets virtual time run for `d` (each step lets the daemon's blocking pass finish first).
async fn run_for(d: Duration) {
    let step = Duration::from_millis(100);
    let mut left = d;
    while !left.is_zero() {
        tokio::time::sleep(step.min(left)).await;
        left = left.saturating_sub(step);
    }
}

/// Lets the daemon's tasks run.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

/// Waits until `done()`, the virtual clock held still, so that what a test counts time from (a
/// publish) has happened before the clock moves, however long the machine takes. The deadline
/// only bounds a hang.
async fn until(done: impl Fn() -> bool, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "{what}: not within 60 s");
        std::thread::sleep(Duration::from_millis(1));
        settle().await;
    }
}

#[tokio::test(start_paused = true)]
async fn node_updates_every_second_do_not_starve_passes() {
    let dir = tempfile::tempdir().unwrap();
    // An unrelated change of the Node every second (kubelet status, other controllers).
    let views = futures::stream::unfold(0u64, |n| async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let allocatable = [("cpu".to_string(), n.to_string())].into();
        Some((NodeView { config_label: None, allocatable }, n + 1))
    })
    .boxed();
    let (daemon, metrics, _) = daemon_with(dir.path(), &dir.path().join("gfd"), "60s", Some(views));
    let (control, control_rx) = mpsc::channel(4);
    let task = tokio::spawn(daemon.serve(control_rx));
    for _ in 0..185 {
        run_for(Duration::from_secs(1)).await;
        settle().await;
    }
    assert_eq!(metrics.passes.get(), 4, "passes at 0, 60, 120 and 180 s, whatever the watch delivers");
    control.send(Control::Shutdown).await.unwrap();
    task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_failing_publish_backs_off_and_recovers_once_the_cause_is_gone() {
    let logs = Logs::default();
    let _guard = logs.capture();
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("features.d");
    let output = missing.join("gfd");
    let (parts, metrics, _) = parts_with(dir.path(), &output, "60s", None);
    // The largest draw each time, so the attempts can be counted exactly: waits of 2, 4, 8, 16, 32 s.
    let daemon = Daemon::new(nvlabel::daemon::Parts { draw: || 0.999_999, ..parts }).unwrap();
    let (control, control_rx) = mpsc::channel(4);
    let task = tokio::spawn(daemon.serve(control_rx));
    for _ in 0..61 {
        run_for(Duration::from_secs(1)).await;
        settle().await;
    }
    assert_eq!(failures(&metrics), 5, "attempts at 0, 2, 6, 14 and 30 s, not one a second");
    assert!(!metrics.liveness.ready());
    std::fs::create_dir(&missing).unwrap();
    for _ in 0..4 {
        run_for(Duration::from_secs(1)).await;
        settle().await;
    }
    assert!(std::fs::read_to_string(&output).unwrap().contains("nvidia.com/gpu.count=1\n"));
    assert!(metrics.liveness.ready(), "the next attempt (at 62 s) succeeded");
    assert_eq!(failures(&metrics), 5);
    assert_eq!(logs.count("publishing labels failed"), 1, "a lasting failure is logged when it starts");
    assert_eq!(logs.count("resolved: publishing works again"), 1, "and when it ends");
    control.send(Control::Shutdown).await.unwrap();
    task.await.unwrap().unwrap();
}

/// The retry's backoff grows, but never past `--sleep-interval`: the pass due then would run
/// anyway, so a node whose trouble ended (a hung NVML call that returned) is labelled, and ready,
/// within one interval.
#[tokio::test(start_paused = true)]
async fn a_retry_never_waits_longer_than_the_interval() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("features.d");
    let (parts, metrics, _) = parts_with(dir.path(), &missing.join("gfd"), "10s", None);
    let daemon = Daemon::new(nvlabel::daemon::Parts { draw: || 0.999_999, ..parts }).unwrap();
    let (control, control_rx) = mpsc::channel(4);
    let task = tokio::spawn(daemon.serve(control_rx));
    for _ in 0..121 {
        run_for(Duration::from_secs(1)).await;
        settle().await;
    }
    // Waits of 2, 4 and 8 s, then 10 s each (not 16, 32, 64): attempts at 0, 2, 6, 14, 24, ... 114 s.
    assert_eq!(failures(&metrics), 14);
    control.send(Control::Shutdown).await.unwrap();
    task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_failed_pass_after_a_good_one_makes_the_labeler_unready() {
    let dir = tempfile::tempdir().unwrap();
    let (daemon, metrics, snapshot) = daemon(dir.path(), &dir.path().join("gfd"), "10s");
    let (control, control_rx) = mpsc::channel(4);
    let task = tokio::spawn(daemon.serve(control_rx));
    run_for(Duration::from_millis(100)).await;
    assert!(metrics.liveness.ready(), "the first pass published");
    std::fs::remove_file(&snapshot).unwrap();
    for _ in 0..11 {
        run_for(Duration::from_secs(1)).await;
        settle().await;
    }
    assert!(metrics.passes.get() >= 2, "the pass at 10 s (and retries) ran");
    assert!(!metrics.liveness.ready(), "the second pass failed: /readyz answers 503");
    control.send(Control::Shutdown).await.unwrap();
    task.await.unwrap().unwrap();
}

/// A pass that keeps failing (a hung driver fails every pass) is said when it starts, at most once
/// a minute while it lasts, and once when a pass works again: not a line per pass.
#[tokio::test(start_paused = true)]
async fn passes_that_keep_failing_are_said_once_a_minute_then_resolved() {
    let logs = Logs::default();
    let _guard = logs.capture();
    let dir = tempfile::tempdir().unwrap();
    let (daemon, metrics, snapshot) = daemon(dir.path(), &dir.path().join("gfd"), "5s");
    let kept = std::fs::read(&snapshot).unwrap();
    let (control, control_rx) = mpsc::channel(4);
    let task = tokio::spawn(daemon.serve(control_rx));
    run_for(Duration::from_millis(100)).await;
    std::fs::remove_file(&snapshot).unwrap();
    for _ in 0..150 {
        run_for(Duration::from_secs(1)).await;
        settle().await;
    }
    assert!(metrics.passes.get() >= 25, "a pass every 5 s at most: {}", metrics.passes.get());
    assert_eq!(logs.count("labelling pass failed"), 1, "{}", logs.text());
    let reminders = logs.count("still: labelling passes fail");
    assert!((1..=2).contains(&reminders), "once a minute in 150 s: {reminders}\n{}", logs.text());
    std::fs::write(&snapshot, kept).unwrap();
    for _ in 0..6 {
        run_for(Duration::from_secs(1)).await;
        settle().await;
    }
    assert_eq!(logs.count("resolved: labelling passes work again"), 1, "{}", logs.text());
    control.send(Control::Shutdown).await.unwrap();
    task.await.unwrap().unwrap();
}

/// The sharing cross-check warns when its grace period ends, on a timer (passes here are an hour
/// apart), and a config change that changes the promise starts the grace anew: the device plugin
/// needs it again, and the warning then has the new config's numbers.
#[tokio::test(start_paused = true)]
async fn the_cross_check_fires_when_its_grace_ends_and_a_config_change_restarts_it() {
    let logs = Logs::default();
    let _guard = logs.capture();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    let ts = |n: u32| {
        format!("version: v1\nsharing:\n  timeSlicing:\n    resources: [{{name: gpu, replicas: {n}}}]\n")
    };
    std::fs::write(&config, ts(4)).unwrap();
    let snapshot = t4_snapshot(dir.path());
    let cli = Cli::try_from_args([
        "nvlabel",
        "--sink=node",
        "--node-name=gpu-node",
        "--no-timestamp",
        "--extended-labels",
        "--sharing-check-grace=30s",
        "--sleep-interval=1h",
        "--snapshot",
        snapshot.to_str().unwrap(),
    ])
    .unwrap();
    let (client, node) = common::mock_api::node_server("gpu-node", 0, false);
    node.lock().unwrap().allocatable = serde_json::json!({"nvidia.com/gpu": "1"});
    let metrics = Arc::new(Metrics::default());
    let state = ConfigState::load(cli, Default::default(), ConfigSource::File(config.clone()), None).unwrap();
    let daemon = common::daemon_of(state, Some(client), metrics.clone(), None);
    let gauge = || {
        let r = nvlabel::daemon::metrics::Resource { resource: "nvidia.com/gpu".into() };
        metrics.sharing_mismatch.get_or_create(&r).get()
    };
    let (control, control_rx) = mpsc::channel(4);
    let task = tokio::spawn(daemon.serve(control_rx));
    let seconds = |n: u32| async move {
        for _ in 0..n {
            run_for(Duration::from_secs(1)).await;
            settle().await;
        }
    };
    let patches = || node.lock().unwrap().patches;
    until(|| patches() >= 1, "the first pass").await;
    seconds(20).await;
    assert_eq!(gauge(), 0, "within the grace period");
    std::fs::write(&config, ts(2)).unwrap();
    control.send(Control::Reload).await.unwrap();
    // The reload's pass publishes the new promise (replicas 2): its grace starts there.
    until(|| patches() >= 2, "the reload's pass").await;
    seconds(15).await;
    assert_eq!(gauge(), 0, "the new promise has a grace period of its own:\n{}", logs.text());
    seconds(20).await;
    assert_eq!(gauge(), 1, "warned when the grace ended, an hour before the next pass:\n{}", logs.text());
    assert_eq!(logs.count("the sharing labels promise 2 nvidia.com/gpu, the node has 1 allocatable"), 1);
    assert_eq!(logs.count("the sharing labels promise 4"), 0, "{}", logs.text());
    control.send(Control::Shutdown).await.unwrap();
    task.await.unwrap().unwrap();
}
