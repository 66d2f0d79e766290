//! The chart refuses every sharing config (a value of `config.map`, a device-plugin config file)
//! that nvlabel refuses, naming the key, the field and the value, so no `helm install` or
//! `helm upgrade` puts in a config on which new pods exit 2 while old ones keep the last good one.
//! Each sample is given as `config.map.sample` beside the chart's own samples and rendered with
//! Helm; the built binary is run on the rendered container args, with the rendered ConfigMap
//! written to its --config-dir (where the chart refuses: the context's, plus the sample) and
//! `--config-default=sample`, as on a node whose label selects the sample (nvlabel reads only the
//! key it selects). Both must take it or both refuse it, with the words given; the few the chart
//! alone refuses say why. Skipped without Helm (`NVLABEL_HELM`), as in `chart_refusals`.

use crate::chart_refusals::{binary_refuses, pod_of, Want};
use crate::common;

use common::helm::{helm, template};
use Want::*;

/// The context's values, the sample, what is expected, and what both messages say ("": only
/// the chart's message is checked, for the key: the two YAML parsers word syntax errors apart).
type Case = (&'static [&'static str], &'static str, Want, &'static str);

const PLAIN: &[&str] = &[];
const MIXED: &[&str] = &["--set", "migStrategy=mixed"];
const DEFAULT: &[&str] = &["--set", "config.default=sample"];
const FATAL_13: &[&str] = &["--set", "health.enabled=true", "--set-json", "health.fatalXids=[13]"];
const IGNORE_43: &[&str] = &["--set", "health.enabled=true", "--set-json", "health.ignoreXids=[43]"];
const IGNORED: &str = "nvlabel ignores an unknown key outside sharing with a warning; the device plugin's config has no other key there, so the chart refuses the misspelling";
const BLANK: &str = "nvlabel takes a comment-only file for defaults at start-up but refuses it on reload (a file being written), so running pods would keep the old config";
const TS: &str = "version: v1\nsharing:\n  timeSlicing:\n";
/// The sample where the chart refuses it, to render the context's pod and ConfigMap.
const GOOD: &str = "config.map.sample=\"version: v1\\n\"";

const CASES: &[Case] = &[
    // Configs both take: no sharing, time-slicing, MPS, and the forms the device plugin reads.
    (PLAIN, "version: v1\n", Ok, ""),
    (PLAIN, "---\nversion: v1\n...\n", Ok, ""),
    (PLAIN, "version: v1\nsharing:\n  mps:\n", Ok, ""),
    (
        PLAIN,
        "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n    failRequestsGreaterThanOne: \"yes\"\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n    - name: mig-1g.5gb\n      replicas: 2\n      devices: all\n",
        Ok,
        "",
    ),
    (
        PLAIN,
        "version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 10\n      devices: [0, \"1\", \"GPU-8a1b2c3d-0000-4000-8000-123456789abc\"]\n      rename: gpu-mps\n",
        Ok,
        "",
    ),
    (PLAIN, "{version: v1, sharing: {timeSlicing: {resources: [{name: gpu, replicas: 0x10}]}}}", Ok, ""),
    (PLAIN, "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - {name: gpu, replicas: +3}\n    - {name: gpu, replicas: 2}\n", Ok, ""),
    (
        PLAIN,
        "version: v1\nflags:\n  migStrategy: mixed\n  failOnInitError: \"yes\"\n  plugin:\n    passDeviceSpecs: true\n    note: |\n      a: 1\n      a: 2\n  gfd:\n    sleepInterval: 30s\n    oneshot: false\n  healthIgnoreXids: [13]\n  healthXidThresholds: [\"43:3/1m\"]\nresources:\n  gpus:\n  - pattern: \"*\"\n    name: gpu\n",
        Ok,
        "",
    ),
    // The chart's own flags win over the file's: a value they override is never read.
    (MIXED, "version: v1\nflags:\n  migStrategy: bogus\n", Ok, ""),
    (IGNORE_43, "version: v1\nflags:\n  healthIgnoreXids: \"13,x\"\n", Ok, ""),
    // Replicas.
    (PLAIN, "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 0\n", Refused, "sharing.timeSlicing.resources[0].replicas: number of replicas must be >= 2, got 0"),
    (DEFAULT, "version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 1\n", Refused, "sharing.mps.resources[0].replicas: number of replicas must be >= 2, got 1"),
    (PLAIN, "sharing: {timeSlicing: {resources: [{name: gpu, replicas: -1}]}}", Refused, "must be >= 2, got -1"),
    (PLAIN, "sharing: {timeSlicing: {resources: [{name: gpu, replicas: two}]}}", Refused, "sharing.timeSlicing.resources[0].replicas: expected a whole number, got \"two\""),
    (PLAIN, "sharing: {timeSlicing: {resources: [{name: gpu, replicas: \"4\"}]}}", Refused, "replicas: expected a whole number, got \"4\""),
    (PLAIN, "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2.5}]}}", Refused, "replicas: expected a whole number, got 2.5"),
    (PLAIN, "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2.0}]}}", Refused, "replicas: expected a whole number, got 2.0"),
    (PLAIN, "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 1e3}]}}", Refused, "replicas: expected a whole number"),
    (PLAIN, "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 4294967296}]}}", Refused, "replicas: 4294967296 is too large"),
    (PLAIN, "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 010}]}}", Refused, "replicas: expected a whole number"),
    (PLAIN, "sharing:\n  mps:\n    resources:\n    - name: gpu\n      replicas: !!float 3\n", Refused, "replicas: expected a whole number"),
    (PLAIN, "sharing: {timeSlicing: {resources: [{name: gpu}]}}", Refused, "sharing.timeSlicing.resources[0]: no replicas specified"),
    (PLAIN, "sharing: {timeSlicing: {resources: [{name: gpu, replica: 2}]}}", Refused, "sharing.timeSlicing.resources[0].replica"),
    // The blocks and their lists.
    (PLAIN, "sharing: []", Refused, "sharing: expected a mapping"),
    (PLAIN, TS, Refused, "sharing.timeSlicing: no resources specified"),
    (PLAIN, "sharing: {mps: {resources: []}}", Refused, "sharing.mps: no resources specified"),
    (PLAIN, "sharing: {mps: {resources: {}}}", Refused, "sharing.mps.resources: expected a list"),
    (PLAIN, "sharing: {mps: {resources: [5]}}", Refused, "sharing.mps.resources[0]: expected a mapping"),
    (PLAIN, "sharing: {mps: 5}", Refused, "sharing.mps: expected a mapping"),
    (PLAIN, "sharing: {timeSlicing: {renameByDefault: 1, resources: [{name: gpu, replicas: 2}]}}", Refused, "sharing.timeSlicing.renameByDefault: expected a boolean, got 1"),
    (PLAIN, "sharing: {mps: {failRequestsGreaterThanOne: sometimes, resources: [{name: gpu, replicas: 2}]}}", Refused, "sharing.mps.failRequestsGreaterThanOne: expected a boolean, got \"sometimes\""),
    // Resource names, renames and devices.
    (PLAIN, "sharing: {timeSlicing: {resources: [{name: 5, replicas: 2}]}}", Refused, "resources[0].name: expected a string, got 5"),
    (PLAIN, "sharing: {timeSlicing: {resources: [{name: \"\", replicas: 2}]}}", Refused, "resources[0].name: no resource name specified"),
    (PLAIN, "sharing: {timeSlicing: {resources: [{replicas: 2}]}}", Refused, "resources[0]: no resource name specified"),
    (PLAIN, "sharing: {timeSlicing: {resources: [{name: Nvidia.com/GPU, replicas: 2}]}}", Refused, "incorrect format for resource name 'nvidia.com/Nvidia.com/GPU'"),
    (PLAIN, "sharing: {timeSlicing: {resources: [{name: example.com/gpu, replicas: 2}]}}", Refused, "incorrect format for resource name 'nvidia.com/example.com/gpu'"),
    (PLAIN, "sharing: {timeSlicing: {resources: [{name: mig-1g.5gb-a-name-far-longer-than-a-resource-may-be-12345, replicas: 2}]}}", Refused, "fully-qualified resource name must be 63 characters or less"),
    (PLAIN, "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2, rename: Foo}]}}", Refused, "resources[0].rename: incorrect format for resource name 'nvidia.com/Foo'"),
    (PLAIN, "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2, rename: [a]}]}}", Refused, "resources[0].rename: expected a string"),
    (PLAIN, "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2, devices: \"0\"}]}}", Refused, "devices set as '0' but the only valid string input is 'all'"),
    (PLAIN, "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2, devices: 0}]}}", Refused, "devices set as '0' but a count of devices must be > 0"),
    (PLAIN, "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2, devices: [0, GPU-bad]}]}}", Refused, "unsupported type for device in devices list: \"GPU-bad\""),
    (PLAIN, "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2, devices: {a: 1}}]}}", Refused, "unrecognized type for devices spec"),
    (PLAIN, "resources:\n  gpus:\n  - pattern: \"*\"\n", Refused, "resources.gpus[0]: resources must have a 'name' field set"),
    (PLAIN, "resources:\n  mig: {}\n", Refused, "resources.mig: expected a list"),
    // The file as a whole: YAML, one document, one mapping, v1.
    (PLAIN, "version: v1\nsharing:\n  timeSlicing: [\n", Refused, ""),
    (PLAIN, "version: v1\n  sharing: x\n", Refused, ""),
    (PLAIN, "sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 2\n      replicas: 3\n", Refused, "duplicate mapping key `replicas` is not allowed here"),
    (PLAIN, "{version: v1, sharing: {mps: {resources: [{name: gpu, name: gpu, replicas: 2}]}}}", Refused, "duplicate mapping key `name`"),
    (PLAIN, "sharing:\n  mps:\n    resources:\n    - name: gpu\n      replicas: 3\n      ? replicas\n      : 4\n", Refused, "duplicate mapping key `replicas`"),
    (PLAIN, "version: v1\n---\nversion: v1\n", Refused, "only single YAML document expected but multiple found"),
    (PLAIN, "- version: v1\n", Refused, "(top level): expected a mapping"),
    (PLAIN, "null\n", Refused, "(top level): expected a mapping"),
    (PLAIN, "version: v1\nsharing: \u{1}\n", Refused, "not a text file"),
    (PLAIN, "version: v2\n", Refused, "version: unknown version: v2"),
    (PLAIN, "version: 1\n", Refused, "version: unknown version: 1"),
    // flags: their types, their values, and their checks across flags.
    (PLAIN, "flags: {migStrategy: bogus}", Refused, "use none, single or mixed"),
    (PLAIN, "flags: {migStrategy: [1]}", Refused, "flags.migStrategy: expected a string, got [1]"),
    (PLAIN, "flags: {failOnInitError: maybe}", Refused, "flags.failOnInitError: expected a boolean, got \"maybe\""),
    (PLAIN, "flags: {gfd: {sleepInterval: fast}}", Refused, "flags.gfd.sleepInterval: invalid duration \"fast\""),
    (PLAIN, "flags: {gfd: {sleepInterval: -1}}", Refused, "flags.gfd.sleepInterval: invalid duration -1"),
    (PLAIN, "flags: {gfd: 5}", Refused, "flags.gfd"),
    (PLAIN, "flags: {healthNvmlTimeout: 1ms}", Refused, "use a duration of at least 1s, such as 30s or 2m"),
    (PLAIN, "flags: {healthRecoveryHold: 2x}", Refused, "use a duration such as 2m, 30s or 0s"),
    (PLAIN, "flags: {healthIgnoreXids: [-1]}", Refused, "flags.healthIgnoreXids: item 0 of the list is -1, not an Xid number"),
    (PLAIN, "flags: {healthFatalXids: \"13,x\"}", Refused, "\"x\" is not an Xid number"),
    (PLAIN, "flags: {healthXidThresholds: [5]}", Refused, "flags.healthXidThresholds: item 0 of the list is 5, not text"),
    (PLAIN, "flags: {healthXidThresholds: [\"43:1/1m\"]}", Refused, "the count \"1\" in \"43:1/1m\" is not a whole number from 2 to 1000"),
    (PLAIN, "flags: {healthXidThresholds: \"43:3/0s\"}", Refused, "the window \"0s\" in \"43:3/0s\" is not a positive duration"),
    (PLAIN, "flags: {healthXidThresholds: \"43:3/1m,43:4/1h\"}", Refused, "Xid 43 has two thresholds"),
    (PLAIN, "flags: {healthConditionType: Ready}", Refused, "the kubelet owns this condition"),
    (PLAIN, "flags: {healthConditionType: GPU Healthy}", Refused, "a condition type is a name such as GPUHealthy"),
    (PLAIN, "flags: {healthExpectedGpus: 0}", Refused, "use a whole number of GPUs from 1"),
    (PLAIN, "flags: {healthTaintEffect: noexecute}", Refused, "use NoSchedule, NoExecute or None"),
    (PLAIN, "flags: {allocationMode: \"\"}", Refused, "use device-plugin, dra or auto"),
    (PLAIN, "flags: {deviceDiscoveryStrategy: Tegra}", Refused, "use auto, nvml, tegra or vfio"),
    (PLAIN, "flags: {gfd: {oneshot: true}}", Refused, "--metrics-addr has no effect with --oneshot"),
    (MIXED, "flags: {allocationMode: dra}", Refused, "has no effect with --allocation-mode dra"),
    (PLAIN, "flags: {health: true, deviceDiscoveryStrategy: vfio}", Refused, "GPUs bound to vfio-pci have none on this node"),
    (PLAIN, "flags: {healthIgnoreXids: [13], healthFatalXids: \"13\"}", Refused, "an Xid cannot be both ignored and fatal"),
    (FATAL_13, "flags: {healthXidThresholds: [\"13:3/1m\"]}", Refused, "an Xid with a threshold cannot be fatal"),
    // Unknown keys and resources: refused in sharing (issue 50: a misspelling would unshare the
    // node on a reload); flags' are nvlabel's warning, as the device plugin adds flags.
    (PLAIN, "version: v1\nsharing:\n  timeslicing:\n    resources:\n    - name: gpu\n      replicas: 2\n", Refused, "sharing.timeslicing: unknown field, refused: a misspelt sharing key would unshare the node (known here: timeSlicing, mps)"),
    (PLAIN, "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2, replica: 2}]}}", Refused, "resources[0].replica: unknown field, refused"),
    (PLAIN, "sharing: {mps: {resources: [{name: gpu, replicas: 2}], renameByDefualt: true}}", Refused, "sharing.mps.renameByDefualt: unknown field, refused"),
    (PLAIN, "version: v1\nsharring: {}\n", Refused, "sharring: unknown field, refused"),
    (PLAIN, "sharing: {mps: {resources: [{name: nvidia.com/gpus, replicas: 2}]}}", Refused, "\"nvidia.com/gpus\" is no resource an NVIDIA GPU has: use nvidia.com/gpu, or nvidia.com/mig-<profile>"),
    (PLAIN, "sharing: {mps: {resources: [{name: mig-big, replicas: 2}]}}", Refused, "\"nvidia.com/mig-big\" is no resource an NVIDIA GPU has"),
    (PLAIN, "version: v1\nflags: {migstrategy: mixed, gfd: {sleepinterval: 1m}}\n", Ok, ""),
    (PLAIN, "version: v1\nfoo: 1\n", ChartOnly(IGNORED), "foo: unknown field, refused"),
    (PLAIN, "resources: {gpu: []}", ChartOnly(IGNORED), "resources.gpu: unknown field, refused"),
    (PLAIN, "# no sharing\n", ChartOnly(BLANK), "only comments"),
];

/// The binary's verdict on the sample as the key a node selects: `Some(stderr)` when it exits 2.
fn binary(args: &[String], env: &[(String, String)], configs: &[(String, String)]) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let mut args: Vec<String> =
        args.iter().filter(|a| !a.starts_with("--config-default=")).cloned().collect();
    args.push("--config-default=sample".into());
    binary_refuses(&args, env, configs, dir.path())
}

/// A rendering's container args and env and the ConfigMap data it mounts.
type Pod = (Vec<String>, Vec<(String, String)>, Vec<(String, String)>);

/// The context's pod, with a good sample: what the binary runs on where the chart refuses.
fn context_pod(helm: &std::path::PathBuf, context: &[&str]) -> Result<Pod, String> {
    let good: Vec<&str> = context.iter().copied().chain(["--set-json", GOOD]).collect();
    let docs = template(helm, "nvlabel", &good)
        .map_err(|e| format!("{context:?}: the context alone is refused: {e}"))?;
    Result::Ok(pod_of(&docs, &format!("{context:?}")))
}

fn check(helm: &std::path::PathBuf, pod: &Result<Pod, String>, case: &Case) -> Result<(), String> {
    let (context, sample, want, says) = *case;
    let label = format!("{context:?} {sample:?}");
    let set = format!("config.map.sample={}", serde_json::to_string(sample).unwrap());
    let all: Vec<&str> = context.iter().copied().chain(["--set-json", &set]).collect();
    let chart = template(helm, "nvlabel", &all);
    let verdict = match &chart {
        Result::Ok(docs) => {
            let (args, env, configs) = pod_of(docs, &label);
            let mounted = configs.iter().find(|(k, _)| k == "sample").map(|(_, v)| v.as_str());
            if mounted != Some(sample) {
                return Err(format!("{label}: the ConfigMap holds {mounted:?}"));
            }
            binary(&args, &env, &configs)
        }
        Err(_) => {
            let (args, env, mut configs) = pod.clone()?;
            configs.retain(|(k, _)| k != "sample");
            configs.push(("sample".into(), sample.into()));
            binary(&args, &env, &configs)
        }
    };
    let got = match (&chart, &verdict) {
        (Result::Ok(_), None) => Ok,
        (Err(_), Some(_)) => Refused,
        (Err(_), None) => ChartOnly(""),
        (Result::Ok(_), Some(e)) => {
            return Err(format!("{label}: the chart takes it, the binary exits 2: {e}"))
        }
    };
    if !matches!((want, got), (ChartOnly(_), ChartOnly(_))) && want != got {
        return Err(format!(
            "{label}: expected {want:?}, got {got:?}: chart {:?}, binary {verdict:?}",
            chart.err()
        ));
    }
    if let Err(e) = &chart {
        if !e.contains("config.map.sample") || !e.contains(says) {
            return Err(format!(
                "{label}: the chart's message should name config.map.sample and say {says:?}: {e}"
            ));
        }
    }
    match &verdict {
        Some(b) if !b.contains(says) => {
            Err(format!("{label}: the binary's message should say {says:?}: {b}"))
        }
        _ => Result::Ok(()),
    }
}

#[test]
fn the_chart_refuses_exactly_the_sharing_configs_nvlabel_refuses() {
    let Some(helm) = helm("the_chart_refuses_exactly_the_sharing_configs_nvlabel_refuses") else { return };
    // Each context rendered once; then the cases in parallel, a few at a time: each is one run of
    // Helm and one of the binary.
    let mut contexts: Vec<&[&str]> = CASES.iter().map(|c| c.0).collect();
    contexts.dedup();
    contexts.sort();
    contexts.dedup();
    let pods: Vec<Result<Pod, String>> = std::thread::scope(|scope| {
        let runs: Vec<_> = contexts.iter().map(|c| scope.spawn(|| context_pod(&helm, c))).collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    let pod = |context: &[&str]| &pods[contexts.iter().position(|c| *c == context).unwrap()];
    let wrong: Vec<String> = CASES
        .chunks(CASES.len().div_ceil(8))
        .map(|chunk| {
            std::thread::scope(|scope| {
                let runs: Vec<_> = chunk.iter().map(|c| scope.spawn(|| check(&helm, pod(c.0), c))).collect();
                runs.into_iter().filter_map(|r| r.join().unwrap().err()).collect::<Vec<_>>()
            })
        })
        .collect::<Vec<_>>()
        .concat();
    assert!(wrong.is_empty(), "{} of {} sharing configs:\n{}", wrong.len(), CASES.len(), wrong.join("\n"));
}
