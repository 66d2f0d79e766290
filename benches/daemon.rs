//! The daemon over 20,000 passes, in process, against the fake NVML library and a mocked API
//! server (Node writer): the machine changes every 100 passes (a GPU hot-added or removed on the
//! PCI bus, and the fixture the fake reads at nvmlInit). Checks that the heap does not grow (live
//! bytes counted exactly by a counting allocator, so a leak of one byte per pass fails, which
//! resident memory with its page and arena granularity cannot show), that API writes equal the
//! real label changes (no write in a pass that changes nothing), and CPU time per pass. Then a
//! one-GPU node's steady passes: NVML initialised once, PCI config space read once per NVIDIA
//! function, and the per-pass CPU within its budget. RSS is reported too. Appends to
//! benches/RESULTS.md.

use nvlabel::config::Cli;
use nvlabel::config::{ConfigSource, ConfigState};
use nvlabel::daemon::{Daemon, Metrics, Parts};
use std::path::PathBuf;
use std::sync::Arc;

#[path = "../tests/common/mock_api.rs"]
mod mock_api;

const PASSES: u64 = 20_000;
const CHANGE_EVERY: u64 = 100;
/// Where the heap is first measured: after warm-up (caches, the runtime, the first publishes).
const WARM: u64 = 1_000;
/// Live heap bytes allowed to differ between pass WARM and the last pass, measured at the same
/// point of the change cycle: well below one byte per pass over the 19,000 passes between.
const HEAP_SLACK_BYTES: i64 = 4_096;

/// The system allocator, counting live bytes.
struct Counting;

static LIVE: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; only a counter is added.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the caller's layout contract is passed on as is.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        LIVE.fetch_sub(layout.size() as i64, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: ptr came from alloc/realloc above with this layout.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as i64 - layout.size() as i64, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: as for dealloc; the new size is the caller's.
        unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live_bytes() -> i64 {
    LIVE.load(std::sync::atomic::Ordering::Relaxed)
}
/// CPU time budget of one full pass on the largest fixture.
const CPU_BUDGET_MS: f64 = 2.0;
/// CPU time budget of one steady pass on a one-GPU node (NVML kept open, config space not read).
const ONE_GPU_BUDGET_MS: f64 = 1.0;
/// Steady passes on the one-GPU node.
const STEADY_PASSES: u64 = 5_000;
/// A GPU that comes and goes on the PCI bus.
const HOT_GPU: &str = "bus/pci/devices/0000:ff:00.0";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn cpu_seconds() -> f64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes the struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(usage.ru_utime) + t(usage.ru_stime)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let lib = root().join("target/release/libnvidia_ml.so");
    assert!(lib.exists(), "run `cargo build --release --workspace` first");
    let dir = tempfile::tempdir().unwrap();
    let fixture = dir.path().join("machine.yaml");
    // The largest fixture; every CHANGE_EVERY passes its driver version flips, a real change.
    let a = std::fs::read_to_string(root().join("testdata/machines/a100-mig-single.yaml")).unwrap();
    let b = a.replace("550.54.15", "550.54.16");
    std::fs::write(&fixture, &a).unwrap();
    // Set before the runtime (and any other thread) exists; the fake reads it at each nvmlInit.
    std::env::set_var("FAKE_NVML_FIXTURE", &fixture);
    // A sysfs tree of its own, where a GPU can be hot-added: what makes the daemon open NVML again.
    let sysfs = dir.path().join("sys");
    let copied =
        std::process::Command::new("cp").arg("-r").arg(root().join("testdata/sysfs")).arg(&sysfs).status();
    assert!(copied.unwrap().success(), "copying testdata/sysfs");
    let hot_gpu = sysfs.join(HOT_GPU);
    // First the one-GPU node (its session ends before the large machine's nvmlInit reads the file).
    let steady = steady_one_gpu(&lib, dir.path());
    std::fs::write(&fixture, &a).unwrap();

    // The binary's own runtime shape.
    let runtime = nvlabel::runtime().unwrap();
    runtime.block_on(async move {
        let (client, node) = mock_api::node_server("bench-node", 0, false);
        let cli = Cli::try_from_args([
            "nvlabel",
            "--sink=node",
            "--node-name=bench-node",
            "--use-node-feature-api=false",
            "--no-timestamp",
            "--mig-strategy=mixed",
            "--nvml-library",
            lib.to_str().unwrap(),
            "--sysfs-root",
            sysfs.to_str().unwrap(),
        ])
        .unwrap();
        let metrics = Arc::new(Metrics::default());
        let config = ConfigState::load(cli, Default::default(), ConfigSource::None, None).unwrap();
        let session = nvlabel::probe::Session::new();
        let config = Box::new(nvlabel::config::DaemonInputs::new(config));
        let parts = Parts { config, metrics, client: Some(client), session, views: None, slices: None, draw: nvlabel::daemon::RANDOM };
        let mut daemon = Daemon::new(parts).unwrap();
        let (mut rss_warm, mut heap_warm, mut changes) = (0, 0i64, 0u64);
        let mut samples = Vec::new();
        let cpu_start = cpu_seconds();
        for pass in 1..=PASSES {
            if pass % CHANGE_EVERY == 1 {
                let even = (pass / CHANGE_EVERY).is_multiple_of(2);
                std::fs::write(&fixture, if even { &a } else { &b }).unwrap();
                hot_plug(&hot_gpu, !even);
                changes += 1;
            }
            daemon.run_pass().await.unwrap();
            if pass == WARM {
                (rss_warm, heap_warm) = (mock_api::rss_kib(), live_bytes());
            }
            if [WARM, 5_000, 10_000, 15_000, PASSES].contains(&pass) {
                samples.push(format!("{pass}: {} bytes live, {} KiB RSS", live_bytes(), mock_api::rss_kib()));
            }
        }
        let cpu_per_pass_ms = (cpu_seconds() - cpu_start) * 1000.0 / PASSES as f64;
        let (rss_last, heap_last) = (mock_api::rss_kib(), live_bytes());
        let heap_growth = heap_last - heap_warm;
        let writes = node.lock().unwrap().patches;
        let mut missed = Vec::new();
        if heap_growth.abs() > HEAP_SLACK_BYTES {
            missed.push(format!("live heap went from {heap_warm} to {heap_last} bytes"));
        }
        if writes != changes {
            missed.push(format!("{writes} API writes for {changes} label changes"));
        }
        if cpu_per_pass_ms > CPU_BUDGET_MS {
            missed.push(format!("{cpu_per_pass_ms:.3} ms CPU per pass > {CPU_BUDGET_MS} ms"));
        }
        if steady.opens != 1 {
            missed.push(format!("NVML initialised {} times over {STEADY_PASSES} steady passes", steady.opens));
        }
        if steady.config_reads != steady.nvidia_functions {
            missed.push(format!(
                "{} config-space reads for {} NVIDIA functions",
                steady.config_reads, steady.nvidia_functions
            ));
        }
        if steady.cpu_ms > ONE_GPU_BUDGET_MS {
            missed.push(format!("{:.3} ms CPU per one-GPU pass > {ONE_GPU_BUDGET_MS} ms", steady.cpu_ms));
        }
        let per_pass = heap_growth as f64 / (PASSES - WARM) as f64;
        let md = format!(
            "\n# Daemon\n\n`cargo bench --bench daemon`: {PASSES} passes in process over `a100-mig-single` (8 x A100,\n\
             56 MIG devices, mixed strategy), the driver version changing every {CHANGE_EVERY} passes, Node writer\n\
             against a mocked API server. The heap is counted exactly (a counting allocator: live bytes).\n\n\
             | live heap at pass {WARM} (bytes) | at pass {PASSES} (bytes) | growth per pass (bytes) | RSS at {WARM} / {PASSES} (KiB) | label changes | API writes | CPU per pass (ms) |\n\
             |---:|---:|---:|---:|---:|---:|---:|\n| {heap_warm} | {heap_last} | {per_pass:.3} | {rss_warm} / {rss_last} | {changes} | {writes} | {cpu_per_pass_ms:.3} |\n\n\
             Along the way: {}.\n\n\
             One GPU (`t4`), {STEADY_PASSES} steady passes to a feature file: {:.3} ms CPU per pass, nvmlInit {} time(s),\n\
             {} config-space read(s) for {} NVIDIA PCI functions.\n\n\
             Budgets (live heap within {HEAP_SLACK_BYTES} bytes between pass {WARM} and {PASSES}, i.e. a leak of\n\
             one byte per pass fails; writes = changes; CPU per pass under {CPU_BUDGET_MS} ms; one GPU: one\n\
             nvmlInit, one config read per NVIDIA function, under {ONE_GPU_BUDGET_MS} ms a pass): {}\n",
            samples.join("; "),
            steady.cpu_ms,
            steady.opens,
            steady.config_reads,
            steady.nvidia_functions,
            if missed.is_empty() { "all met.".to_string() } else { format!("MISSED: {missed:?}") }
        );
        let results = root().join("benches/RESULTS.md");
        let old = std::fs::read_to_string(&results).unwrap_or_default();
        let head = old.find("\n# Daemon").map_or(old.as_str(), |i| &old[..i]).to_string();
        std::fs::write(&results, head + &md).unwrap();
        print!("{md}");
        if !missed.is_empty() {
            eprintln!("budgets missed: {missed:?}");
            std::process::exit(1);
        }
    });
}

/// Adds (`present`) or removes the hot-pluggable GPU's PCI function.
fn hot_plug(dir: &std::path::Path, present: bool) {
    if present {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("vendor"), "0x10de\n").unwrap();
        std::fs::write(dir.join("class"), "0x030200\n").unwrap();
        std::fs::write(dir.join("config"), [0u8; 256]).unwrap();
    } else {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// What the steady one-GPU run cost.
struct Steady {
    cpu_ms: f64,
    opens: u64,
    config_reads: u64,
    nvidia_functions: u64,
}

/// A one-GPU node's daemon passes to a feature file, NVML kept open: CPU per pass after the first,
/// and what the session did. Its own fixture path, read at the one nvmlInit.
fn steady_one_gpu(lib: &std::path::Path, dir: &std::path::Path) -> Steady {
    // The fixture the fake reads is process-wide: the same file holds the one-GPU machine for now.
    let fixture = std::path::PathBuf::from(std::env::var("FAKE_NVML_FIXTURE").unwrap());
    std::fs::copy(root().join("testdata/machines/t4.yaml"), &fixture).unwrap();
    let sysfs = root().join("testdata/sysfs");
    let out = dir.join("gfd");
    let cli = Cli::try_from_args([
        "nvlabel",
        "--use-node-feature-api=false",
        "--no-timestamp",
        "-o",
        out.to_str().unwrap(),
        "--nvml-library",
        lib.to_str().unwrap(),
        "--sysfs-root",
        sysfs.to_str().unwrap(),
    ])
    .unwrap();
    let config = ConfigState::load(cli, Default::default(), ConfigSource::None, None).unwrap();
    let session = nvlabel::probe::Session::new();
    let metrics = Arc::new(Metrics::default());
    let parts = Parts {
        config: Box::new(nvlabel::config::DaemonInputs::new(config)),
        metrics,
        client: None,
        session: session.clone(),
        views: None,
        slices: None,
        draw: nvlabel::daemon::RANDOM,
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async move {
        let mut daemon = Daemon::new(parts).unwrap();
        daemon.run_pass().await.unwrap();
        let start = cpu_seconds();
        for _ in 0..STEADY_PASSES {
            daemon.run_pass().await.unwrap();
        }
        let cpu_ms = (cpu_seconds() - start) * 1000.0 / STEADY_PASSES as f64;
        let nvidia = std::fs::read_dir(sysfs.join("bus/pci/devices"))
            .unwrap()
            .filter(|d| {
                std::fs::read_to_string(d.as_ref().unwrap().path().join("vendor")).unwrap().trim() == "0x10de"
            })
            .count() as u64;
        Steady {
            cpu_ms,
            opens: session.opens(),
            config_reads: session.config_reads(),
            nvidia_functions: nvidia,
        }
    })
}
