//! A hung `cuInit` stalls only the side that called it: on a Jetson with NVML (JetPack 6), while
//! the labelling pass's first `cuInit` hangs, health's reading through the same session opens
//! NVML and reads it, and what the daemon's loop asks of the session (its counters, the open
//! session, the bus) answers: `cuInit` runs under the CUDA lock alone, never the state lock both
//! sides take (`src/probe/session.rs`). The fake CUDA driver hangs `cuInit` from a
//! `- hang cuInit <s>` line of the event file, which it reads at each `cuInit`: written before the
//! first. In a process of its own (`common::in_child`): the fakes read their environment at init.

use crate::common;

use nvlabel::daemon::Metrics;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A bound on each wait, far above what any step takes and far below the hang: what waits
/// behind the hung `cuInit` fails the test rather than stalling it.
const LIMIT: Duration = Duration::from_secs(30);

fn event(file: &Path, line: &str) {
    writeln!(std::fs::OpenOptions::new().append(true).open(file).unwrap(), "{line}").unwrap();
}

/// Ends the hang when dropped, so a failing test does not wait for it (its runtime waits for the
/// pass's thread).
struct EndHang(PathBuf);

impl Drop for EndHang {
    fn drop(&mut self) {
        event(&self.0, "- hang cuInit 0");
    }
}

/// `f` on a thread of its own, its answer waited for up to [`LIMIT`].
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(LIMIT).unwrap_or_else(|_| panic!("{what} waited behind the hung cuInit"))
}

#[test]
fn a_hung_cuinit_stalls_only_the_labelling_side() {
    let test = "a_hung_cuinit_stalls_only_the_labelling_side";
    let Some(env) = common::in_child(test, &["FAKE_NVML_FIXTURE", "FAKE_NVML_EVENTS"]) else { return };
    nvlabel::runtime().unwrap().block_on(hung_cuinit(env));
}

async fn hung_cuinit(env: std::collections::BTreeMap<String, PathBuf>) {
    let machine = common::repo().join("testdata/platforms/jetson-orin-nano-jp6");
    std::fs::copy(machine.join("machine.yaml"), &env["FAKE_NVML_FIXTURE"]).unwrap();
    let events = env["FAKE_NVML_EVENTS"].clone();
    // Far longer than the test: only the `0` line below ends it.
    std::fs::write(&events, "- hang cuInit 300\n").unwrap();
    let end_hang = EndHang(events.clone());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gfd");
    let nvml = common::fake_nvml();
    let cuda = nvml.with_file_name("libcuda.so");
    let (sys, host) = (machine.join("sys"), machine.join("host"));
    let config = common::file_daemon_config(
        &out,
        &[
            "--nvml-library",
            nvml.to_str().unwrap(),
            "--cuda-library",
            cuda.to_str().unwrap(),
            "--sysfs-root",
            sys.to_str().unwrap(),
            "--host-root",
            host.to_str().unwrap(),
            // The pass waits out the hang whatever the machine's speed.
            "--health-nvml-timeout=10m",
        ],
    );
    let metrics = Arc::new(Metrics::default());
    let parts = common::parts_of(config, None, metrics.clone(), None);
    let session = parts.session.clone();
    let mut daemon = nvlabel::daemon::Daemon::new(parts).unwrap();
    let opts = daemon.config().pass.probe.clone();

    // The first labelling pass (the Tegra marker picks the CUDA source) hangs in cuInit.
    let pass = tokio::spawn(async move {
        daemon.run_pass().await.unwrap();
        daemon
    });
    let started = Instant::now();
    let in_cuinit = || session.oldest_call().and_then(|c| c.step).is_some_and(|s| s.function == "cuInit");
    while !in_cuinit() {
        assert!(started.elapsed() < LIMIT, "the labelling pass never reached cuInit");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Health's side opens NVML and reads it meanwhile: the state lock is not held by cuInit.
    let (s, o) = (session.clone(), opts.clone());
    let reading = within("health's reading", move || {
        nvlabel::health::reading::nvml_reads::read(&s, &o).map(|r| r.gpus.len()).map_err(|e| e.to_string())
    });
    assert_eq!(reading, Ok(1), "health reads the Orin through NVML while cuInit hangs");
    // What the loop asks of the session answers too.
    let (s, root) = (session.clone(), sys.clone());
    let answers = within("the loop's session calls", move || {
        (s.current().is_some(), s.opens(), s.pci_gpus(&root), s.config_reads())
    });
    assert_eq!((answers.0, answers.1), (true, 1), "health's NVML session is open: {answers:?}");
    assert!(!pass.is_finished(), "the labelling pass is still in the hung cuInit");
    assert!(in_cuinit(), "the labelling pass is still in the hung cuInit");

    // The hang ends: the pass labels the Orin, sharing health's NVML session.
    drop(end_hang);
    let mut daemon = tokio::time::timeout(LIMIT, pass).await.expect("the hang ended").unwrap();
    let labels = std::fs::read_to_string(&out).unwrap();
    assert!(labels.contains("nvidia.com/gpu.product=Orin\n"), "{labels}");
    assert!(labels.contains("nvidia.com/gpu.count=1\n"), "{labels}");
    daemon.run_pass().await.unwrap();
    assert_eq!((metrics.passes.get(), session.opens()), (2, 1), "one NVML session for both sides");
}
