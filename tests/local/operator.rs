//! The GPU Operator drop-in: the pod the Operator builds for GFD (`testdata/gpu-operator/`), with
//! only the image swapped for nvlabel's. Its command and env go through nvlabel's own resolver,
//! the binary runs under the pod's argv[0] and env, and the config-manager's rewrite + SIGHUP is
//! replayed. The RBAC the Operator grants must cover every call nvlabel makes in that pod.

use crate::common;

use common::manifests::yaml_docs;
use common::*;
use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use nvlabel::config::{Cli, Settings};
use nvlabel::labels::MigStrategy;
use nvlabel::publish::Target;
use std::collections::{BTreeSet, HashMap};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const NODE: &str = "gpu-node-7";

fn operator_file(name: &str) -> std::path::PathBuf {
    repo().join("testdata/gpu-operator").join(name)
}

fn pod() -> Pod {
    let doc = yaml_docs(&operator_file("gfd-pod.yaml")).remove(0);
    serde_json::from_value(doc).unwrap()
}

fn gfd_container(pod: &Pod) -> Container {
    let spec = pod.spec.as_ref().unwrap();
    spec.containers.iter().find(|c| c.name == "gpu-feature-discovery").unwrap().clone()
}

/// The container's env as the kubelet would set it on `NODE`.
fn env_of(pod: &Pod, c: &Container) -> HashMap<String, String> {
    c.env
        .iter()
        .flatten()
        .map(|e| {
            let value = match (&e.value, &e.value_from) {
                (Some(v), _) => v.clone(),
                (None, Some(from)) => match from.field_ref.as_ref().unwrap().field_path.as_str() {
                    "spec.nodeName" => NODE.into(),
                    "metadata.name" => pod.metadata.name.clone().unwrap(),
                    "metadata.namespace" => pod.metadata.namespace.clone().unwrap(),
                    other => panic!("unexpected fieldRef {other}"),
                },
                _ => String::new(),
            };
            (e.name.clone(), value)
        })
        .collect()
}

/// What nvlabel makes of the Operator's container: its command (argv[0] and args) and env.
fn resolve(env: &HashMap<String, String>, c: &Container) -> Settings {
    let argv: Vec<String> =
        c.command.clone().unwrap().into_iter().chain(c.args.clone().unwrap_or_default()).collect();
    assert_eq!(argv, ["gpu-feature-discovery"], "the Operator runs GFD's name with no args");
    let (command, cli) = Cli::try_from_args(&argv).unwrap().split();
    assert!(command.is_none(), "it labels the node");
    for name in env.keys() {
        assert!(
            nvlabel::config::flags::env_vars().any(|v| v == name) || name.starts_with("NVIDIA_"),
            "nvlabel does not read the Operator's env {name}"
        );
    }
    Settings::resolve(&cli, &|k| env.get(k).cloned()).unwrap()
}

#[test]
fn the_operators_env_resolves_as_gfd_reads_it_in_both_modes() {
    let pod = pod();
    let c = gfd_container(&pod);
    let sc = c.security_context.clone().unwrap();
    assert_eq!((sc.privileged, sc.run_as_user), (Some(true), None), "privileged, the image's user");

    // Outside OpenShift: the NodeFeature API.
    let env = env_of(&pod, &c);
    let s = resolve(&env, &c);
    assert_eq!(s.mig_strategy, MigStrategy::Mixed, "MIG_STRATEGY");
    assert_eq!(s.sleep_interval, nvlabel::duration::Interval::Every(Duration::from_secs(60)));
    assert!(s.fail_on_init_error);
    assert_eq!(s.config_file.as_deref(), Some(Path::new("/config/config.yaml")), "CONFIG_FILE");
    assert!(s.config_dir.is_none(), "the sidecar chooses the key, not nvlabel");
    assert!(!s.oneshot);
    assert_eq!(
        s.target().unwrap(),
        Target::NodeFeature {
            namespace: "gpu-operator".into(),
            node: NODE.into(),
            pod: Some("gpu-feature-discovery-x7k2q".into())
        }
    );

    // OpenShift: the feature file in the root-owned host directory, at GFD's path.
    let mut env = env;
    env.insert("USE_NODE_FEATURE_API".into(), "false".into());
    let s = resolve(&env, &c);
    assert_eq!(
        s.target().unwrap(),
        Target::File(nvlabel::config::settings::DEFAULT_OUTPUT_FILE.into(), None),
        "GFD's feature file, inside the output-dir mount"
    );
    let mount = c.volume_mounts.iter().flatten().find(|m| m.name == "output-dir").unwrap();
    assert!(nvlabel::config::settings::DEFAULT_OUTPUT_FILE.starts_with(&format!("{}/", mount.mount_path)));
}

/// (group, resource, verb) triples a Role or ClusterRole grants.
fn grants(rules: &[k8s_openapi::api::rbac::v1::PolicyRule]) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for r in rules {
        for g in r.api_groups.iter().flatten() {
            for res in r.resources.iter().flatten() {
                for v in &r.verbs {
                    out.insert((g.clone(), res.clone(), v.clone()));
                }
            }
        }
    }
    out
}

#[test]
fn the_operators_rbac_covers_every_call_nvlabel_makes_there() {
    let docs = yaml_docs(&operator_file("rbac.yaml"));
    let mut cluster = BTreeSet::new();
    let mut namespaced = BTreeSet::new();
    for d in docs {
        match d["kind"].as_str().unwrap() {
            "ClusterRole" => {
                cluster.extend(grants(&serde_json::from_value::<ClusterRole>(d).unwrap().rules.unwrap()))
            }
            "Role" => namespaced.extend(grants(&serde_json::from_value::<Role>(d).unwrap().rules.unwrap())),
            _ => {}
        }
    }
    let triple =
        |c: &nvlabel::publish::ApiCall| (c.group.to_string(), c.resource.to_string(), c.verb.to_string());
    // The NodeFeature writer works in the Operator's namespace.
    let pod = pod();
    let s = resolve(&env_of(&pod, &gfd_container(&pod)), &gfd_container(&pod));
    // `delete` is only granted for changing an object's owner (OwnerReferencesPermissionEnforcement);
    // in the Operator's pod the owner is the Operator's GFD DaemonSet, which owned the object
    // already, so it never changes and nothing is deleted.
    for call in s.target().unwrap().api_calls(true).iter().filter(|c| c.verb != "delete") {
        assert!(namespaced.contains(&triple(call)), "the Operator's Role lacks {call:?}");
    }
    // The node watch (only with --config-dir, never in the Operator's pod) would fit too.
    for call in nvlabel::kubeapi::node_view::API_CALLS {
        assert!(cluster.contains(&triple(call)), "the Operator's ClusterRole lacks {call:?}");
    }
    // Not granted there, so never needed by a drop-in: node patch, NodeFeature delete.
    assert!(!cluster.contains(&("".into(), "nodes".into(), "patch".into())));
    assert!(!namespaced.contains(&("nfd.k8s-sigs.io".into(), "nodefeatures".into(), "delete".into())));
}

#[test]
fn the_image_runs_as_root_by_default_for_the_operators_pod() {
    // The Operator sets no runAsUser: the image's USER decides, and only UID 0 can write the
    // root-owned features.d or read the PCI config space for the vGPU labels.
    let dockerfile = std::fs::read_to_string(repo().join("Dockerfile")).unwrap();
    let last_stage = dockerfile.rsplit("\nFROM ").next().unwrap();
    let users: Vec<&str> = last_stage.lines().filter_map(|l| l.strip_prefix("USER ")).collect();
    assert_eq!(users, ["0:0"], "the final stage's user");
    assert!(!last_stage.lines().next().unwrap().contains(":nonroot"), "a base whose default user is root");
    assert!(dockerfile.contains("ln -s nvlabel /out/gpu-feature-discovery"), "GFD's command name on PATH");
}

/// The process ids whose argv[0] is exactly `name`, found the way the config-manager finds them.
fn pids_named(name: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).next() == Some(name.as_bytes()))
        })
        .collect()
}

#[test]
fn the_binary_runs_as_gpu_feature_discovery_and_takes_the_config_managers_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let pod = pod();
    let c = gfd_container(&pod);
    let mut env = env_of(&pod, &c);
    // The two paths of the pod that a test cannot use as they are: the feature file goes to a
    // temporary directory instead of the host's features.d, and CONFIG_FILE to a file there.
    env.insert("USE_NODE_FEATURE_API".into(), "false".into());
    let out = dir.path().join("gfd");
    env.insert("GFD_OUTPUT_FILE".into(), out.display().to_string());
    let config = dir.path().join("config.yaml");
    env.insert("CONFIG_FILE".into(), config.display().to_string());
    // config-manager-init wrote the node's key before the labeler started.
    std::fs::write(&config, "version: v1\n").unwrap();

    let mut child = Command::new(env!("CARGO_BIN_EXE_nvlabel"))
        .arg0(c.command.as_ref().unwrap()[0].as_str())
        .env_clear()
        .envs(&env)
        .env("NVLABEL_NVML_LIBRARY", fake_nvml())
        .env("NVLABEL_SYSFS_ROOT", repo().join("testdata/sysfs"))
        .env("NVLABEL_METRICS_ADDR", "127.0.0.1:0")
        .env("FAKE_NVML_FIXTURE", fixture("a100-mig-mixed"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let first = wait_for_line(&out, "nvidia.com/mig-1g.5gb.replicas=1");
    assert!(first.contains("nvidia.com/mig.strategy=mixed\n"), "MIG_STRATEGY=mixed: {first}");
    assert!(pids_named("gpu-feature-discovery").contains(&child.id()), "the sidecar finds it by argv[0]");

    // The sidecar copies another key over the file, then signals.
    std::fs::write(
        &config,
        "version: v1\nsharing:\n  timeSlicing:\n    resources:\n      - name: nvidia.com/mig-1g.5gb\n        replicas: 4\n",
    )
    .unwrap();
    signal(&child, "-HUP");
    let after = wait_for_line(&out, "nvidia.com/mig-1g.5gb.replicas=4");
    assert!(after.contains("nvidia.com/mig-1g.5gb.sharing-strategy=time-slicing\n"), "{after}");
    signal(&child, "-TERM");
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert!(out.exists(), "labels stay");
}
