//! Whole-process measurements: the release binary, one-shot, against the fake NVML library for
//! every fixture: wall time, CPU time and peak RSS (from `wait4`), and NVML calls per pass
//! (`FAKE_NVML_CALLS`) against the exact minimum. Writes `benches/RESULTS.md`; exits non-zero
//! when a budget is missed. Needs `cargo build --release --workspace` first (benches/run.sh).

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One-shot peak RSS budget.
const RSS_BUDGET_KIB: u64 = 10 * 1024;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The fewest NVML calls one pass can make for a fixture without faults: every fact read once.
///
/// Per pass: `nvmlInit_v2`, `nvmlShutdown`, `nvmlSystemGetDriverVersion` twice (nvml-wrapper
/// reads it once at init to pick its field-id scheme), `nvmlSystemGetCudaDriverVersion_v2`,
/// `nvmlDeviceGetCount_v2` = 6. Per GPU: handle, name, UUID, PCI info, memory, compute
/// capability, MIG mode, fabric info = 8 (a DGX Display: handle and name only = 2). Per
/// MIG-enabled GPU: max MIG device count + one handle lookup per slot (`max_devices`); per MIG
/// device: UUID, attributes, GI id, CI id, CI by id, CI info = 6; per GPU instance: GI by id, GI
/// info = 2; per distinct GI profile and per distinct CI profile on that GPU: 1 profile lookup.
pub fn minimum_calls(fixture: &Value) -> u64 {
    let mut n = 6;
    for gpu in fixture["gpus"].as_array().into_iter().flatten() {
        let name = gpu["name"].as_str().unwrap_or_default();
        if name == "DGX Display" || name == "NVIDIA DGX Display" {
            n += 2;
            continue;
        }
        n += 8;
        let mig = &gpu["mig"];
        if mig["enabled"] != Value::Bool(true) {
            continue;
        }
        n += 1 + mig["max_devices"].as_u64().unwrap_or(7);
        let (mut gis, mut gi_profiles, mut ci_profiles) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
        for (i, d) in mig["devices"].as_array().into_iter().flatten().enumerate() {
            n += 6;
            gis.insert(d["gi_id"].as_u64().unwrap_or(i as u64 + 1));
            gi_profiles.insert(d["gi_profile"].as_u64().unwrap_or(0));
            ci_profiles.insert(d["ci_profile"].as_u64().unwrap_or(0));
        }
        n += 2 * gis.len() as u64 + gi_profiles.len() as u64 + ci_profiles.len() as u64;
    }
    n
}

struct Row {
    fixture: String,
    wall_ms: f64,
    cpu_ms: f64,
    rss_kib: u64,
    calls: u64,
    minimum: Option<u64>,
}

fn measure(fixture: &Path, calls_file: &Path) -> Row {
    let bin = root().join("target/release/nvlabel");
    let lib = root().join("target/release/libnvidia_ml.so");
    assert!(bin.exists() && lib.exists(), "run `cargo build --release --workspace` first");
    let _ = std::fs::remove_file(calls_file);
    let started = std::time::Instant::now();
    // Reaped below by wait4, which also reports its rusage; Child::wait would not.
    #[allow(clippy::zombie_processes)]
    let child = Command::new(&bin)
        .arg("--nvml-library")
        .arg(&lib)
        .arg("--sysfs-root")
        .arg(root().join("testdata/sysfs"))
        .args([
            "--oneshot",
            "--no-timestamp",
            "--output-file",
            "",
            "--use-node-feature-api=false",
            "--mig-strategy",
            "mixed",
        ])
        .env("FAKE_NVML_FIXTURE", fixture)
        .env("FAKE_NVML_CALLS", calls_file)
        .env("RUST_LOG", "off")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // wait4 reports the child's own peak RSS and CPU time, exactly.
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pid is our child's, and wait4 only writes the two values we own.
    let reaped = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    let wall_ms = started.elapsed().as_secs_f64() * 1000.0;
    assert!(
        reaped > 0 && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{} failed",
        fixture.display()
    );
    let t = |tv: libc::timeval| tv.tv_sec as f64 * 1000.0 + tv.tv_usec as f64 / 1000.0;
    let calls: u64 = std::fs::read_to_string(calls_file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum();
    let yaml: Value = serde_saphyr::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let has_faults = yaml.get("faults").is_some_and(|f| !f.is_null());
    Row {
        fixture: fixture.file_stem().unwrap().to_string_lossy().into_owned(),
        wall_ms,
        cpu_ms: t(usage.ru_utime) + t(usage.ru_stime),
        rss_kib: usage.ru_maxrss as u64,
        calls,
        minimum: (!has_faults).then(|| minimum_calls(&yaml)),
    }
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{cpu}, {cores} cores, Linux {}", kernel.trim())
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let calls_file = dir.path().join("calls");
    let mut fixtures: Vec<PathBuf> = std::fs::read_dir(root().join("testdata/machines"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    fixtures.sort();
    let mut rows = Vec::new();
    let mut missed = BTreeMap::new();
    for f in &fixtures {
        let row = measure(f, &calls_file);
        if row.rss_kib > RSS_BUDGET_KIB {
            missed.insert(
                format!("{} RSS", row.fixture),
                format!("{} KiB > {RSS_BUDGET_KIB} KiB", row.rss_kib),
            );
        }
        if let Some(min) = row.minimum {
            if row.calls != min {
                missed.insert(
                    format!("{} NVML calls", row.fixture),
                    format!("{} calls, minimum {min}", row.calls),
                );
            }
        }
        rows.push(row);
    }
    let mut md = String::from("# Whole-process measurements\n\n");
    md.push_str(&format!(
        "Written by `benches/run.sh` (`cargo bench --bench process`). Machine: {}.\n\n\
         One-shot runs of the release binary against the fake NVML library, `--mig-strategy mixed`.\n\
         Budgets: peak RSS under {} KiB; NVML calls per pass equal to the minimum (see `minimum_calls` in\n\
         `benches/process.rs`; fixtures with injected faults stop early and are not held to it).\n\n",
        machine(),
        RSS_BUDGET_KIB
    ));
    md.push_str("| fixture | wall (ms) | CPU (ms) | peak RSS (KiB) | NVML calls | minimum |\n|---|---:|---:|---:|---:|---:|\n");
    for r in &rows {
        md.push_str(&format!(
            "| {} | {:.1} | {:.1} | {} | {} | {} |\n",
            r.fixture,
            r.wall_ms,
            r.cpu_ms,
            r.rss_kib,
            r.calls,
            r.minimum.map_or("(faults)".to_string(), |m| m.to_string())
        ));
    }
    md.push_str(&format!(
        "\nBudgets: {}\n",
        if missed.is_empty() { "all met.".to_string() } else { format!("MISSED: {missed:?}") }
    ));
    let results = root().join("benches/RESULTS.md");
    let daemon_part = std::fs::read_to_string(&results)
        .ok()
        .and_then(|old| old.find("\n# Daemon").map(|i| old[i..].to_string()))
        .unwrap_or_default();
    std::fs::write(&results, md + &daemon_part).unwrap();
    print!("{}", std::fs::read_to_string(&results).unwrap());
    if !missed.is_empty() {
        eprintln!("budgets missed: {missed:?}");
        std::process::exit(1);
    }
}
