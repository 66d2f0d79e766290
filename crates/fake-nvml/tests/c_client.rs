//! Drives the fake library from C through `dlopen`, so it is checked as any NVML client sees it.

mod common;

use common::{compile, library};
use std::path::PathBuf;
use std::process::Command;

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn compile_client() -> PathBuf {
    static CLIENT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    CLIENT.get_or_init(|| compile("client")).clone()
}

fn run_client(env: &[(&str, String)]) -> (String, String) {
    run(&compile_client(), env)
}

fn run(client: &std::path::Path, env: &[(&str, String)]) -> (String, String) {
    let mut cmd = Command::new(client);
    cmd.arg(library()).env_remove("FAKE_NVML_FIXTURE").env_remove("FAKE_NVML_CALLS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn c_client_sees_nvml_semantics() {
    let calls = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("c-client-calls.txt");
    let (stdout, _) = run_client(&[
        ("FAKE_NVML_FIXTURE", fixture("c-client.yaml")),
        ("FAKE_NVML_CALLS", calls.display().to_string()),
    ]);
    let expected = "\
before init: Uninitialized
init: 0
driver: 0 550.54.15
driver in 4 bytes: Insufficient Size
count: 2
gpu 0: NVIDIA A100-SXM4-40GB, 40960 MiB, compute 8.0 (ret 0)
  memory v2 without version: Argument version mismatch
  memory v2: 0 40960 MiB
  mig mode: Success 1 1
  max mig: 7
  mig 0: NVIDIA A100-SXM4-40GB MIG 3g.20gb gi 1 profile 2, 19968 MiB, 42 SMs, 3/3 slices, parent ok 1
  mig 1: NVIDIA A100-SXM4-40GB MIG 1g.5gb gi 2 profile 0, 4864 MiB, 14 SMs, 1/1 slices, parent ok 1
  mig 2: Not Found
  mig 3: Not Found
  mig 4: Not Found
  mig 5: Not Found
  mig 6: Not Found
  mig 7: Invalid Argument
  fabric: state 3 status 0 clique 1 uuid 7b96..31
  fabric v2: clique 1
gpu 1: Tesla T4, 15360 MiB, compute -1.-1 (ret 15)
  memory v2 without version: Argument version mismatch
  memory v2: 0 15360 MiB
  mig mode: Not Supported 9 9
  fabric: Not Supported
bogus handle: Invalid Argument
shutdown: 0, again: Uninitialized
";
    assert_eq!(stdout, expected);
    let counts = std::fs::read_to_string(&calls).unwrap();
    assert!(counts.lines().any(|l| l == "nvmlDeviceGetCount_v2 2"), "{counts}");
    assert!(counts.lines().any(|l| l == "nvmlShutdown 2"), "{counts}");
    let mut sorted: Vec<&str> = counts.lines().collect();
    sorted.sort();
    assert_eq!(sorted, counts.lines().collect::<Vec<_>>(), "call counts are sorted by symbol");
}

#[test]
fn without_a_fixture_the_driver_is_not_loaded() {
    let (stdout, _) = run_client(&[]);
    assert!(stdout.contains("init: 9\n"), "{stdout}");
}

#[test]
fn an_invalid_fixture_fails_init_with_unknown_and_says_why() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let bad = dir.join("typo-fixture.yaml");
    std::fs::write(
        &bad,
        "driver_version: \"550.54.15\"\ncuda_driver_version: 12040\ngpus:\n  - name: x\n    memory_mb: 1\n",
    )
    .unwrap();
    let (stdout, stderr) = run_client(&[("FAKE_NVML_FIXTURE", bad.display().to_string())]);
    assert!(stdout.contains("init: 999\n"), "{stdout}");
    assert!(stderr.contains("memory_mb"), "the reason names the unknown key: {stderr}");
    assert!(stderr.contains("typo-fixture.yaml"), "the reason names the file: {stderr}");
}

#[test]
fn c_client_sees_topology_with_nvml_semantics() {
    let (stdout, stderr) = run(&compile("topology"), &[("FAKE_NVML_FIXTURE", fixture("c-topology.yaml"))]);
    let expected = "\
before init: Uninitialized
init: 0
gpu 0:
  pcie max: Success gen 4, Success x16
  pcie now: Success gen 1, Success x8
  numa: Success 1
  link 0: active 1, version Success 4, remote Success 0, pci Success 00000000:0F:00.0 0f:00 id 20b010de
  link 1: active 0, version Success 4, remote Success 2, pci Not Supported  00:00 id 00000000
  link 2: active 0, version Success 4, remote Success 2, pci Not Supported  00:00 id 00000000
  link 3: Not Supported
gpu 1:
  pcie max: Success gen 4, Success x16
  pcie now: Success gen 4, Success x16
  numa: Not Supported 0
  link 0: Not Supported
gpu 2:
  pcie max: Not Supported gen 0, Not Supported x0
  pcie now: Not Supported gen 0, Not Supported x0
  numa: Not Supported 0
  link 0: Not Supported
link 18: Invalid Argument
cc caps: Success cpu 3 gpus 1
cc state: Success env 2 feature 0 devtools 0
cc settings without version: Argument version mismatch
cc settings: Success env 2 feature 0 multi-gpu 0
cc ready: Success 1
shutdown: 0
";
    assert_eq!(stdout, expected, "{stderr}");
}
