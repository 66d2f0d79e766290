//! What `--health` costs an idle node: CPU per health pass (the NVML reading, the rules, the
//! condition text) on an 8-GPU machine of the fake NVML, the event thread's CPU while nothing
//! happens, and the resident memory the session and the thread add. Prints a table for
//! benches/RESULTS.md. `cargo build --release --workspace && cargo bench --bench health`.

use nvlabel::health::judging::rules::Rules;
use nvlabel::health::judging::sticky::Tracker;
use nvlabel::health::reading::nvml_reads;
use nvlabel::probe::{ProbeOptions, Session};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

const PASSES: u32 = 2_000;
const IDLE: Duration = Duration::from_secs(10);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Process CPU time (user + system), from /proc/self/stat, in clock ticks of 10 ms.
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .unwrap()
        .trim()
        .trim_end_matches(" kB")
        .parse()
        .unwrap()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let lib = root().join("target/release/libnvidia_ml.so");
    assert!(lib.exists(), "run `cargo build --release --workspace` first");
    let dir = tempfile::tempdir().unwrap();
    let one = std::fs::read_to_string(root().join("testdata/health/h100x2.yaml")).unwrap();
    let (head, gpus) = one.split_once("gpus:\n").unwrap();
    let first = gpus.split("  - name:").nth(1).unwrap();
    let mut text = format!("{head}gpus:\n");
    for i in 0..8 {
        text.push_str(&format!(
            "  - name:{}",
            first.replace("0000-4000-8000-000000000000", &format!("{i:04}-4000-8000-{i:012}"))
        ));
    }
    let fixture = dir.path().join("h100x8.yaml");
    std::fs::write(&fixture, text).unwrap();
    // Set before any other thread exists; the fake reads them at init.
    std::env::set_var("FAKE_NVML_FIXTURE", &fixture);
    std::env::set_var("FAKE_NVML_EVENTS", dir.path().join("events"));
    std::fs::write(dir.path().join("events"), "").unwrap();
    let opts = ProbeOptions {
        library: lib,
        sysfs_root: root().join("testdata/sysfs"),
        machine_type_file: "".into(),
        topology: false,
        ..ProbeOptions::default()
    };
    let rss_before = rss_kib();
    let session = Session::new();
    let first = nvml_reads::read(&session, &opts).unwrap();
    assert_eq!(first.gpus.len(), 8);
    let (tx, _rx) = tokio::sync::mpsc::channel(16);
    let stop = Arc::new(AtomicBool::new(false));
    let (s, o, flag) = (session.clone(), opts.clone(), stop.clone());
    let events = std::thread::spawn(move || nvml_reads::listen_events(s, o, tx, flag));
    std::thread::sleep(Duration::from_secs(1));
    let rss_after = rss_kib();

    // Idle: only the event thread, blocked in its waits.
    let c0 = cpu();
    std::thread::sleep(IDLE);
    let idle = cpu() - c0;

    let rules = Rules::default();
    let mut tracker = Tracker::new("bench");
    let started = Instant::now();
    let c0 = cpu();
    let mut last = None;
    for _ in 0..PASSES {
        let r = nvml_reads::read(&session, &opts).unwrap();
        for f in rules.faults(&r, last.as_ref()) {
            tracker.record(&f, None, |_| 0);
        }
        tracker.nvml(Ok(r.gpus.len()));
        std::hint::black_box(tracker.verdict());
        last = Some(r);
    }
    let per_pass = (cpu() - c0) / PASSES;
    let wall = started.elapsed() / PASSES;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    events.join().unwrap();

    let per_hour_idle = idle.as_secs_f64() * 3600.0 / IDLE.as_secs_f64();
    println!("| measure | result |");
    println!("|---|---|");
    println!(
        "| CPU per health pass, 8 GPUs (reading + rules + condition text) | {per_pass:?} (wall {wall:?}) |"
    );
    println!("| CPU per hour of passes at the default 60 s interval | {:?} |", per_pass * 60);
    println!("| CPU per hour of the idle event thread (fake NVML: polls its file every 10 ms) | {per_hour_idle:.2} s |");
    println!(
        "| resident memory added by the session and the event thread | {} KiB |",
        rss_after.saturating_sub(rss_before)
    );
}
