//! The daemon over 10,000 passes, in process, against the fake NVML library and a mocked API
//! server (Node writer): the machine changes every 100 passes. Checks that resident memory does
//! not grow between pass 100 and pass 10,000, that API writes equal the real label changes (no
//! write in a pass that changes nothing), and CPU time per pass. Appends to benches/RESULTS.md.

use clap::Parser;
use nvlabel::cli::Cli;
use nvlabel::daemon::{ConfigSource, Daemon, Metrics};
use std::path::PathBuf;
use std::sync::Arc;

#[path = "../tests/common/mock_node.rs"]
mod mock_node;

const PASSES: u64 = 10_000;
const CHANGE_EVERY: u64 = 100;
/// Allocator noise allowed between pass 100 and the last pass.
const RSS_SLACK_KIB: u64 = 256;
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
        let (client, node) = mock_node::spawn("bench-node", 0);
        let cli = Cli::try_parse_from([
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
        let mut daemon = Daemon::start(cli, Default::default(), ConfigSource::None, None, metrics).unwrap();
        daemon.set_client(Some(client));
        let (mut rss_100, mut changes) = (0, 0u64);
        let mut samples = Vec::new();
        let cpu_start = cpu_seconds();
        for pass in 1..=PASSES {
            if pass % CHANGE_EVERY == 1 {
                std::fs::write(&fixture, if (pass / CHANGE_EVERY).is_multiple_of(2) { &a } else { &b }).unwrap();
                changes += 1;
            }
            daemon.pass().await.unwrap();
            if pass == CHANGE_EVERY {
                rss_100 = mock_node::rss_kib();
            }
            if [CHANGE_EVERY, 1_000, 2_500, 5_000, 7_500, PASSES].contains(&pass) {
                samples.push(format!("{pass}: {} KiB", mock_node::rss_kib()));
            }
        }
        let cpu_per_pass_ms = (cpu_seconds() - cpu_start) * 1000.0 / PASSES as f64;
        let rss_last = mock_node::rss_kib();
        let writes = node.lock().unwrap().patches;
        let mut missed = Vec::new();
        if rss_last > rss_100 + RSS_SLACK_KIB {
            missed.push(format!("RSS grew from {rss_100} KiB to {rss_last} KiB"));
        }
        if writes != changes {
            missed.push(format!("{writes} API writes for {changes} label changes"));
        }
        if cpu_per_pass_ms > CPU_BUDGET_MS {
            missed.push(format!("{cpu_per_pass_ms:.3} ms CPU per pass > {CPU_BUDGET_MS} ms"));
        }
        let md = format!(
            "\n# Daemon\n\n`cargo bench --bench daemon`: {PASSES} passes in process over `a100-mig-single` (8 x A100,\n\
             56 MIG devices, mixed strategy), the driver version changing every {CHANGE_EVERY} passes, Node writer\n\
             against a mocked API server.\n\n\
             | RSS at pass {CHANGE_EVERY} (KiB) | RSS at pass {PASSES} (KiB) | label changes | API writes | CPU per pass (ms) |\n\
             |---:|---:|---:|---:|---:|\n| {rss_100} | {rss_last} | {changes} | {writes} | {cpu_per_pass_ms:.3} |\n\n\
             RSS along the way: {}.\n\n\
             Budgets (RSS flat within {RSS_SLACK_KIB} KiB, writes = changes, CPU per pass under {CPU_BUDGET_MS} ms): {}\n",
            samples.join(", "),
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
