//! Every device source on its bundled platform sample (`testdata/platforms/<machine>/`: Jetson
//! with and without NVML, Thor, IGX with a discrete GPU, DGX Spark, WSL, a vfio host): the
//! binary, loading the fake NVML and CUDA libraries as the real drivers, labels each exactly as
//! its golden, with the source GFD's `auto` picks there; one `cuInit` per process; and the
//! errors of a node without a driver or with a bad strategy, in one line each.
//! Regenerate the goldens with `UPDATE_GOLDEN=1 cargo test --workspace --test local -- platforms::`.

use crate::common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

#[test]
fn every_platform_labels_as_its_golden() {
    let mut failures = Vec::new();
    for machine in platforms() {
        let out = ok(platform(&machine).args(PRINT));
        failures.extend(golden(&format!("{machine}.platform.labels"), &out));
        let (code, out, stderr) = run(platform(&machine).args(PRINT).arg("--extended-labels"));
        assert_eq!(code, 0, "{machine}: {stderr}");
        failures.extend(golden(&format!("{machine}.platform.extended.labels"), &out));
        let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains(" WARN ")).collect();
        let want = usize::from(machine == "dgx-spark");
        assert_eq!(warnings.len(), want, "{machine} with --extended-labels: {warnings:#?}");
    }
    assert!(failures.is_empty(), "{} golden file(s) differ:\n{}", failures.len(), failures.join("\n"));
}

/// `auto` resolves as GFD's platform resolver: the log names the source it chose.
#[test]
fn auto_picks_the_source_gfd_picks() {
    let want = [
        ("dgx-spark", "nvml", "NVML", false),
        ("igx-orin-dgpu", "nvml", "NVML", false),
        ("jetson-agx-orin-jp5", "tegra", "CUDA", false),
        ("jetson-agx-thor", "tegra", "CUDA", false),
        ("jetson-orin-nano-jp6", "tegra", "CUDA", false),
        ("wsl-rtx4090", "nvml", "NVML", true),
    ];
    for (machine, backend, driver, wsl) in want {
        let (code, _, stderr) = run(platform(machine).env("RUST_LOG", "info").args(PRINT));
        assert_eq!(code, 0, "{machine}: {stderr}");
        let line =
            format!("device source backend=\"{backend}\" driver=\"{driver}\" wsl={wsl} strategy=\"auto\"");
        assert!(stderr.contains(&line), "{machine}: want {line}\n{stderr}");
        // What a platform does not have (WSL's PCI function, an integrated GPU's PCI facts) is
        // no fault; DGX Spark's memory is said, as GFD does.
        let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains(" WARN ")).collect();
        let want = usize::from(machine == "dgx-spark");
        assert_eq!(warnings.len(), want, "{machine}: {warnings:#?}");
    }
}

/// An explicit strategy is used as given: the Orin's NVML face (what `nvml` gets there) is the
/// integrated GPU without memory; `tegra` on a machine whose files say nothing still uses CUDA.
#[test]
fn an_explicit_strategy_is_used_as_given() {
    let nvml = ok(platform("jetson-orin-nano-jp6").args(PRINT).arg("--device-discovery-strategy=nvml"));
    assert!(nvml.contains("nvidia.com/gpu.product=Orin-nvgpu\n"), "{nvml}");
    assert!(!nvml.contains("gpu.memory"), "NVML reports no memory on an integrated GPU:\n{nvml}");
    let golden =
        std::fs::read_to_string(repo().join("testdata/golden/jetson-orin-nano-jp6.platform.labels")).unwrap();
    let tegra = ok(platform("jetson-orin-nano-jp6").args(PRINT).args([
        "--device-discovery-strategy=tegra",
        "--host-root=/nonexistent",
        "--sysfs-root=testdata/sysfs",
    ]));
    // The machine type comes from the other sysfs tree; every GPU label is the golden's.
    let gpu = |s: &str| s.lines().filter(|l| !l.contains("gpu.machine")).collect::<Vec<_>>().join("\n");
    assert_eq!(gpu(&tegra), gpu(&golden));
}

/// The snapshot records the source, so a CUDA or vfio machine read back labels the same.
#[test]
fn a_snapshot_keeps_the_source() {
    let dir = tempfile::tempdir().unwrap();
    for machine in ["jetson-agx-orin-jp5", "h100-vfio"] {
        let yaml = ok(&mut platform_with(machine, &["probe"]));
        let source = if machine == "h100-vfio" { "source: vfio\n" } else { "source: cuda\n" };
        assert!(yaml.starts_with(source), "{machine}: {yaml}");
        let path = dir.path().join(format!("{machine}.yaml"));
        std::fs::write(&path, yaml).unwrap();
        let out = ok(nvlabel(None).args(PRINT).arg("--snapshot").arg(&path));
        let golden =
            std::fs::read_to_string(repo().join(format!("testdata/golden/{machine}.platform.labels")))
                .unwrap();
        assert_eq!(out, golden, "{machine} from its snapshot");
    }
}

/// A failing CUDA call for one GPU excludes that GPU with a warning naming the call; a failing
/// `cuInit` is the node's init failure, which `--fail-on-init-error=false` survives.
#[test]
fn cuda_faults_exclude_a_gpu_or_are_the_init_failure() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = dir.path().join("orin.yaml");
    let base = std::fs::read_to_string(platform_dir("jetson-agx-orin-jp5").join("machine.yaml")).unwrap();
    std::fs::write(
        &fixture,
        format!("{base}faults:\n  - function: cuDeviceGetName\n    device: \"0\"\n    error: unknown\n"),
    )
    .unwrap();
    let (code, out, stderr) =
        run(platform("jetson-agx-orin-jp5").env("FAKE_NVML_FIXTURE", &fixture).args(PRINT));
    assert_eq!(code, 0, "{stderr}");
    assert!(!out.contains("gpu.count"), "the one GPU is excluded:\n{out}");
    assert!(
        stderr.contains(
            "GPU excluded from this pass device=0 function=cuDeviceGetName error=CUDA_ERROR_UNKNOWN (999)"
        ),
        "{stderr}"
    );
    std::fs::write(&fixture, format!("{base}faults:\n  - function: cuInit\n    error: unknown\n")).unwrap();
    let (code, _, stderr) =
        run(platform("jetson-agx-orin-jp5").env("FAKE_NVML_FIXTURE", &fixture).args(PRINT));
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.starts_with("nvlabel: error: no CUDA driver found: "), "{stderr}");
    assert!(stderr.contains("cuInit: CUDA_ERROR_UNKNOWN (999)"), "{stderr}");
    let (code, out, stderr) = run(platform("jetson-agx-orin-jp5")
        .env("FAKE_NVML_FIXTURE", &fixture)
        .args(PRINT)
        .arg("--fail-on-init-error=false"));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(out, "nvidia.com/vgpu.present=false\n", "node facts only, as GFD's null manager");
}

/// Sharing configs apply to an integrated GPU as to any (time-slicing is how a Jetson's one GPU
/// is shared).
#[test]
fn sharing_applies_to_an_integrated_gpu() {
    for (config, want) in [
        (
            "time-slicing-gpu-4",
            ["gpu.replicas=4", "gpu.product=Orin-SHARED", "gpu.sharing-strategy=time-slicing"],
        ),
        ("mps-gpu-10", ["gpu.replicas=10", "mps.capable=true", "gpu.sharing-strategy=mps"]),
    ] {
        let path = repo().join("testdata/configs").join(format!("{config}.yaml"));
        let out = ok(platform("jetson-agx-orin-jp5").args(PRINT).arg("--config-file").arg(path));
        for label in want {
            assert!(out.contains(&format!("nvidia.com/{label}\n")), "{config}: {label} in\n{out}");
        }
    }
}

/// A Jetson whose container lacks `libcuda.so.1` (and has no NVML) gets one line naming the
/// library and how to point nvlabel at it.
#[test]
fn a_tegra_node_without_its_cuda_library_says_what_to_do() {
    let (code, out, stderr) = run(platform("jetson-agx-orin-jp5")
        .args(PRINT)
        .args(["--cuda-library", "/nonexistent/libcuda.so.1"]));
    assert_eq!((code, out.as_str()), (1, ""));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("nvlabel: error: no CUDA driver found: cannot load /nonexistent/libcuda.so.1: "),
        "{stderr}"
    );
    assert!(stderr.contains("point --cuda-library at it"), "{stderr}");
}

/// A CUDA driver that loads but answers `CUDA_ERROR_NO_DEVICE` (a non-root Jetson pod without
/// the device nodes' group) is told about device access, not about installing libcuda.
#[test]
fn a_tegra_node_whose_gpu_cannot_be_opened_says_device_access() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = dir.path().join("orin.yaml");
    let base = std::fs::read_to_string(platform_dir("jetson-agx-orin-jp5").join("machine.yaml")).unwrap();
    std::fs::write(&fixture, format!("{base}faults:\n  - function: cuInit\n    error: no_device\n")).unwrap();
    let (code, out, stderr) =
        run(platform("jetson-agx-orin-jp5").env("FAKE_NVML_FIXTURE", &fixture).args(PRINT));
    assert_eq!((code, out.as_str()), (1, ""), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("cuInit: CUDA_ERROR_NO_DEVICE (100)"), "{stderr}");
    assert!(stderr.contains("cannot open the GPU's device nodes"), "{stderr}");
    assert!(stderr.contains("supplemental groups, e.g. the video group"), "{stderr}");
    assert!(!stderr.contains("host's libcuda.so.1") && !stderr.contains("point --cuda-library"), "{stderr}");
}

/// `--health` reads a driver: a vfio node has none, so the combination is refused at start.
#[test]
fn health_is_refused_on_vfio() {
    let (code, _, stderr) = run(platform("h100-vfio").args(PRINT).arg("--health"));
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--health") && stderr.contains("vfio"), "{stderr}");
}

/// The daemon initialises CUDA once for all its passes (GFD calls `cuInit` every pass), counted
/// by the fake driver at the exit of a process of the test's own.
#[tokio::test]
async fn a_hundred_daemon_passes_call_cuinit_once() {
    const TEST: &str = "a_hundred_daemon_passes_call_cuinit_once";
    const CHILD: &str = "NVLABEL_TEST_CHILD";
    if std::env::var_os(CHILD).is_some() {
        let dir = tempfile::tempdir().unwrap();
        let (sys, host) = (
            platform_dir("jetson-agx-orin-jp5").join("sys"),
            platform_dir("jetson-agx-orin-jp5").join("host"),
        );
        let cli = nvlabel::config::Cli::try_from_args([
            "nvlabel".as_ref(),
            "--use-node-feature-api=false".as_ref(),
            "--no-timestamp".as_ref(),
            "-o".as_ref(),
            dir.path().join("gfd").as_os_str(),
            "--nvml-library=/nonexistent/libnvidia-ml.so.1".as_ref(),
            "--cuda-library".as_ref(),
            fake_cuda().as_os_str(),
            "--sysfs-root".as_ref(),
            sys.as_os_str(),
            "--host-root".as_ref(),
            host.as_os_str(),
        ] as [&std::ffi::OsStr; 12])
        .unwrap();
        let config = nvlabel::config::ConfigState::load(
            cli,
            Default::default(),
            nvlabel::config::ConfigSource::None,
            None,
        )
        .unwrap();
        let metrics = std::sync::Arc::new(nvlabel::daemon::Metrics::default());
        let mut daemon = daemon_of(config, None, metrics.clone(), None);
        for _ in 0..100 {
            daemon.run_pass().await.unwrap();
        }
        assert_eq!(metrics.passes.get(), 100);
        let labels = std::fs::read_to_string(dir.path().join("gfd")).unwrap();
        assert!(labels.contains("nvidia.com/gpu.product=Orin\n"), "{labels}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let calls = dir.path().join("calls");
    let out = Command::new(std::env::current_exe().unwrap())
        .args([&common::test_path(TEST), "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("FAKE_NVML_FIXTURE", platform_dir("jetson-agx-orin-jp5").join("machine.yaml"))
        .env("FAKE_CUDA_CALLS", &calls)
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("1 passed"), "the child failed:\n{text}");
    let counts = std::fs::read_to_string(&calls).unwrap();
    let count = |f: &str| {
        counts.lines().find_map(|l| l.strip_prefix(&format!("{f} "))).map(|n| n.parse::<u32>().unwrap())
    };
    assert_eq!(count("cuInit"), Some(1), "{counts}");
    assert_eq!(count("cuDeviceGetCount"), Some(100), "one count per pass:\n{counts}");
}

/// `nvlabel health` (node-problem-detector's check) on every platform whose NVML answers: healthy,
/// so a WSL GPU without a PCI function in sysfs and an integrated GPU are never "missing"; where
/// NVML is absent (JetPack 5, vfio) it exits 2, its "cannot check" status.
#[test]
fn health_counts_no_gpu_missing_where_sysfs_has_no_pci_function() {
    for machine in platforms() {
        let (code, out, stderr) = run(&mut platform_with(&machine, &["health"]));
        let fixture = std::fs::read_to_string(platform_dir(&machine).join("machine.yaml")).unwrap();
        if fixture.lines().any(|l| l.starts_with("driver_version:")) {
            assert_eq!(code, 0, "{machine}: {out}{stderr}");
            assert!(out.starts_with("GpusHealthy: 1 GPUs healthy\n"), "{machine}: {out}");
        } else {
            assert_eq!(code, 2, "{machine}: {out}{stderr}");
        }
    }
}

/// The bundled platform samples, sorted.
fn platforms() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(repo().join("testdata/platforms"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

fn platform_dir(machine: &str) -> PathBuf {
    repo().join("testdata/platforms").join(machine)
}

/// The fake `libcuda.so.1`, built beside the binary by `cargo build --workspace`.
fn fake_cuda() -> PathBuf {
    let lib = fake_nvml().with_file_name("libcuda.so");
    assert!(lib.exists(), "{} is missing: run `cargo build --workspace` before the tests", lib.display());
    lib
}

/// The binary on platform `machine` as its directory describes it: its fixture, sysfs and host
/// root; no NVML library where the fixture has no NVML part; a loadable `libdxcore.so` where a
/// `wsl` file says WSL; the extra flags of its `flags` file.
fn platform(machine: &str) -> Command {
    platform_with(machine, &[])
}

/// [`platform`] with `first` (a subcommand, say) before the platform's own flags.
fn platform_with(machine: &str, first: &[&str]) -> Command {
    let dir = platform_dir(machine);
    let rel = |p: &str| format!("testdata/platforms/{machine}/{p}");
    let fixture = std::fs::read_to_string(dir.join("machine.yaml")).unwrap();
    let mut cmd = nvlabel_in(None, &rel("sys"));
    cmd.env("FAKE_NVML_FIXTURE", dir.join("machine.yaml"))
        .env("NVLABEL_CUDA_LIBRARY", fake_cuda())
        .env("NVLABEL_HOST_ROOT", rel("host"));
    if !fixture.lines().any(|l| l.starts_with("driver_version:")) {
        cmd.env("NVLABEL_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1");
    }
    if dir.join("wsl").exists() {
        cmd.env("LD_LIBRARY_PATH", dxcore_dir());
    }
    cmd.args(first);
    if let Ok(flags) = std::fs::read_to_string(dir.join("flags")) {
        cmd.args(flags.lines().filter(|l| !l.is_empty()));
    }
    cmd
}

/// A directory holding a `libdxcore.so` (any shared object of that name stands for WSL's).
fn dxcore_dir() -> &'static Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(fake_cuda(), dir.path().join("libdxcore.so")).unwrap();
        dir
    })
    .path()
}
