//! The daemon over 20,000 passes, in process, against the fake NVML library and a mocked API
//! server (Node writer): the machine changes every 100 passes. Checks that the heap does not
//! grow (live bytes counted exactly by a counting allocator, so a leak of one byte per pass
//! fails, which resident memory with its page and arena granularity cannot show), that API
//! writes equal the real label changes (no write in a pass that changes nothing), and CPU time
//! per pass. RSS is reported too. Appends to benches/RESULTS.md.

use nvlabel::config::Cli;
use nvlabel::config::{ConfigSource, ConfigState};
use nvlabel::daemon::{Daemon, Metrics};
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
            root().join("testdata/sysfs").to_str().unwrap(),
        ])
        .unwrap();
        let metrics = Arc::new(Metrics::default());
        let mut daemon = Daemon::new(ConfigState::load(cli, Default::default(), ConfigSource::None, None).unwrap(), metrics);
        daemon.set_client(Some(client));
        let (mut rss_warm, mut heap_warm, mut changes) = (0, 0i64, 0u64);
        let mut samples = Vec::new();
        let cpu_start = cpu_seconds();
        for pass in 1..=PASSES {
            if pass % CHANGE_EVERY == 1 {
                std::fs::write(&fixture, if (pass / CHANGE_EVERY).is_multiple_of(2) { &a } else { &b }).unwrap();
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
        let per_pass = heap_growth as f64 / (PASSES - WARM) as f64;
        let md = format!(
            "\n# Daemon\n\n`cargo bench --bench daemon`: {PASSES} passes in process over `a100-mig-single` (8 x A100,\n\
             56 MIG devices, mixed strategy), the driver version changing every {CHANGE_EVERY} passes, Node writer\n\
             against a mocked API server. The heap is counted exactly (a counting allocator: live bytes).\n\n\
             | live heap at pass {WARM} (bytes) | at pass {PASSES} (bytes) | growth per pass (bytes) | RSS at {WARM} / {PASSES} (KiB) | label changes | API writes | CPU per pass (ms) |\n\
             |---:|---:|---:|---:|---:|---:|---:|\n| {heap_warm} | {heap_last} | {per_pass:.3} | {rss_warm} / {rss_last} | {changes} | {writes} | {cpu_per_pass_ms:.3} |\n\n\
             Along the way: {}.\n\n\
             Budgets (live heap within {HEAP_SLACK_BYTES} bytes between pass {WARM} and {PASSES}, i.e. a leak of\n\
             one byte per pass fails; writes = changes; CPU per pass under {CPU_BUDGET_MS} ms): {}\n",
            samples.join("; "),
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
