//! The fault matrix: every NVML error the probe can meet, injected through the fixture's
//! `faults` into every NVML function the probe calls, for a GPU and for a MIG device. Each case
//! runs the binary and checks: no panic, the exit status docs/migration.md's table gives, the
//! healthy devices still labelled, and the failing function named in the log. That table ("How
//! nvlabel differs from GFD", per NVML function) is this test's `expected` function in prose.

use crate::common;

use common::*;
use std::collections::BTreeMap;

const ERRORS: [&str; 9] = NVML_ERRORS;

/// What a fault does to the labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Effect {
    /// The run fails with exit status 1 (no driver / no device list).
    Fatal,
    /// Nothing visible.
    None,
    /// GPU 1 is left out of this pass.
    GpuExcluded,
    /// GPU 1 is labelled, but its MIG devices are not (unknown MIG state or MIG data).
    GpuMigLost,
    /// GPU 1 is labelled without memory (the model's representative: no `gpu.memory`), its MIG
    /// devices are not.
    MemoryUnknown,
    /// MIG device 0:1 is left out.
    MigSkipped,
    /// `gpu.mode=unknown`.
    ModeUnknown,
    /// No driver-version labels.
    DriverLabelsLost,
    /// No CUDA-version labels.
    CudaLabelsLost,
}

/// Where a function's fault is aimed.
#[derive(Debug, Clone, Copy)]
enum At {
    Node,
    Gpu,
    Mig,
}

const FUNCTIONS: [(&str, At); 26] = [
    ("nvmlInit_v2", At::Node),
    ("nvmlSystemGetDriverVersion", At::Node),
    ("nvmlSystemGetCudaDriverVersion_v2", At::Node),
    ("nvmlDeviceGetCount_v2", At::Node),
    ("nvmlDeviceGetHandleByIndex_v2", At::Gpu),
    ("nvmlDeviceGetName", At::Gpu),
    ("nvmlDeviceGetUUID", At::Gpu),
    ("nvmlDeviceGetPciInfo_v3", At::Gpu),
    ("nvmlDeviceGetMemoryInfo_v2", At::Gpu),
    ("nvmlDeviceGetCudaComputeCapability", At::Gpu),
    ("nvmlDeviceGetMigMode", At::Gpu),
    ("nvmlDeviceGetGpuFabricInfo", At::Gpu),
    ("nvmlDeviceGetMaxMigDeviceCount", At::Gpu),
    ("nvmlDeviceGetMigDeviceHandleByIndex", At::Gpu),
    ("nvmlDeviceGetGpuInstanceById", At::Gpu),
    ("nvmlDeviceGetGpuInstanceProfileInfo", At::Gpu),
    ("nvmlDeviceGetUUID", At::Mig),
    ("nvmlDeviceGetAttributes_v2", At::Mig),
    ("nvmlDeviceGetGpuInstanceId", At::Mig),
    ("nvmlDeviceGetComputeInstanceId", At::Mig),
    ("nvmlGpuInstanceGetInfo", At::Mig),
    ("nvmlGpuInstanceGetComputeInstanceById", At::Mig),
    ("nvmlComputeInstanceGetInfo_v2", At::Mig),
    ("nvmlGpuInstanceGetComputeInstanceProfileInfo", At::Mig),
    // Calls nvml-wrapper makes that the probe does not depend on.
    ("nvmlShutdown", At::Node),
    ("nvmlDeviceIsMigDeviceHandle", At::Gpu),
];

/// The behaviour nvlabel promises for `error` in `function`.
fn expected(function: &str, at: At, error: &str) -> Effect {
    use Effect::*;
    match (function, at) {
        ("nvmlInit_v2" | "nvmlDeviceGetCount_v2", _) => Fatal,
        ("nvmlSystemGetDriverVersion", _) => DriverLabelsLost,
        ("nvmlSystemGetCudaDriverVersion_v2", _) => CudaLabelsLost,
        ("nvmlShutdown" | "nvmlDeviceIsMigDeviceHandle", _) => None,
        ("nvmlDeviceGetUUID", _) => None,
        ("nvmlDeviceGetPciInfo_v3", _) => ModeUnknown,
        // NOT_SUPPORTED is how NVML says "not MIG capable" / "no fabric": not a failure.
        ("nvmlDeviceGetMigMode", _) if error == "not_supported" => GpuMigLost,
        ("nvmlDeviceGetGpuFabricInfo", _) if error == "not_supported" => None,
        // Unified memory (DGX Spark's GB10): the GPU is labelled without memory; its MIG devices
        // cannot be named without the parent's memory.
        ("nvmlDeviceGetMemoryInfo_v2", _) if error == "not_supported" => MemoryUnknown,
        // NOT_FOUND and INVALID_ARGUMENT are how NVML says "empty slot".
        ("nvmlDeviceGetMigDeviceHandleByIndex", _) if matches!(error, "not_found" | "invalid_argument") => {
            GpuMigLost
        }
        ("nvmlDeviceGetGpuInstanceById" | "nvmlDeviceGetGpuInstanceProfileInfo", At::Gpu) => GpuMigLost,
        (_, At::Gpu) => GpuExcluded,
        (_, At::Mig) => MigSkipped,
        (f, At::Node) => panic!("no expectation for {f}"),
    }
}

fn labels(stdout: &str) -> BTreeMap<String, String> {
    stdout
        .lines()
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap();
            (k.trim_start_matches("nvidia.com/").to_string(), v.to_string())
        })
        .collect()
}

/// The labels that show each effect (key => value; `None` means absent).
fn signature(effect: Effect) -> Vec<(&'static str, Option<&'static str>)> {
    use Effect::*;
    let base = vec![
        ("gpu.count", Some("2")),
        ("mig-1g.5gb.count", Some("2")),
        ("mig-2g.10gb.count", Some("1")),
        ("gpu.memory", Some("40960")),
        ("gpu.mode", Some("compute")),
        ("cuda.driver-version.major", Some("550")),
        ("cuda.runtime-version.major", Some("12")),
        ("gpu.product", Some("NVIDIA-A100-SXM4-40GB")),
    ];
    let set = |mut v: Vec<(&'static str, Option<&'static str>)>,
               changes: &[(&'static str, Option<&'static str>)]| {
        for (k, value) in changes {
            v.iter_mut().find(|(key, _)| key == k).unwrap().1 = *value;
        }
        v
    };
    match effect {
        None => base,
        Fatal => vec![],
        GpuExcluded => set(base, &[("gpu.count", Some("1")), ("mig-1g.5gb.count", Some("1"))]),
        GpuMigLost => set(base, &[("mig-1g.5gb.count", Some("1"))]),
        MemoryUnknown => set(base, &[("mig-1g.5gb.count", Some("1")), ("gpu.memory", Option::None)]),
        MigSkipped => set(base, &[("mig-2g.10gb.count", Option::None)]),
        ModeUnknown => set(base, &[("gpu.mode", Some("unknown"))]),
        DriverLabelsLost => set(base, &[("cuda.driver-version.major", Option::None)]),
        CudaLabelsLost => set(base, &[("cuda.runtime-version.major", Option::None)]),
    }
}

#[test]
fn every_error_in_every_function() {
    let dir = tempfile::tempdir().unwrap();
    // GPU 0 with MIG devices 0:0 (1g.5gb) and 0:1 (2g.10gb), GPU 1 with 1:0 (1g.5gb).
    let machine = std::fs::read_to_string(test_machine("a100-x2-mig-fabric")).unwrap();
    let mut failures = Vec::new();
    let mut table: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for (function, at) in FUNCTIONS {
        for error in ERRORS {
            let device = match at {
                At::Node => String::new(),
                At::Gpu => "\n    device: \"1\"".into(),
                At::Mig => "\n    device: \"0:1\"".into(),
            };
            let fixture = dir.path().join(format!("{function}-{error}-{at:?}.yaml"));
            std::fs::write(
                &fixture,
                format!("{machine}faults:\n  - function: {function}{device}\n    error: {error}\n"),
            )
            .unwrap();
            let out = nvlabel(None)
                .env("FAKE_NVML_FIXTURE", &fixture)
                .args(PRINT)
                .args(["--mig-strategy", "mixed"])
                .output()
                .unwrap();
            let (stdout, stderr) =
                (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            let case = format!("{function} ({at:?}) -> {error}");
            let effect = expected(function, at, error);
            table
                .entry((function.to_string(), format!("{at:?}")))
                .or_default()
                .push(format!("{error}: {effect:?}"));
            let code = out.status.code();
            if code == Some(101) || code.is_none() {
                failures.push(format!("{case}: crashed ({:?})\n{stderr}", out.status));
                continue;
            }
            if effect == Effect::Fatal {
                if code != Some(1) || !stderr.contains("nvlabel: error:") {
                    failures.push(format!("{case}: expected exit 1 with an error, got {code:?}\n{stderr}"));
                }
                continue;
            }
            if code != Some(0) {
                failures.push(format!("{case}: expected exit 0, got {code:?}\n{stderr}"));
                continue;
            }
            let got = labels(&stdout);
            for (k, v) in &got {
                let key = format!("nvidia.com/{k}");
                if !common::label_rules::key_ok(&key) || !common::label_rules::value_ok(v) {
                    failures.push(format!("{case}: invalid label {k}={v}"));
                }
            }
            for (k, want) in signature(effect) {
                if got.get(k).map(String::as_str) != want {
                    failures
                        .push(format!("{case}: expected {effect:?}: {k} = {want:?}, got {:?}", got.get(k)));
                }
            }
            let quiet = matches!(effect, Effect::None | Effect::GpuMigLost)
                && (error == "not_supported" || error == "not_found" || error == "invalid_argument")
                || function == "nvmlShutdown"
                || function == "nvmlDeviceIsMigDeviceHandle"
                || function == "nvmlDeviceGetUUID";
            if !quiet && !stderr.contains(function) {
                failures.push(format!("{case}: the log does not name {function}:\n{stderr}"));
            }
            let device_named = match (effect, at) {
                (Effect::GpuExcluded, _) => stderr.contains("device=1"),
                (Effect::MigSkipped, _) => stderr.contains("device=0:1"),
                _ => true,
            };
            if !device_named {
                failures.push(format!("{case}: the log does not name the device:\n{stderr}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        FUNCTIONS.len() * ERRORS.len(),
        failures.join("\n")
    );
}

#[test]
fn a_gpu_whose_nvml_reports_no_memory_keeps_every_label_but_memory() {
    // As on a DGX Spark (GB10, unified memory): both memory calls answer NOT_SUPPORTED.
    let dir = tempfile::tempdir().unwrap();
    let machine = std::fs::read_to_string(repo().join("testdata/machines/t4.yaml")).unwrap();
    let run = |faults: &str| {
        let fixture = dir.path().join("machine.yaml");
        std::fs::write(&fixture, format!("{machine}{faults}")).unwrap();
        let out = nvlabel(None).env("FAKE_NVML_FIXTURE", &fixture).args(PRINT).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        (labels(&String::from_utf8_lossy(&out.stdout)), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (mut all, _) = run("");
    let unsupported = |f: &str| format!("  - function: {f}\n    device: \"0\"\n    error: not_supported\n");
    let faults = format!(
        "faults:\n{}{}",
        unsupported("nvmlDeviceGetMemoryInfo"),
        unsupported("nvmlDeviceGetMemoryInfo_v2")
    );
    let (without, log) = run(&faults);
    assert_eq!(all.remove("gpu.memory").as_deref(), Some("15360"));
    assert_eq!(without, all, "every label but gpu.memory, the GPU counted");
    assert!(log.contains("gpu.memory omitted"), "{log}");
}
