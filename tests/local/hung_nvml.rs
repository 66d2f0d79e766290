//! A driver call that hangs stalls only its own side: with a labels-only NVML function hung,
//! health keeps reading; with a health-only one hung, labelling keeps passing. Both sides share
//! the one session, each with its own thread. The fake's event file makes a call hang
//! (`<gpu> hang <function> <seconds>`). In a process of its own (`common::in_child`): the fake
//! reads its environment at init.

use crate::common;

use nvlabel::config::{Cli, ConfigSource, ConfigState};
use nvlabel::daemon::Metrics;
use nvlabel::probe::Session;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

fn config(args: &[&str]) -> ConfigState {
    let lib = common::fake_nvml();
    let sysfs = common::repo().join("testdata/sysfs");
    let mut all = vec!["nvlabel", "--no-timestamp", "--nvml-library", lib.to_str().unwrap()];
    all.extend_from_slice(&["--sysfs-root", sysfs.to_str().unwrap()]);
    all.extend_from_slice(args);
    ConfigState::load(Cli::try_from_args(all).unwrap(), Default::default(), ConfigSource::None, None).unwrap()
}

fn event(file: &Path, line: &str) {
    writeln!(std::fs::OpenOptions::new().append(true).open(file).unwrap(), "{line}").unwrap();
}

/// Waits (bounded) until `done` holds.
async fn until(what: &str, done: impl Fn() -> bool) {
    for _ in 0..600 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what} did not happen within 30 s");
}

/// On the binary's own runtime (one blocking thread), where NVML work on the shared blocking pool
/// would put both sides behind one hung call.
#[test]
fn a_hung_call_on_one_side_leaves_the_other_on_schedule() {
    let test = "a_hung_call_on_one_side_leaves_the_other_on_schedule";
    let Some(env) = common::in_child(test, &["FAKE_NVML_FIXTURE", "FAKE_NVML_EVENTS"]) else { return };
    nvlabel::runtime().unwrap().block_on(both_sides(env));
}

async fn both_sides(env: std::collections::BTreeMap<String, std::path::PathBuf>) {
    std::fs::copy(common::fixture("t4"), &env["FAKE_NVML_FIXTURE"]).unwrap();
    let events = &env["FAKE_NVML_EVENTS"];
    std::fs::write(events, "").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gfd");
    let session = Session::new();
    let metrics = Arc::new(Metrics::default());
    let labelling = config(&["--use-node-feature-api=false", "-o", out.to_str().unwrap()]);
    let mut daemon = common::daemon_of(labelling, None, metrics.clone(), None);
    // Health's side: the same session; its API (a closed port) fails, its readings go on.
    let health = config(&["--health", "--node-name=n1", "--sink=node", "--sleep-interval=1s"])
        .loaded()
        .settings
        .health_config();
    let client = kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
    let mut task = nvlabel::health::task::start(&health, Some(client), session.clone(), Default::default())
        .unwrap()
        .unwrap();
    let readings = task.metrics();
    let (_settings, rx) = tokio::sync::watch::channel(Arc::new(health));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let health_task = tokio::spawn(async move {
        task.run(rx, async {
            let _ = stopped.await;
        })
        .await
    });
    daemon.run_pass().await.unwrap();
    until("a first health reading", || readings.readings.get() >= 1).await;

    // A labels-only call hangs: the pass waits on it, health reads on.
    event(events, "0 hang nvmlDeviceGetMigMode 300");
    let pass = tokio::spawn(async move {
        daemon.run_pass().await.unwrap();
        daemon
    });
    let before = readings.readings.get();
    until("two health readings while labelling hangs", || readings.readings.get() >= before + 2).await;
    assert!(!pass.is_finished(), "the labelling pass is still waiting on the hung call");
    event(events, "0 hang nvmlDeviceGetMigMode 0");
    let mut daemon = pass.await.unwrap();

    // A health-only call hangs: health's reading waits on it, labelling passes on.
    event(events, "0 hang nvmlDeviceGetTotalEccErrors 300");
    // The reading in flight (if any) comes back; the next one is the one that hangs: no reading
    // for longer than the 1 s interval.
    let mut quiet = false;
    for _ in 0..20 {
        let now = readings.readings.get();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        if readings.readings.get() == now {
            quiet = true;
            break;
        }
    }
    assert!(quiet, "health kept reading through a hung call");
    let stuck = readings.readings.get();
    let passes = metrics.passes.get();
    for _ in 0..3 {
        daemon.run_pass().await.unwrap();
    }
    assert_eq!(metrics.passes.get(), passes + 3, "labelling went on while health hung");
    assert_eq!(readings.readings.get(), stuck, "health was stuck meanwhile");
    event(events, "0 hang nvmlDeviceGetTotalEccErrors 0");
    let after = readings.readings.get();
    until("health reading again", || readings.readings.get() > after).await;
    let _ = stop.send(());
    assert!(health_task.await.unwrap(), "the event thread stopped");
    assert!(std::fs::read_to_string(&out).unwrap().contains("nvidia.com/gpu.count=1\n"));
}
