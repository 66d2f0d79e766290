//! The daemon's one NVML session over many passes: NVML initialised once, PCI config space read
//! once per NVIDIA function, both again only when the GPUs on the PCI bus change (a hot-added
//! GPU is seen). Counted by the fake's `FAKE_NVML_CALLS` and the daemon's own counters. Each test
//! runs in a process of its own (`common::in_child`): the fake reads its environment at init.
//! On a JetPack 5 node (CUDA, no NVML library) NVML is looked for once, not every pass.

use crate::common;

use nvlabel::daemon::{Daemon, Metrics};
use std::path::Path;
use std::sync::Arc;

fn inits(calls: &Path) -> u64 {
    let text = std::fs::read_to_string(calls).unwrap_or_default();
    text.lines().find_map(|l| l.strip_prefix("nvmlInit_v2 ")).map_or(0, |n| n.parse().unwrap())
}

/// A file-writing daemon on the fake NVML with the sysfs tree at `sysfs`.
fn daemon(sysfs: &Path, out: &Path) -> (Daemon, Arc<Metrics>) {
    let nvml = common::fake_nvml();
    let config = common::file_daemon_config(
        out,
        &["--nvml-library", nvml.to_str().unwrap(), "--sysfs-root", sysfs.to_str().unwrap()],
    );
    let metrics = Arc::new(Metrics::default());
    (common::daemon_of(config, None, metrics.clone(), None), metrics)
}

#[tokio::test]
async fn a_hundred_passes_initialise_nvml_once_and_read_config_space_once() {
    let test = "a_hundred_passes_initialise_nvml_once_and_read_config_space_once";
    let Some(env) = common::in_child(test, &["FAKE_NVML_FIXTURE", "FAKE_NVML_CALLS"]) else { return };
    std::fs::copy(common::fixture("t4"), &env["FAKE_NVML_FIXTURE"]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sysfs = common::repo().join("testdata/sysfs");
    let (mut daemon, metrics) = daemon(&sysfs, &dir.path().join("gfd"));
    for _ in 0..100 {
        daemon.run_pass().await.unwrap();
    }
    assert_eq!(metrics.passes.get(), 100);
    assert_eq!(metrics.nvml_inits.get(), 1, "NVML initialised once for 100 passes");
    assert_eq!(
        metrics.pci_config_reads.get(),
        common::nvidia_functions(&sysfs),
        "config space read once per NVIDIA function for 100 passes"
    );
    assert!(std::fs::read_to_string(dir.path().join("gfd")).unwrap().contains("nvidia.com/gpu.count=1\n"));
    // The session ends with the daemon: the fake writes its counts.
    drop(daemon);
    assert_eq!(inits(&env["FAKE_NVML_CALLS"]), 1, "the fake saw one nvmlInit");
}

#[tokio::test]
async fn a_hot_added_gpu_opens_nvml_again_and_is_labelled() {
    let test = "a_hot_added_gpu_opens_nvml_again_and_is_labelled";
    let Some(env) = common::in_child(test, &["FAKE_NVML_FIXTURE"]) else { return };
    std::fs::copy(common::fixture("h100-x8"), &env["FAKE_NVML_FIXTURE"]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sysfs = common::sysfs_copy(dir.path());
    let out = dir.path().join("gfd");
    let (mut daemon, metrics) = daemon(&sysfs, &out);
    let functions = common::nvidia_functions(&sysfs);
    daemon.run_pass().await.unwrap();
    daemon.run_pass().await.unwrap();
    assert_eq!((metrics.nvml_inits.get(), metrics.pci_config_reads.get()), (1, functions));
    // The fixture changes alone (the fake reads it at nvmlInit): the kept session does not see it.
    std::fs::copy(common::fixture("rtx4090-x10"), &env["FAKE_NVML_FIXTURE"]).unwrap();
    daemon.run_pass().await.unwrap();
    assert!(std::fs::read_to_string(&out).unwrap().contains("nvidia.com/gpu.count=8\n"));
    // A GPU appears on the PCI bus: NVML is opened again, the bus's config space read again.
    common::hot_plug(&sysfs, "0000:ff:00.0", true);
    daemon.run_pass().await.unwrap();
    assert!(std::fs::read_to_string(&out).unwrap().contains("nvidia.com/gpu.count=10\n"));
    assert_eq!((metrics.nvml_inits.get(), metrics.pci_config_reads.get()), (2, 2 * functions + 1));
    for _ in 0..10 {
        daemon.run_pass().await.unwrap();
    }
    assert_eq!((metrics.nvml_inits.get(), metrics.pci_config_reads.get()), (2, 2 * functions + 1));
    // Another vendor's device changes nothing; the GPU going does.
    std::fs::create_dir(sysfs.join("bus/pci/devices/0000:fe:00.0")).unwrap();
    std::fs::write(sysfs.join("bus/pci/devices/0000:fe:00.0/vendor"), "0x8086\n").unwrap();
    daemon.run_pass().await.unwrap();
    assert_eq!(metrics.nvml_inits.get(), 2);
    common::hot_plug(&sysfs, "0000:ff:00.0", false);
    daemon.run_pass().await.unwrap();
    assert_eq!((metrics.nvml_inits.get(), metrics.pci_config_reads.get()), (3, 3 * functions + 1));
}

/// A JetPack 5 node (integrated GPU through CUDA, no NVML library): NVML's library is looked for
/// once beside CUDA, not on every pass (counted by the session).
#[tokio::test]
async fn a_jetpack5_node_looks_for_nvml_once_not_every_pass() {
    let test = "a_jetpack5_node_looks_for_nvml_once_not_every_pass";
    let Some(env) = common::in_child(test, &["FAKE_NVML_FIXTURE"]) else { return };
    let machine = common::repo().join("testdata/platforms/jetson-agx-orin-jp5");
    std::fs::copy(machine.join("machine.yaml"), &env["FAKE_NVML_FIXTURE"]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gfd");
    let cuda = common::fake_nvml().with_file_name("libcuda.so");
    let (sys, host) = (machine.join("sys"), machine.join("host"));
    let config = common::file_daemon_config(
        &out,
        &[
            "--nvml-library=/nonexistent/libnvidia-ml.so.1",
            "--cuda-library",
            cuda.to_str().unwrap(),
            "--sysfs-root",
            sys.to_str().unwrap(),
            "--host-root",
            host.to_str().unwrap(),
        ],
    );
    let metrics = Arc::new(Metrics::default());
    let parts = common::parts_of(config, None, metrics.clone(), None);
    let session = parts.session.clone();
    let mut daemon = Daemon::new(parts).unwrap();
    for _ in 0..10 {
        daemon.run_pass().await.unwrap();
    }
    assert_eq!(metrics.passes.get(), 10);
    assert!(std::fs::read_to_string(&out).unwrap().contains("nvidia.com/gpu.product=Orin\n"));
    assert_eq!(session.nvml_lookups(), 1, "NVML's library looked for once in 10 passes");
}
