//! The chart refuses exactly what the binary refuses, so no `helm install` succeeds into pods that
//! exit 2 (a bad configuration) on every node. For a table of sample values of every chart value
//! that becomes one of nvlabel's flags, the chart is rendered with Helm and the built binary is
//! run: on the container's args and env as rendered where the chart takes the value, and where it
//! refuses, on the args it renders without the value plus the flag the value would have become.
//! The binary's verdict is its exit status 2 within a few seconds (it refuses before touching NVML
//! or the API); anything else is an accepted configuration. Host paths and the metrics port are
//! moved into a temporary directory, which changes no validation. The few values the chart refuses
//! and the binary takes are listed with the reason. Every flag the chart renders from a value has
//! samples in the table (checked on renderings of every mode). Needs a Helm binary
//! (`NVLABEL_HELM`); without one each test skips with one line.

use crate::common;

use common::deploy_checks::{container_env, typed};
use common::helm::{helm, template};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What is expected of a value: both take it, both refuse it, or the chart alone refuses it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Want {
    Ok,
    Refused,
    ChartOnly(&'static str),
}
use Want::*;

/// The context's values, the sample's values, the flag it becomes, and what is expected.
type Case = (&'static [&'static str], &'static [&'static str], &'static str, Want);

const NODEFEATURE: &[&str] = &[];
const FILE: &[&str] = &["--set", "mode=nfd-file"];
const HEALTH: &[&str] = &["--set", "health.enabled=true"];
const HEALTH_DRA: &[&str] = &["--set", "health.enabled=true", "--set", "allocationMode=dra"];
const NODE_HEALTH: &[&str] = &["--set", "mode=node", "--set", "health.enabled=true"];
const DRA: &[&str] = &["--set", "allocationMode=dra"];
const FATAL_13: &[&str] = &["--set", "health.enabled=true", "--set-json", "health.fatalXids=[13]"];
const IGNORE_43: &[&str] = &["--set", "health.enabled=true", "--set-json", "health.ignoreXids=[43]"];
const RELATIVE: &str =
    "a path relative to the container's working directory, which the image does not promise";

const CASES: &[Case] = &[
    (NODEFEATURE, &["--set", "sleepInterval=60s"], "--sleep-interval=60s", Ok),
    (NODEFEATURE, &["--set", "sleepInterval=1h30m"], "--sleep-interval=1h30m", Ok),
    (NODEFEATURE, &["--set", "sleepInterval=1.5h"], "--sleep-interval=1.5h", Ok),
    (NODEFEATURE, &["--set", "sleepInterval=90"], "--sleep-interval=90", Ok),
    (NODEFEATURE, &["--set", "sleepInterval=500ms"], "--sleep-interval=500ms", Ok),
    (NODEFEATURE, &["--set", "sleepInterval=infinite"], "--sleep-interval=infinite", Ok),
    (NODEFEATURE, &["--set", "sleepInterval=-1s"], "--sleep-interval=-1s", Refused),
    (NODEFEATURE, &["--set", "sleepInterval=1d"], "--sleep-interval=1d", Refused),
    (NODEFEATURE, &["--set", "sleepInterval=fast"], "--sleep-interval=fast", Refused),
    (NODEFEATURE, &["--set", "sleepInterval=1.2.3s"], "--sleep-interval=1.2.3s", Refused),
    (NODEFEATURE, &["--set", "sleepInterval="], "--sleep-interval=", Refused),
    (FILE, &["--set", "file.expiry=1h"], "--expiry=1h", Ok),
    (FILE, &["--set", "file.expiry=90"], "--expiry=90", Ok),
    (FILE, &["--set", "file.expiry=0.5s"], "--expiry=0.5s", Ok),
    (FILE, &["--set", "file.expiry="], "--expiry=", Ok),
    (FILE, &["--set", "file.expiry=0s"], "--expiry=0s", Refused),
    (FILE, &["--set", "file.expiry=0"], "--expiry=0", Refused),
    (FILE, &["--set", "file.expiry=0h0m"], "--expiry=0h0m", Refused),
    (FILE, &["--set", "file.expiry=infinite"], "--expiry=infinite", Refused),
    (FILE, &["--set", "file.expiry=-1h"], "--expiry=-1h", Refused),
    (NODEFEATURE, &["--set", "migStrategy=mixed"], "--mig-strategy=mixed", Ok),
    (NODEFEATURE, &["--set", "migStrategy=Mixed"], "--mig-strategy=Mixed", Refused),
    (NODEFEATURE, &["--set", "migStrategy=all"], "--mig-strategy=all", Refused),
    (DRA, &["--set", "migStrategy=none"], "--mig-strategy=none", Refused),
    (HEALTH, &["--set", "health.nvmlTimeout=30s"], "--health-nvml-timeout=30s", Ok),
    (HEALTH, &["--set", "health.nvmlTimeout=1s"], "--health-nvml-timeout=1s", Ok),
    (HEALTH, &["--set", "health.nvmlTimeout=1000ms"], "--health-nvml-timeout=1000ms", Ok),
    (HEALTH, &["--set", "health.nvmlTimeout=1.5s"], "--health-nvml-timeout=1.5s", Ok),
    (HEALTH, &["--set", "health.nvmlTimeout=500ms500ms"], "--health-nvml-timeout=500ms500ms", Ok),
    (HEALTH, &["--set", "health.nvmlTimeout=500ms"], "--health-nvml-timeout=500ms", Refused),
    (HEALTH, &["--set", "health.nvmlTimeout=999ms"], "--health-nvml-timeout=999ms", Refused),
    (HEALTH, &["--set", "health.nvmlTimeout=0.5s"], "--health-nvml-timeout=0.5s", Refused),
    (HEALTH, &["--set", "health.nvmlTimeout=30"], "--health-nvml-timeout=30", Refused),
    (HEALTH, &["--set", "health.nvmlTimeout=2x"], "--health-nvml-timeout=2x", Refused),
    (HEALTH, &["--set", "health.expectedGpus=8"], "--health-expected-gpus=8", Ok),
    (HEALTH, &["--set", "health.expectedGpus=4294967295"], "--health-expected-gpus=4294967295", Ok),
    (HEALTH, &["--set", "health.expectedGpus=0"], "--health-expected-gpus=0", Refused),
    (HEALTH, &["--set", "health.expectedGpus=-1"], "--health-expected-gpus=-1", Refused),
    (HEALTH, &["--set", "health.expectedGpus=4294967296"], "--health-expected-gpus=4294967296", Refused),
    (HEALTH, &["--set-json", "health.ignoreXids=[13,31]"], "--health-ignore-xids=13,31", Ok),
    (HEALTH, &["--set-json", "health.ignoreXids=[13,13]"], "--health-ignore-xids=13,13", Ok),
    (HEALTH, &["--set-json", "health.ignoreXids=[]"], "--health-ignore-xids=", Ok),
    (HEALTH, &["--set-json", "health.ignoreXids=[-1]"], "--health-ignore-xids=-1", Refused),
    (HEALTH, &["--set-json", "health.fatalXids=[94]"], "--health-fatal-xids=94", Ok),
    (HEALTH, &["--set-json", "health.fatalXids=[\"x\"]"], "--health-fatal-xids=x", Refused),
    (FATAL_13, &["--set-json", "health.ignoreXids=[31]"], "--health-ignore-xids=31", Ok),
    (FATAL_13, &["--set-json", "health.ignoreXids=[13]"], "--health-ignore-xids=13", Refused),
    (FATAL_13, &["--set-json", "health.ignoreXids=[31,13]"], "--health-ignore-xids=31,13", Refused),
    (HEALTH, &["--set", "health.xidThresholds={4:3/1m,1:2/1h}"], "--health-xid-thresholds=4:3/1m,1:2/1h", Ok),
    (HEALTH, &["--set", "health.xidThresholds={45:1000/90s}"], "--health-xid-thresholds=45:1000/90s", Ok),
    (HEALTH, &["--set-json", "health.xidThresholds=[]"], "--health-xid-thresholds=", Ok),
    (HEALTH, &["--set", "health.xidThresholds={43:3/0s}"], "--health-xid-thresholds=43:3/0s", Refused),
    (HEALTH, &["--set", "health.xidThresholds={43:3/0h0m}"], "--health-xid-thresholds=43:3/0h0m", Refused),
    (HEALTH, &["--set", "health.xidThresholds={43:1/1m}"], "--health-xid-thresholds=43:1/1m", Refused),
    (HEALTH, &["--set", "health.xidThresholds={43:1001/1m}"], "--health-xid-thresholds=43:1001/1m", Refused),
    (HEALTH, &["--set", "health.xidThresholds={x:3/1m}"], "--health-xid-thresholds=x:3/1m", Refused),
    (HEALTH, &["--set", "health.xidThresholds={43:3}"], "--health-xid-thresholds=43:3", Refused),
    (HEALTH, &["--set", "health.xidThresholds={43:3/1}"], "--health-xid-thresholds=43:3/1", Refused),
    (
        HEALTH,
        &["--set", "health.xidThresholds={4:3/1m,04:4/1h}"],
        "--health-xid-thresholds=4:3/1m,04:4/1h",
        Refused,
    ),
    (FATAL_13, &["--set", "health.xidThresholds={43:3/1m}"], "--health-xid-thresholds=43:3/1m", Ok),
    (FATAL_13, &["--set", "health.xidThresholds={13:3/1m}"], "--health-xid-thresholds=13:3/1m", Refused),
    (IGNORE_43, &["--set", "health.xidThresholds={43:3/1m}"], "--health-xid-thresholds=43:3/1m", Refused),
    (
        HEALTH,
        &["--set", "health.conditionType=AcceleratedHardwareReady"],
        "--health-condition-type=AcceleratedHardwareReady",
        Ok,
    ),
    (
        HEALTH,
        &["--set", "health.conditionType=example.com/GPUHealthy"],
        "--health-condition-type=example.com/GPUHealthy",
        Ok,
    ),
    (HEALTH, &["--set", "health.conditionType=Ready"], "--health-condition-type=Ready", Refused),
    (
        NODE_HEALTH,
        &["--set", "health.conditionType=DiskPressure"],
        "--health-condition-type=DiskPressure",
        Refused,
    ),
    (HEALTH, &["--set", "health.conditionType=GPU Healthy"], "--health-condition-type=GPU Healthy", Refused),
    (HEALTH, &["--set", "health.conditionType=-GPU"], "--health-condition-type=-GPU", Refused),
    (HEALTH, &["--set", "health.conditionType="], "--health-condition-type=", Refused),
    (
        HEALTH,
        &["--set", "health.conditionType=Example_Corp/GPUHealthy"],
        "--health-condition-type=Example_Corp/GPUHealthy",
        ChartOnly("the API server takes only a DNS subdomain before the /; nvlabel checks the name after it"),
    ),
    (HEALTH_DRA, &["--set", "health.taintEffect=NoExecute"], "--health-taint-effect=NoExecute", Ok),
    (HEALTH_DRA, &["--set", "health.taintEffect=None"], "--health-taint-effect=None", Ok),
    (HEALTH_DRA, &["--set", "health.taintEffect=noexecute"], "--health-taint-effect=noexecute", Refused),
    (HEALTH, &["--set", "health.taintEffect=NoExecute"], "--health-taint-effect=NoExecute", Refused),
    (HEALTH, &["--set", "health.bootIdFile=/host/proc/boot_id"], "--boot-id-file=/host/proc/boot_id", Ok),
    (
        HEALTH,
        &["--set", "health.bootIdFile=proc/boot_id"],
        "--boot-id-file=proc/boot_id",
        ChartOnly(RELATIVE),
    ),
    (
        NODEFEATURE,
        &["--set", "cudaLibrary=/usr/lib/aarch64-linux-gnu/tegra/libcuda.so.1"],
        "--cuda-library=/usr/lib/aarch64-linux-gnu/tegra/libcuda.so.1",
        Ok,
    ),
    (NODEFEATURE, &["--set", "cudaLibrary=libcuda.so"], "--cuda-library=libcuda.so", Ok),
    (
        NODEFEATURE,
        &["--set", "cudaLibrary=lib/libcuda.so.1"],
        "--cuda-library=lib/libcuda.so.1",
        ChartOnly(RELATIVE),
    ),
    (NODEFEATURE, &["--set", "deviceDiscoveryStrategy=tegra"], "--device-discovery-strategy=tegra", Ok),
    (NODEFEATURE, &["--set", "deviceDiscoveryStrategy=Tegra"], "--device-discovery-strategy=Tegra", Refused),
    (HEALTH, &["--set", "deviceDiscoveryStrategy=vfio"], "--device-discovery-strategy=vfio", Refused),
    (NODEFEATURE, &["--set", "allocationMode=auto"], "--allocation-mode=auto", Ok),
    (NODEFEATURE, &["--set", "allocationMode=DRA"], "--allocation-mode=DRA", Refused),
    (FILE, &["--set", "health.enabled=true"], "--health", Refused),
];

/// The config cases: the chart's sample ConfigMap is mounted as --config-dir (config.map's own
/// values: `chart_configs`).
const CONFIG_CASES: &[Case] = &[
    (NODEFEATURE, &["--set", "config.default=time-slicing-4"], "--config-default=time-slicing-4", Ok),
    (NODEFEATURE, &["--set", "config.default=mps-10"], "--config-default=mps-10", Ok),
    (NODEFEATURE, &["--set", "config.default=time-slicing-8"], "--config-default=time-slicing-8", Refused),
    (NODEFEATURE, &["--set", "config.default=a b"], "--config-default=a b", Refused),
];

/// Names and values: the container's env, a ConfigMap's data.
type Pairs = Vec<(String, String)>;

/// The pod's container args and env, and the ConfigMap data it mounts, from a rendering.
pub(crate) fn pod_of(docs: &[Value], label: &str) -> (Vec<String>, Pairs, Pairs) {
    let r = typed(label, docs);
    let (_, ns, pod) = &r.pods[0];
    let c = &pod.containers[0];
    let env = container_env(c, ns).into_iter().collect();
    let data = r.config_maps.first().and_then(|m| m.data.clone()).unwrap_or_default();
    (c.args.clone().unwrap_or_default(), env, data.into_iter().collect())
}

/// The binary's verdict: `Some(stderr)` when it exits 2 (a bad configuration), `None` when it
/// takes the configuration (another exit, or still running after the deadline).
pub(crate) fn binary_refuses(
    args: &[String],
    env: &[(String, String)],
    configs: &[(String, String)],
    dir: &Path,
) -> Option<String> {
    let config_dir = dir.join("configs");
    std::fs::create_dir_all(&config_dir).unwrap();
    for (k, v) in configs {
        std::fs::write(config_dir.join(k), v).unwrap();
    }
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, KUBECONFIG).unwrap();
    let sandboxed = args.iter().map(|a| match a.split_once('=') {
        Some(("--metrics-addr", _)) => "--metrics-addr=127.0.0.1:0".to_string(),
        Some(("--config-dir", _)) => format!("--config-dir={}", config_dir.display()),
        Some(("--output-file", _)) => format!("--output-file={}", dir.join("nvlabel").display()),
        _ => a.clone(),
    });
    let mut child = Command::new(env!("CARGO_BIN_EXE_nvlabel"))
        .args(sandboxed)
        .env_clear()
        .envs(env.iter().cloned())
        .env("KUBECONFIG", &kubeconfig)
        .env("NVLABEL_NVML_LIBRARY", dir.join("no-nvml.so"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    (status.and_then(|s| s.code()) == Some(2)).then_some(stderr)
}

/// A kubeconfig that parses, pointing at a port nothing listens on.
const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}\nusers:\n- name: u\n  user: {token: t}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n";

fn check(helm: &PathBuf, base: &[&str], case: &Case) -> Result<(), String> {
    let (context, values, flag, want) = *case;
    let label = format!("{context:?} {values:?}");
    let dir = tempfile::tempdir().unwrap();
    let all: Vec<&str> = base.iter().chain(context).chain(values).copied().collect();
    let chart = template(helm, "nvlabel", &all);
    let binary = match &chart {
        Result::Ok(docs) => {
            let (args, env, configs) = pod_of(docs, &label);
            binary_refuses(&args, &env, &configs, dir.path())
        }
        Err(_) => {
            let ctx: Vec<&str> = base.iter().chain(context).copied().collect();
            let docs = template(helm, "nvlabel", &ctx)
                .map_err(|e| format!("{label}: the context alone is refused: {e}"))?;
            let (mut args, env, configs) = pod_of(&docs, &label);
            let name = flag.split_once('=').map_or(flag, |(n, _)| n);
            args.retain(|a| a.split_once('=').map_or(a.as_str(), |(n, _)| n) != name);
            args.push(flag.to_string());
            binary_refuses(&args, &env, &configs, dir.path())
        }
    };
    let got = match (&chart, &binary) {
        (Result::Ok(_), None) => Ok,
        (Err(_), Some(_)) => Refused,
        (Err(_), None) => ChartOnly(""),
        (Result::Ok(_), Some(e)) => {
            return Err(format!("{label}: the chart takes it, the binary exits 2: {e}"))
        }
    };
    match (want, got) {
        (ChartOnly(_), ChartOnly(_)) => {}
        (w, g) if w == g => {}
        (w, g) => {
            return Err(format!(
                "{label}: expected {w:?}, got {g:?}: chart {:?}, binary {binary:?}",
                chart.err()
            ))
        }
    }
    // A refusal names the value: the chart's its path, the binary's its flag.
    if let (Err(e), Some(b)) = (&chart, &binary) {
        let path = values[1].split_once('=').unwrap().0;
        let named = e.contains(path) || e.contains(&format!("/{}", path.replace('.', "/")));
        if !named {
            return Err(format!("{label}: the chart's message does not name {path}: {e}"));
        }
        if !b.contains(flag.split_once('=').map_or(flag, |(n, _)| n).trim_start_matches('-')) {
            return Err(format!("{label}: the binary's message does not name {flag}: {b}"));
        }
    }
    Result::Ok(())
}

#[test]
fn the_chart_refuses_exactly_the_values_nvlabel_refuses() {
    let Some(helm) = helm("the_chart_refuses_exactly_the_values_nvlabel_refuses") else { return };
    // In parallel: a binary that takes its configuration runs until the deadline.
    let wrong: Vec<String> = std::thread::scope(|scope| {
        let with_map = CASES.iter().map(|c| (&["--set", "config.map=null"][..], c));
        let runs: Vec<_> = with_map
            .chain(CONFIG_CASES.iter().map(|c| (&[][..], c)))
            .map(|(base, case)| scope.spawn(|| check(&helm, base, case)))
            .collect();
        runs.into_iter().filter_map(|r| r.join().unwrap().err()).collect()
    });
    assert!(
        wrong.is_empty(),
        "{} of {} values:\n{}",
        wrong.len(),
        CASES.len() + CONFIG_CASES.len(),
        wrong.join("\n")
    );
}

/// Flags whose value the chart fixes (a path of its own, a boolean, a port the schema bounds):
/// nothing a user gives reaches them as text.
const FIXED: [&str; 11] = [
    // The release's ServiceAccount: its name, which Kubernetes itself checks.
    "--instance",
    "--metrics-addr",
    "--config-dir",
    "--use-node-feature-api",
    "--output-file",
    "--sink",
    "--oneshot",
    "--health",
    "--no-timestamp",
    "--extended-labels",
    "--fail-on-init-error",
];

#[test]
fn every_flag_the_chart_renders_from_a_value_has_samples() {
    let Some(helm) = helm("every_flag_the_chart_renders_from_a_value_has_samples") else { return };
    let sampled: Vec<&str> = CASES
        .iter()
        .chain(CONFIG_CASES)
        .map(|(_, _, flag, _)| flag.split_once('=').map_or(*flag, |(n, _)| n))
        .collect();
    let every: &[&[&str]] = &[
        &["--set", "mode=nfd-file", "--set", "failOnInitError=false", "--set", "noTimestamp=true"],
        &["--set", "mode=job", "--set", "job.nodeName=gpu-node-1", "--set", "migStrategy=mixed"],
        &["--set", "mode=node", "--set", "health.enabled=true", "--set", "allocationMode=auto"],
        &[
            "--set",
            "health.enabled=true",
            "--set",
            "allocationMode=dra",
            "--set",
            "health.expectedGpus=8",
            "--set",
            "health.nvmlTimeout=10s",
            "--set",
            "health.bootIdFile=/b",
            "--set-json",
            "health.ignoreXids=[1]",
            "--set-json",
            "health.fatalXids=[2]",
            "--set",
            "health.xidThresholds={3:2/1m}",
            "--set",
            "config.default=mps-10",
            "--set",
            "cudaLibrary=libcuda.so",
            "--set",
            "deviceDiscoveryStrategy=tegra",
        ],
    ];
    let (mut unsampled, mut rendered) = (Vec::new(), Vec::new());
    for args in every {
        let docs = template(&helm, "nvlabel", args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        let (flags, _, _) = pod_of(&docs, &format!("{args:?}"));
        for flag in flags {
            let name = flag.split_once('=').map_or(flag.as_str(), |(n, _)| n).to_string();
            rendered.push(name.clone());
            if !sampled.contains(&name.as_str())
                && !FIXED.contains(&name.as_str())
                && !unsampled.contains(&name)
            {
                unsampled.push(name);
            }
        }
    }
    assert!(
        unsampled.is_empty(),
        "flags the chart renders from a value, without samples in CASES: {unsampled:?}"
    );
    // And the converse: a refusal of a flag the chart never renders (a misspelt one) proves nothing.
    let foreign: Vec<&&str> = sampled.iter().filter(|f| !rendered.iter().any(|r| r == *f)).collect();
    assert!(foreign.is_empty(), "flags in CASES the chart never renders: {foreign:?}");
}
