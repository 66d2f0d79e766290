//! Whole-process measurements: the release binary, one-shot, against the fake NVML library for
//! every fixture: wall time, CPU time and peak RSS (from `wait4`), and NVML calls per pass
//! (`FAKE_NVML_CALLS`) against the exact minimum. Writes `benches/RESULTS.md`; exits non-zero
//! when a budget is missed. Needs `cargo build --release --workspace` first (benches/run.sh).

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One-shot peak RSS budget.
const RSS_BUDGET_KIB: u64 = 11 * 1024;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The fewest NVML calls one pass can make for a fixture without faults: every fact read once.
///
/// NVML calls of one pass, per function.
type Calls = BTreeMap<String, u64>;

/// Calls beyond the minimum: function, count, why.
type Extras = Vec<(&'static str, u64, &'static str)>;

fn add(calls: &mut Calls, function: &str, n: u64) {
    if n > 0 {
        *calls.entry(function.to_string()).or_default() += n;
    }
}

/// The least NVML must be asked for the labels of `fixture`, derived from what each label needs,
/// not from what the code does:
/// - the node: init and shutdown; the driver version; the CUDA version; the GPU count;
/// - each GPU: its handle, name (the product, and whether it is a DGX Display, which needs
///   nothing more), memory, compute capability (family, compute labels), MIG mode, PCI info (the
///   bus id that locates its PCI class, `gpu.mode`), fabric info (`gpu.clique`);
/// - each MIG-enabled GPU: the slot count, and one handle lookup per slot (NVML has no other way
///   to find the occupied ones);
/// - each MIG device: its attributes (memory, SMs, slices, engines), GPU-instance and
///   compute-instance ids, its compute instance and that instance's info (the CI profile id);
/// - each GPU instance: the instance and its info (the GI profile id).
///
/// Naming a profile needs nothing more: slices come from the attributes, the name from the ids.
pub fn minimum_calls(fixture: &Value) -> Calls {
    let mut c = Calls::new();
    for f in [
        "nvmlInit_v2",
        "nvmlShutdown",
        "nvmlSystemGetDriverVersion",
        "nvmlSystemGetCudaDriverVersion_v2",
        "nvmlDeviceGetCount_v2",
    ] {
        add(&mut c, f, 1);
    }
    for gpu in fixture["gpus"].as_array().into_iter().flatten() {
        add(&mut c, "nvmlDeviceGetHandleByIndex_v2", 1);
        add(&mut c, "nvmlDeviceGetName", 1);
        let name = gpu["name"].as_str().unwrap_or_default();
        if name == "DGX Display" || name == "NVIDIA DGX Display" {
            continue;
        }
        for f in [
            "nvmlDeviceGetMemoryInfo_v2",
            "nvmlDeviceGetCudaComputeCapability",
            "nvmlDeviceGetMigMode",
            "nvmlDeviceGetPciInfo_v3",
            "nvmlDeviceGetGpuFabricInfo",
        ] {
            add(&mut c, f, 1);
        }
        let mig = &gpu["mig"];
        if mig["enabled"] != Value::Bool(true) {
            continue;
        }
        add(&mut c, "nvmlDeviceGetMaxMigDeviceCount", 1);
        add(&mut c, "nvmlDeviceGetMigDeviceHandleByIndex", mig["max_devices"].as_u64().unwrap_or(7));
        let devices: Vec<&Value> = mig["devices"].as_array().into_iter().flatten().collect();
        for f in [
            "nvmlDeviceGetAttributes_v2",
            "nvmlDeviceGetGpuInstanceId",
            "nvmlDeviceGetComputeInstanceId",
            "nvmlGpuInstanceGetComputeInstanceById",
            "nvmlComputeInstanceGetInfo_v2",
        ] {
            add(&mut c, f, devices.len() as u64);
        }
        let gis: BTreeSet<u64> =
            devices.iter().enumerate().map(|(i, d)| d["gi_id"].as_u64().unwrap_or(i as u64 + 1)).collect();
        add(&mut c, "nvmlDeviceGetGpuInstanceById", gis.len() as u64);
        add(&mut c, "nvmlGpuInstanceGetInfo", gis.len() as u64);
    }
    c
}

/// The calls nvlabel makes beyond [`minimum_calls`], each with its reason. A budget: a pass may
/// make these and nothing else.
pub fn known_extra_calls(fixture: &Value) -> Extras {
    let (mut uuids, mut gi_profiles, mut ci_profiles) = (0, 0, 0);
    for gpu in fixture["gpus"].as_array().into_iter().flatten() {
        let name = gpu["name"].as_str().unwrap_or_default();
        if name == "DGX Display" || name == "NVIDIA DGX Display" {
            continue;
        }
        uuids += 1;
        let mig = &gpu["mig"];
        if mig["enabled"] != Value::Bool(true) {
            continue;
        }
        let devices: Vec<&Value> = mig["devices"].as_array().into_iter().flatten().collect();
        uuids += devices.len() as u64;
        gi_profiles +=
            devices.iter().map(|d| d["gi_profile"].as_u64().unwrap_or(0)).collect::<BTreeSet<_>>().len()
                as u64;
        ci_profiles +=
            devices.iter().map(|d| d["ci_profile"].as_u64().unwrap_or(0)).collect::<BTreeSet<_>>().len()
                as u64;
    }
    vec![
        ("nvmlSystemGetDriverVersion", 1, "nvml-wrapper reads it once more at init"),
        ("nvmlDeviceGetUUID", uuids, "GPU and MIG UUIDs for the snapshot; no label uses them"),
        (
            "nvmlDeviceGetGpuInstanceProfileInfo",
            gi_profiles,
            "profile id to index, as go-nvlib does, per distinct GI profile of a GPU",
        ),
        ("nvmlGpuInstanceGetComputeInstanceProfileInfo", ci_profiles, "the same for CI profiles"),
    ]
}

/// The NVML calls the topology labels add with `--extended-labels`, derived from what they need:
/// - the node: the confidential-computing capabilities (`cc.capable`);
/// - each GPU: its maximum PCIe generation and width, its NUMA node, and the state of link 0;
/// - each GPU with NVLink (link 0 answers): every link id NVML allows (18; NVML has no call that
///   gives the number of links), the version once, and per active link its remote device type
///   (`nvswitch`, `p2p`) and, for a link to a GPU, that GPU's PCI address (is it on this node?).
///
/// A GPU without NVLink costs 4 calls; an NVSwitch GPU with 18 active links 4 + 17 + 1 + 18 = 40.
pub fn topology_calls(fixture: &Value) -> Calls {
    let mut c = Calls::new();
    add(&mut c, "nvmlSystemGetConfComputeCapabilities", 1);
    for gpu in fixture["gpus"].as_array().into_iter().flatten() {
        let name = gpu["name"].as_str().unwrap_or_default();
        if name == "DGX Display" || name == "NVIDIA DGX Display" {
            continue;
        }
        for f in
            ["nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetMaxPcieLinkWidth", "nvmlDeviceGetNumaNodeId"]
        {
            add(&mut c, f, 1);
        }
        // Each entry stands for `count` links (default 1); active unless it says otherwise.
        let mut links = Vec::new();
        for l in gpu["nvlink"]["links"].as_array().into_iter().flatten() {
            let active = l["active"].as_bool().unwrap_or(true);
            for _ in 0..l["count"].as_u64().unwrap_or(1) {
                links.push((active, l["remote"].as_str() == Some("gpu")));
            }
        }
        if links.is_empty() {
            add(&mut c, "nvmlDeviceGetNvLinkState", 1);
            continue;
        }
        add(&mut c, "nvmlDeviceGetNvLinkState", 18);
        add(&mut c, "nvmlDeviceGetNvLinkVersion", 1);
        let active: Vec<bool> = links.iter().filter(|l| l.0).map(|l| l.1).collect();
        add(&mut c, "nvmlDeviceGetNvLinkRemoteDeviceType", active.len() as u64);
        add(&mut c, "nvmlDeviceGetNvLinkRemotePciInfo_v2", active.iter().filter(|g| **g).count() as u64);
    }
    c
}

struct Row {
    fixture: String,
    wall_ms: f64,
    cpu_ms: f64,
    rss_kib: u64,
    calls: Calls,
    /// The derived minimum and the itemised extras (`None` for fixtures with injected faults).
    expected: Option<(Calls, Extras)>,
}

fn measure(fixture: &Path, calls_file: &Path, extended: bool) -> Row {
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
        .args(extended.then_some("--extended-labels"))
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
    let calls: Calls = std::fs::read_to_string(calls_file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            Some((words.next()?.to_string(), words.next()?.parse::<u64>().ok()?))
        })
        .collect();
    let yaml: Value = serde_saphyr::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let has_faults = yaml.get("faults").is_some_and(|f| !f.is_null());
    let stem = fixture.file_stem().unwrap().to_string_lossy().into_owned();
    let expected = (!has_faults).then(|| {
        let mut minimum = minimum_calls(&yaml);
        if extended {
            for (f, n) in topology_calls(&yaml) {
                add(&mut minimum, &f, n);
            }
        }
        (minimum, known_extra_calls(&yaml))
    });
    Row {
        fixture: if extended { format!("{stem} (extended)") } else { stem },
        wall_ms,
        cpu_ms: t(usage.ru_utime) + t(usage.ru_stime),
        rss_kib: usage.ru_maxrss as u64,
        calls,
        expected,
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
    // Every fixture without and with --extended-labels (the topology labels' calls).
    for (f, extended) in fixtures.iter().flat_map(|f| [(f, false), (f, true)]) {
        let row = measure(f, &calls_file, extended);
        if row.rss_kib > RSS_BUDGET_KIB {
            missed.insert(
                format!("{} RSS", row.fixture),
                format!("{} KiB > {RSS_BUDGET_KIB} KiB", row.rss_kib),
            );
        }
        if let Some((minimum, extras)) = &row.expected {
            let mut allowed = minimum.clone();
            for (f, n, _) in extras {
                add(&mut allowed, f, *n);
            }
            if row.calls != allowed {
                missed.insert(
                    format!("{} NVML calls", row.fixture),
                    format!("made {:?}, derived minimum plus known extras {allowed:?}", row.calls),
                );
            }
        }
        rows.push(row);
    }
    let mut md = String::from("# Whole-process measurements\n\n");
    md.push_str(&format!(
        "Written by `benches/run.sh` (`cargo bench --bench process`). Machine: {}.\n\n\
         One-shot runs of the release binary against the fake NVML library, `--mig-strategy mixed`.\n\
         Budgets: peak RSS under {} KiB; NVML calls per pass no more than the minimum derived from what\n\
         each label needs (`minimum_calls` in `benches/process.rs`) plus the itemised extras below, and\n\
         exactly those (fixtures with injected faults stop early and are not held to it). The\n\
         `(extended)` rows add `--extended-labels`, whose minimum also has the topology labels'\n\
         calls (`topology_calls`).\n\n",
        machine(),
        RSS_BUDGET_KIB
    ));
    md.push_str("| fixture | wall (ms) | CPU (ms) | peak RSS (KiB) | NVML calls | derived minimum | extra |\n|---|---:|---:|---:|---:|---:|---:|\n");
    let total = |c: &Calls| c.values().sum::<u64>();
    for r in &rows {
        let (min, extra) = match &r.expected {
            Some((m, e)) => (total(m).to_string(), e.iter().map(|x| x.1).sum::<u64>().to_string()),
            None => ("(faults)".into(), "".into()),
        };
        md.push_str(&format!(
            "| {} | {:.1} | {:.1} | {} | {} | {min} | {extra} |\n",
            r.fixture,
            r.wall_ms,
            r.cpu_ms,
            r.rss_kib,
            total(&r.calls),
        ));
    }
    md.push_str("\nThe extra calls, per pass:\n\n");
    if let Some((_, extras)) = rows.iter().find_map(|r| r.expected.as_ref()) {
        for (f, _, why) in extras {
            md.push_str(&format!("- `{f}`: {why}\n"));
        }
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
