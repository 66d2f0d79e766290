//! The long-running loop, in process: config files changed in place, through a ConfigMap-style
//! symlink swap, invalidly, and chosen by node-label changes. The GPU facts come from a snapshot,
//! so no NVML and no process environment are involved.

use crate::common;

use common::*;
use futures::StreamExt;
use nvlabel::config::Cli;
use nvlabel::config::{ConfigSource, ConfigState};
use nvlabel::daemon::{Control, Metrics};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

const TS2: &str = "version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 2}]\n";
const TS4: &str = "version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 4}]\n";
const MPS8: &str = "version: v1\nsharing:\n  mps:\n    resources: [{name: gpu, replicas: 8}]\n";
const BAD: &str = "version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 1}]\n";
/// Typos that, taken, would unshare the node: refused as [`BAD`] is.
const TYPOS: [&str; 2] = [
    "version: v1\nsharing:\n  timeslicing:\n    resources: [{name: gpu, replicas: 2}]\n",
    "version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: nvidia.com/gpus, replicas: 2}]\n",
];

struct Running {
    dir: tempfile::TempDir,
    output: PathBuf,
    control: mpsc::Sender<Control>,
    labels: Option<mpsc::UnboundedSender<Option<String>>>,
    metrics: Arc<Metrics>,
    task: tokio::task::JoinHandle<()>,
}

fn start(dir: tempfile::TempDir, source: ConfigSource, label: Option<&str>, watch_labels: bool) -> Running {
    let output = dir.path().join("features.d-gfd");
    start_writing(dir, output, source, label, watch_labels)
}

/// [`start`] with the feature file at `output`.
fn start_writing(
    dir: tempfile::TempDir,
    output: PathBuf,
    source: ConfigSource,
    label: Option<&str>,
    watch_labels: bool,
) -> Running {
    let metrics = Arc::new(Metrics::default());
    let (control, control_rx) = mpsc::channel(4);
    let (labels, stream) = if watch_labels {
        let (tx, rx) = mpsc::unbounded_channel();
        (Some(tx), Some(tokio_stream(rx)))
    } else {
        (None, None)
    };
    let daemon = common::daemon_of(loaded(dir.path(), &output, source, label), None, metrics.clone(), stream);
    let task = tokio::spawn(async move { daemon.serve(control_rx).await.unwrap() });
    Running { dir, output, control, labels, metrics, task }
}

/// The configuration of a file-writing daemon that labels from a T4 snapshot written into `dir`.
fn loaded(dir: &Path, output: &Path, source: ConfigSource, label: Option<&str>) -> ConfigState {
    let snapshot = t4_snapshot(dir);
    let cli = Cli::try_from_args([
        "nvlabel",
        "--no-timestamp",
        "--use-node-feature-api=false",
        "--sleep-interval=infinite",
        "--output-file",
        output.to_str().unwrap(),
        "--snapshot",
        snapshot.to_str().unwrap(),
    ])
    .unwrap();
    ConfigState::load(cli, Default::default(), source, label.map(String::from)).unwrap()
}

fn tokio_stream(
    mut rx: mpsc::UnboundedReceiver<Option<String>>,
) -> futures::stream::BoxStream<'static, nvlabel::kubeapi::node_view::NodeView> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
        .map(|config_label| nvlabel::kubeapi::node_view::NodeView {
            config_label,
            allocatable: Default::default(),
        })
        .boxed()
}

/// Waits (bounded, not timed) until the feature file shows `line`.
async fn until_published(r: &Running, line: &str) {
    for _ in 0..400 {
        if std::fs::read_to_string(&r.output).is_ok_and(|t| t.lines().any(|l| l == line)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{line} never published; file: {:?}", std::fs::read_to_string(&r.output));
}

/// Gives the daemon time to (wrongly) react, then checks it did not.
async fn still_published(r: &Running, line: &str) {
    tokio::time::sleep(Duration::from_millis(700)).await;
    let text = std::fs::read_to_string(&r.output).unwrap();
    assert!(text.lines().any(|l| l == line), "expected {line} to stay:\n{text}");
}

async fn stop(r: Running) {
    r.control.send(Control::Shutdown).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), r.task).await.expect("stops promptly").unwrap();
    assert!(r.output.exists(), "labels stay after shutdown");
}

#[tokio::test]
async fn a_valid_change_is_applied_and_an_invalid_one_keeps_the_last_good_config() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, TS2).unwrap();
    let r = start(dir, ConfigSource::File(config.clone()), None, false);
    until_published(&r, "nvidia.com/gpu.replicas=2").await;

    std::fs::write(&config, TS4).unwrap();
    until_published(&r, "nvidia.com/gpu.replicas=4").await;

    std::fs::write(&config, BAD).unwrap();
    still_published(&r, "nvidia.com/gpu.replicas=4").await;
    assert_eq!(r.metrics.config_reload_failures.get(), 1, "counted once");
    for (typo, failures) in TYPOS.iter().zip(2..) {
        std::fs::write(&config, typo).unwrap();
        still_published(&r, "nvidia.com/gpu.replicas=4").await;
        still_published(&r, "nvidia.com/gpu.product=Tesla-T4-SHARED").await;
        assert_eq!(r.metrics.config_reload_failures.get(), failures, "{typo}");
    }

    std::fs::write(&config, MPS8).unwrap();
    until_published(&r, "nvidia.com/gpu.sharing-strategy=mps").await;
    until_published(&r, "nvidia.com/gpu.product=Tesla-T4-SHARED").await;
    stop(r).await;
}

/// Builds a ConfigMap-style mount: `<key> -> ..data/<key>`, `..data -> ..<version>`.
fn configmap_version(mount: &Path, version: &str, keys: &[(&str, &str)]) {
    let v = mount.join(format!("..{version}"));
    std::fs::create_dir_all(&v).unwrap();
    for (k, text) in keys {
        std::fs::write(v.join(k), text).unwrap();
        let link = mount.join(k);
        if link.symlink_metadata().is_err() {
            std::os::unix::fs::symlink(format!("..data/{k}"), &link).unwrap();
        }
    }
    // The kubelet swaps ..data atomically: a new link, renamed over the old one.
    let tmp = mount.join("..data_tmp");
    std::os::unix::fs::symlink(format!("..{version}"), &tmp).unwrap();
    std::fs::rename(&tmp, mount.join("..data")).unwrap();
}

#[tokio::test]
async fn a_configmap_symlink_swap_is_seen_through_a_config_file_link() {
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("available-configs");
    std::fs::create_dir(&mount).unwrap();
    configmap_version(&mount, "v1", &[("config.yaml", TS2)]);
    // As GFD's config-manager does: /config/config.yaml is a link into the mount.
    let config_dir = dir.path().join("config");
    std::fs::create_dir(&config_dir).unwrap();
    let config = config_dir.join("config.yaml");
    std::os::unix::fs::symlink(mount.join("config.yaml"), &config).unwrap();

    let r = start(dir, ConfigSource::File(config), None, false);
    until_published(&r, "nvidia.com/gpu.replicas=2").await;
    configmap_version(&mount, "v2", &[("config.yaml", TS4)]);
    until_published(&r, "nvidia.com/gpu.replicas=4").await;
    stop(r).await;
}

#[tokio::test]
async fn the_node_label_chooses_among_several_keys() {
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("configs");
    std::fs::create_dir(&mount).unwrap();
    configmap_version(&mount, "v1", &[("default", TS2), ("four", TS4), ("mps", MPS8)]);
    let source = ConfigSource::Dir { dir: mount.clone(), default_key: None };
    let r = start(dir, source, Some("four"), true);
    until_published(&r, "nvidia.com/gpu.replicas=4").await;

    let labels = r.labels.clone().unwrap();
    labels.send(Some("mps".into())).unwrap();
    until_published(&r, "nvidia.com/gpu.replicas=8").await;

    // A label naming a missing key is an error that keeps the previous config.
    labels.send(Some("no-such-key".into())).unwrap();
    still_published(&r, "nvidia.com/gpu.replicas=8").await;
    assert_eq!(r.metrics.config_reload_failures.get(), 1);

    // Label removed: the `default` key.
    labels.send(None).unwrap();
    until_published(&r, "nvidia.com/gpu.replicas=2").await;

    // The content of the selected key changes through the ConfigMap swap.
    configmap_version(&mount, "v2", &[("default", MPS8), ("four", TS4), ("mps", MPS8)]);
    until_published(&r, "nvidia.com/gpu.sharing-strategy=mps").await;
    stop(r).await;
}

#[tokio::test]
async fn reload_rereads_even_without_a_change_event_and_shutdown_stops() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, TS2).unwrap();
    let r = start(dir, ConfigSource::File(config.clone()), None, false);
    until_published(&r, "nvidia.com/gpu.replicas=2").await;
    r.control.send(Control::Reload).await.unwrap();
    still_published(&r, "nvidia.com/gpu.replicas=2").await;
    assert_eq!(r.metrics.config_reload_failures.get(), 0);
    let _ = &r.dir;
    stop(r).await;
}

#[tokio::test]
async fn a_reload_signal_that_arrives_during_a_pass_rereads_the_config() {
    // The config changes before the daemon watches anything, so no file event can report it:
    // only the reload signal, sent while the first pass runs, can make the daemon see TS4.
    let dir = tempfile::tempdir().unwrap();
    // Its own directory: writes of the feature file next to it would wake the directory watch.
    std::fs::create_dir(dir.path().join("config")).unwrap();
    let config = dir.path().join("config/config.yaml");
    std::fs::write(&config, TS2).unwrap();
    let output = dir.path().join("gfd");
    let state = loaded(dir.path(), &output, ConfigSource::File(config.clone()), None);
    let daemon = common::daemon_of(state, None, Arc::new(Metrics::default()), None);
    std::fs::write(&config, TS4).unwrap();
    let (control, control_rx) = mpsc::channel(4);
    control.send(Control::Reload).await.unwrap();
    let task = tokio::spawn(async move { daemon.serve(control_rx).await.unwrap() });
    let r = Running { dir, output, control, labels: None, metrics: Arc::new(Metrics::default()), task };
    until_published(&r, "nvidia.com/gpu.replicas=4").await;
    stop(r).await;
}

#[test]
fn an_invalid_config_at_start_up_is_an_error_with_the_same_message() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, BAD).unwrap();
    let cli = Cli::try_from_args(["nvlabel", "--use-node-feature-api=false"]).unwrap();
    let err = ConfigState::load(cli, Default::default(), ConfigSource::File(config), None)
        .err()
        .expect("rejected")
        .to_string();
    assert!(
        err.contains(
            "config.yaml: sharing.timeSlicing.resources[0].replicas: number of replicas must be >= 2"
        ),
        "{err}"
    );
}

#[tokio::test]
async fn a_failed_publish_is_retried_soon_even_with_an_infinite_interval() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("features.d");
    let output = missing.join("gfd");
    let r = start_writing(dir, output.clone(), ConfigSource::None, None, false);
    let metrics = r.metrics.clone();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!metrics.liveness.ready(), "the first publish failed");
    std::fs::create_dir(&missing).unwrap();
    for _ in 0..200 {
        if output.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(std::fs::read_to_string(&output).unwrap().contains("nvidia.com/gpu.count=1\n"));
    assert!(metrics.liveness.ready());
    stop(r).await;
}

#[tokio::test]
async fn the_sharing_cross_check_warns_after_the_grace_period_and_clears_itself() {
    // Node mode with a mocked API: the writer reads the Node every pass, so the check sees what
    // the device plugin made allocatable. Time-slicing x4 on one T4 promises 4 nvidia.com/gpu.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, TS4).unwrap();
    let snapshot = t4_snapshot(dir.path());
    let cli = Cli::try_from_args([
        "nvlabel",
        "--sink=node",
        "--node-name=gpu-node",
        "--no-timestamp",
        "--extended-labels",
        "--sharing-check-grace=1s",
        "--snapshot",
        snapshot.to_str().unwrap(),
    ])
    .unwrap();
    let (client, node) = common::mock_api::node_server("gpu-node", 0, false);
    node.lock().unwrap().allocatable = serde_json::json!({"nvidia.com/gpu": "1", "cpu": "8"});
    let metrics = Arc::new(Metrics::default());
    let state = ConfigState::load(cli, Default::default(), ConfigSource::File(config), None).unwrap();
    let mut daemon = common::daemon_of(state, Some(client), metrics.clone(), None);
    let gauge = |m: &Metrics| {
        let r = nvlabel::daemon::metrics::Resource { resource: "nvidia.com/gpu".into() };
        m.sharing_mismatch.get_or_create(&r).get()
    };
    daemon.run_pass().await.unwrap();
    assert_eq!(gauge(&metrics), 0, "within the grace period the plugin may lag");
    let labels_before = node.lock().unwrap().labels.clone();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    daemon.run_pass().await.unwrap();
    assert_eq!(gauge(&metrics), 1, "a lasting mismatch raises the gauge");
    assert_eq!(node.lock().unwrap().labels, labels_before, "no label is changed by the check");
    assert_eq!(labels_before["nvidia.com/gpu.replicas"], "4");
    // The device plugin catches up.
    node.lock().unwrap().allocatable = serde_json::json!({"nvidia.com/gpu": "4"});
    daemon.run_pass().await.unwrap();
    assert_eq!(gauge(&metrics), 0, "cleared by itself");
}

#[tokio::test]
async fn an_emptied_config_on_reload_keeps_the_last_good_one() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, TS4).unwrap();
    let r = start(dir, ConfigSource::File(config.clone()), None, false);
    until_published(&r, "nvidia.com/gpu.replicas=4").await;

    // An editor truncates before it writes; a half-done copy may hold only its header comment.
    for (n, blank) in ["", "# sharing for the T4 pool\n"].into_iter().enumerate() {
        std::fs::write(&config, blank).unwrap();
        still_published(&r, "nvidia.com/gpu.replicas=4").await;
        until_published(&r, "nvidia.com/gpu.product=Tesla-T4-SHARED").await;
        assert_eq!(r.metrics.config_reload_failures.get(), n as u64 + 1, "{blank:?} is a failed reload");
    }
    std::fs::write(&config, TS2).unwrap();
    until_published(&r, "nvidia.com/gpu.replicas=2").await;

    // A link to /dev/null is a deliberate "no configuration" (GFD's config manager makes one).
    std::fs::remove_file(&config).unwrap();
    std::os::unix::fs::symlink("/dev/null", &config).unwrap();
    until_published(&r, "nvidia.com/gpu.replicas=1").await;
    assert_eq!(r.metrics.config_reload_failures.get(), 2);
    stop(r).await;
}

/// Health's configuration arrives with every reload that changes it, each value the file's flags
/// give, and a reload that leaves it alone does not wake health.
#[tokio::test]
async fn a_reload_hands_health_its_new_configuration_and_only_on_a_change() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, TS2).unwrap();
    let snapshot = t4_snapshot(dir.path());
    let output = dir.path().join("gfd");
    let (output, snapshot) = (output.to_str().unwrap(), snapshot.to_str().unwrap());
    let cli =
        Cli::try_from_args(["nvlabel", "--use-node-feature-api=false", "-o", output, "--snapshot", snapshot])
            .unwrap();
    let state = ConfigState::load(cli, Default::default(), ConfigSource::File(config.clone()), None).unwrap();
    let mut daemon = common::daemon_of(state, None, Default::default(), None);
    let mut health = daemon.subscribe();
    assert_eq!(**health.borrow_and_update(), daemon.config().health, "at start");
    let flags = "flags:\n  healthIgnoreXids: [79]\n  healthFatalXids: [31]\n  healthExpectedGpus: 8\n  \
                 healthNvmlTimeout: 7s\n  healthRecoveryHold: 9s\n  healthXidThresholds: 43:3/1m\n  healthTaintEffect: NoExecute\n  extendedLabels: true\n  deviceDiscoveryStrategy: nvml\n  \
                 gfd:\n    sleepInterval: 5s\n    machineTypeFile: /m\n";
    std::fs::write(&config, format!("{TS4}{flags}")).unwrap();
    assert!(daemon.reload(true));
    assert!(health.has_changed().unwrap(), "health is told");
    let now = health.borrow_and_update().clone();
    assert_eq!(*now, daemon.config().health);
    assert_eq!(now.settings.judging.ignored_xids, [79].into());
    assert_eq!(now.settings.judging.fatal_xids, [31].into());
    assert_eq!(now.settings.judging.expected_gpus, Some(8));
    assert_eq!((now.settings.nvml_timeout, now.every), (Duration::from_secs(7), Duration::from_secs(5)));
    assert_eq!(now.settings.recovery_hold, Duration::from_secs(9));
    assert_eq!(now.settings.judging.xid_thresholds.len(), 1, "{:?}", now.settings.judging.xid_thresholds);
    assert!(now.probe.topology && now.probe.strategy == nvlabel::probe::Strategy::Nvml);
    assert_eq!(now.probe.machine_type_file, Path::new("/m"));
    assert_eq!(now.settings.taint_effect, nvlabel::health::config::TaintEffect::NoExecute);
    // Only the sharing changes: the labels do, health hears nothing.
    std::fs::write(&config, format!("{TS2}{flags}")).unwrap();
    assert!(daemon.reload(true));
    assert!(!health.has_changed().unwrap(), "health is not woken for the labels' change");
}
