//! A hung `nvmlInit` stalls only the side that called it: while the labelling pass's reopen
//! (a hot-added GPU) hangs in `nvmlInit_v2`, health's reading through the same session does not
//! wait behind it (it goes without NVML within `OPEN_WAIT`, saying why), and what the daemon's
//! loop asks of the session on the runtime's thread (its counters, the open session, the bus)
//! answers at once. The fake hangs an init from a `- hang nvmlInit_v2 <s>` line of its event
//! file, read only while NVML is initialised: written while the first session is open. In a
//! process of its own (`common::in_child`): the fake reads its environment at init.

use crate::common;

use nvlabel::daemon::Metrics;
use nvlabel::probe::session::OPEN_WAIT;
use nvlabel::probe::Session;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the init hangs: long enough to see the other side go on, short enough to end alone.
const HANG: Duration = Duration::from_secs(8);

fn event(file: &std::path::Path, line: &str) {
    writeln!(std::fs::OpenOptions::new().append(true).open(file).unwrap(), "{line}").unwrap();
}

/// `f` on a thread of its own, its answer waited for up to `limit` (a hang fails the test rather
/// than stalling it).
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).expect("it waited behind the hung init")
}

#[test]
fn a_hung_init_during_a_reopen_stalls_only_its_own_side() {
    let test = "a_hung_init_during_a_reopen_stalls_only_its_own_side";
    let Some(env) = common::in_child(test, &["FAKE_NVML_FIXTURE", "FAKE_NVML_EVENTS"]) else { return };
    nvlabel::runtime().unwrap().block_on(hung_init(env));
}

async fn hung_init(env: std::collections::BTreeMap<String, std::path::PathBuf>) {
    std::fs::copy(common::fixture("h100-x8"), &env["FAKE_NVML_FIXTURE"]).unwrap();
    let events = env["FAKE_NVML_EVENTS"].clone();
    std::fs::write(&events, "").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sysfs = common::sysfs_copy(dir.path());
    let out = dir.path().join("gfd");
    let nvml = common::fake_nvml();
    let config = common::file_daemon_config(
        &out,
        &["--nvml-library", nvml.to_str().unwrap(), "--sysfs-root", sysfs.to_str().unwrap()],
    );
    let metrics = Arc::new(Metrics::default());
    let mut parts = common::parts_of(config, None, metrics.clone(), None);
    let session = Session::new();
    parts.session = session.clone();
    let mut daemon = nvlabel::daemon::Daemon::new(parts).unwrap();
    let opts = daemon.config().pass.probe.clone();
    daemon.run_pass().await.unwrap();
    assert_eq!(metrics.nvml_inits.get(), 1);
    // Health's side reads through the same session.
    nvlabel::health::reading::nvml_reads::read(&session, &opts).unwrap();

    // The next init hangs; a call of the open session has the fake read the line.
    event(&events, &format!("- hang nvmlInit_v2 {}", HANG.as_secs()));
    nvlabel::health::reading::nvml_reads::read(&session, &opts).unwrap();
    // A GPU appears on the bus: the labelling pass opens NVML again, and its init hangs.
    common::hot_plug(&sysfs, "0000:ff:00.0", true);
    let started = Instant::now();
    let pass = tokio::spawn(async move {
        daemon.run_pass().await.unwrap();
        daemon
    });
    let in_init = || session.oldest_call().and_then(|c| c.step).is_some_and(|s| s.function == "nvmlInit_v2");
    while !in_init() {
        assert!(started.elapsed() < HANG / 2, "the labelling pass never reached nvmlInit_v2");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Health does not wait behind the other side's init: it goes without NVML, saying why.
    let (s, o) = (session.clone(), opts.clone());
    let asked = Instant::now();
    let reading = within(OPEN_WAIT + Duration::from_secs(2), move || {
        nvlabel::health::reading::nvml_reads::read(&s, &o).map(|_| ()).map_err(|e| e.to_string())
    });
    let error = reading.expect_err("no NVML while the other side's init hangs");
    assert!(error.contains("being initialised by the other side"), "{error}");
    assert!(asked.elapsed() < OPEN_WAIT + Duration::from_secs(1), "{:?}", asked.elapsed());
    // What the loop asks of the session on the runtime's thread answers at once.
    let (s, root) = (session.clone(), sysfs.clone());
    let answers =
        within(Duration::from_secs(1), move || (s.config_reads(), s.current().is_none(), s.pci_gpus(&root)));
    assert!(answers.1, "the old session was dropped for the reopen");
    assert!(!pass.is_finished(), "the labelling pass is still in the hung init");

    // The init returns: the pass ends with the new GPU, and both sides share the new session.
    let mut daemon = tokio::time::timeout(HANG * 2, pass).await.expect("the hang ended").unwrap();
    assert!(started.elapsed() >= HANG - Duration::from_secs(1), "the init did hang");
    assert_eq!(metrics.nvml_inits.get(), 2);
    assert!(std::fs::read_to_string(&out).unwrap().contains("nvidia.com/gpu.count=8\n"));
    nvlabel::health::reading::nvml_reads::read(&session, &opts).unwrap();
    daemon.run_pass().await.unwrap();
    assert_eq!(metrics.nvml_inits.get(), 2, "no init since");
}
