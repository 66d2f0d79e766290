//! The flag table: one row per flag, with its env names, config-file key, default, how its value
//! goes into [`super::settings::Settings`] and where it has no effect. Everything else derives
//! from it: `--help`'s env names, defaults and each subcommand's list ([`super::flags`]), the
//! resolution ([`super::resolve`]), and the refusal of flags without effect ([`super::modes`]).
//! The match is exhaustive, so a [`F`] without a row fails to compile; a clap flag without a
//! [`F`] fails `every_flag_of_every_command_has_one_row`.
//!
//! No effect: a flag given on the command line where its row says it has none is a usage error
//! naming the flag and the mode; the same from its environment variable is one warning, since the
//! GPU Operator sets env for every mode. GFD's flags stay accepted wherever GFD accepts them
//! (their `--help` says so); only nvlabel's own modes refuse them.

use super::arg_groups::DEFAULT_OUTPUT_FILE;
use super::flag::Flag as F;
use super::health_checks::{self as health, TaintEffect};
use super::row::{boolean, choice, duration, non_empty, number, put, Empty, Mode, Row, Run};
use crate::duration::parse_interval;
use crate::labels::{AllocationMode, MigStrategy};
use crate::publish::{Format, Sink, Target};
use std::path::PathBuf;

fn hook_without_dir(r: &Run) -> Option<&'static str> {
    (r.mode == Mode::Hook && r.settings.config_dir.is_none())
        .then_some("in `nvlabel hook` without --config-dir (a hook publishes nothing)")
}

/// A snapshot stands in for NVML and sysfs.
fn from_snapshot(r: &Run) -> Option<&'static str> {
    r.settings.snapshot.is_some().then_some("with --snapshot, which stands in for NVML and sysfs")
}

fn health_daemon(r: &Run) -> bool {
    r.mode == Mode::Daemon && r.settings.health.enabled
}

fn xids_unread(r: &Run) -> Option<&'static str> {
    (r.mode != Mode::Health && !health_daemon(r))
        .then_some("without --health in a daemon or `nvlabel health`")
}

const OUTSIDE_A_LABELLER: &str = "outside a labelling daemon or one-shot run";
const NOT_AN_INSTANCES: &str =
    "outside a daemon with --health, `nvlabel prune` and `nvlabel health clear`: only they write or remove an instance's health";
/// `nvlabel health clear` writes what a person says: it reads no GPU and judges nothing.
const ONLY_CLEARS: &str = "in `nvlabel health clear`, which reads no GPU and only clears what the Node shows";
/// `nvlabel health` reads NVML alone: no CUDA, no Tegra files, no vfio GPUs.
const READS_NVML: &str = "in `nvlabel health`, which reads NVML whatever the platform";
const NO_DEADLINE: &str = "outside a daemon: only a daemon's passes and health readings wait with a deadline";

/// `flag`'s row.
pub fn row(flag: F) -> Row {
    let r = Row::new;
    match flag {
        F::MigStrategy => r(flag, &["GFD_MIG_STRATEGY", "MIG_STRATEGY"])
            .file("migStrategy", |f| f.mig_strategy.clone())
            .default("none")
            .set(|s, f| put(&mut s.mig_strategy, choice(&f.value, MigStrategy::parse, "none, single or mixed")))
            .when(|r| {
                (r.settings.allocation_mode == AllocationMode::Dra)
                    .then_some("with --allocation-mode dra, which gives physical facts only (no MIG-strategy labels)")
            }),
        F::NoTimestamp => r(flag, &["GFD_NO_TIMESTAMP"])
            .file("gfd.noTimestamp", |f| f.gfd.as_ref()?.no_timestamp.map(|b| b.to_string()))
            .default("false")
            .set(|s, f| put(&mut s.no_timestamp, boolean(&f.value)))
            .never_in(&[(Mode::Hook, "in `nvlabel hook`, which never writes a timestamp")]),
        F::ExtendedLabels => r(flag, &["NVLABEL_EXTENDED_LABELS"])
            .file("extendedLabels", |f| f.extended_labels.map(|b| b.to_string()))
            .default("false")
            .set(|s, f| put(&mut s.extended_labels, boolean(&f.value))),
        // `nvlabel prune`'s own, read from the command line alone: each changes what it removes;
        // and `nvlabel health clear`'s, which GPUs it clears.
        F::HealthOnly | F::AllNodes | F::Gpu => r(flag, &[]),
        F::AllocationMode => r(flag, &["NVLABEL_ALLOCATION_MODE"])
            .file("allocationMode", |f| f.allocation_mode.clone())
            .default("device-plugin")
            .set(|s, f| {
                put(&mut s.allocation_mode, choice(&f.value, AllocationMode::parse, "device-plugin, dra or auto"))
            }),
        F::FailOnInitError => r(flag, &["GFD_FAIL_ON_INIT_ERROR", "FAIL_ON_INIT_ERROR"])
            .file("failOnInitError", |f| f.fail_on_init_error.map(|b| b.to_string()))
            .default("true")
            .set(|s, f| put(&mut s.fail_on_init_error, boolean(&f.value)))
            .never_in(&[(Mode::Health, "in `nvlabel health`, which exits 2 when NVML cannot start")])
            .when(from_snapshot),
        // Without it, the file under --sysfs-root (the resolver's cross-field step).
        F::MachineTypeFile => r(flag, &["GFD_MACHINE_TYPE_FILE"])
            .file("gfd.machineTypeFile", |f| f.gfd.as_ref()?.machine_type_file.clone())
            .set(|s, f| put(&mut s.probe.machine_type_file, Ok(f.value.clone().into())))
            .never_in(&[(Mode::Health, "in `nvlabel health`, which reads no machine type")])
            .when(from_snapshot),
        F::DeviceDiscoveryStrategy => r(flag, &["DEVICE_DISCOVERY_STRATEGY"])
            .file("deviceDiscoveryStrategy", |f| f.device_discovery_strategy.clone())
            .default("auto")
            .set(|s, f| {
                let v = &f.value;
                let why = || format!("invalid --device-discovery-strategy option {v}; use auto, nvml, tegra or vfio");
                put(&mut s.probe.strategy, crate::probe::Strategy::parse(v).ok_or_else(why))
            })
            .never_in(&[(Mode::Health, "in `nvlabel health`, which reads NVML whatever the strategy")])
            .when(from_snapshot),
        // Accepted for GFD compatibility; unused, as in GFD.
        F::DriverRootCtrPath => r(flag, &["DRIVER_ROOT_CTR_PATH", "CONTAINER_DRIVER_ROOT"])
            .default("/driver-root")
            .gfd()
            .never_in(&[(Mode::Health, "in `nvlabel health`, which GFD does not have")]),
        F::ConfigFile => r(flag, &["GFD_CONFIG_FILE", "CONFIG_FILE"])
            .set(|s, f| put(&mut s.config_file, Ok(non_empty(&f.value).map(PathBuf::from)))),
        F::ConfigDir => r(flag, &["NVLABEL_CONFIG_DIR"])
            .empty(Empty::EnvUnset)
            .set(|s, f| put(&mut s.config_dir, Ok(Some(f.value.clone().into())))),
        F::ConfigDefault => r(flag, &["NVLABEL_CONFIG_DEFAULT"])
            .set(|s, f| put(&mut s.config_default, Ok(non_empty(&f.value))))
            .when(|r| r.settings.config_dir.is_none().then_some("without --config-dir, whose default key it names")),
        F::NodeName => r(flag, &["NODE_NAME"])
            .set(|s, f| put(&mut s.node_name, Ok(non_empty(&f.value))))
            .gfd()
            .when(hook_without_dir),
        // POD_NAMESPACE (what manifests usually pass) after GFD's NAMESPACE.
        F::Namespace => r(flag, &["NAMESPACE", "POD_NAMESPACE"])
            .default("default")
            .set(|s, f| put(&mut s.namespace, Ok(f.value.clone())))
            .gfd()
            .never_in(&[(Mode::Hook, "in `nvlabel hook`, which publishes nothing")])
            .when(|r| {
                (r.mode == Mode::HealthClear && r.settings.health.instance.is_none())
                    .then_some("in `nvlabel health clear` without --instance, whose ServiceAccount's namespace it names")
            }),
        F::PodName => r(flag, &["POD_NAME"])
            .set(|s, f| put(&mut s.pod_name, Ok(non_empty(&f.value))))
            .gfd()
            .never_in(&[
                (Mode::Hook, OUTSIDE_A_LABELLER),
                (Mode::Prune, OUTSIDE_A_LABELLER),
                (Mode::HealthClear, OUTSIDE_A_LABELLER),
            ]),
        F::Kubeconfig => r(flag, &["KUBECONFIG"])
            .set(|s, f| put(&mut s.kubeconfig, Ok(non_empty(&f.value))))
            .gfd()
            .when(hook_without_dir),
        F::KubeApiQps => r(flag, &["KUBE_API_QPS"])
            .default("5")
            .empty(Empty::EnvUnset)
            .set(|s, f| put(&mut s.kube_api_qps, number(&f.value)))
            .gfd()
            .when(hook_without_dir),
        F::KubeApiBurst => r(flag, &["KUBE_API_BURST"])
            .default("10")
            .empty(Empty::EnvUnset)
            .set(|s, f| put(&mut s.kube_api_burst, number(&f.value)))
            .gfd()
            .when(hook_without_dir),
        F::OutputFile => r(flag, &["GFD_OUTPUT_FILE"])
            .file("gfd.outputFile", |f| f.gfd.as_ref()?.output_file.clone())
            .default(DEFAULT_OUTPUT_FILE)
            .set(|s, f| put(&mut s.output_file, Ok(f.value.clone())))
            .gfd(),
        F::UseNodeFeatureApi => r(flag, &["GFD_USE_NODE_FEATURE_API", "USE_NODE_FEATURE_API"])
            .file("useNodeFeatureAPI", |f| f.use_node_feature_api.map(|b| b.to_string()))
            .default("true")
            .set(|s, f| put(&mut s.use_node_feature_api, boolean(&f.value)))
            .gfd(),
        F::Sink => r(flag, &["NVLABEL_SINK"])
            .default("gfd")
            .set(|s, f| put(&mut s.sink, choice(&f.value, Sink::parse, "gfd or node"))),
        // On the command line the resolver refuses it with its value; from env it is this row's
        // warning.
        F::Expiry => r(flag, &["NVLABEL_EXPIRY"])
            .set(|s, f| {
                let positive = "use a positive duration such as 1h";
                let expiry = match non_empty(&f.value) {
                    None => Ok(None),
                    Some(v) => match duration(&v, positive)? {
                        d if d.is_zero() => Err(positive.to_string()),
                        d => Ok(Some(d)),
                    },
                };
                put(&mut s.expiry, expiry)
            })
            .when(|r| {
                (r.mode.labels() && !r.settings.expiry_applies())
                    .then_some("where labels do not go to the feature file")
            }),
        F::Format => r(flag, &["NVLABEL_FORMAT"])
            .default("text")
            .set(|s, f| put(&mut s.format, choice(&f.value, Format::parse, "text or json")))
            .when(|r| {
                let printed = matches!(r.settings.target(), Ok(Target::Stdout(_)));
                (r.mode.labels() && !printed).then_some(
                    "where labels are not printed (only --output-file \"\" with --use-node-feature-api=false prints them)",
                )
            }),
        F::Oneshot => r(flag, &["GFD_ONESHOT"])
            .file("gfd.oneshot", |f| f.gfd.as_ref()?.oneshot.map(|b| b.to_string()))
            .default("false")
            .set(|s, f| put(&mut s.oneshot, boolean(&f.value))),
        F::SleepInterval => r(flag, &["GFD_SLEEP_INTERVAL"])
            .file("gfd.sleepInterval", |f| f.gfd.as_ref()?.sleep_interval.map(|i| i.to_string()))
            .default("60s")
            .empty(Empty::EnvUnset)
            .set(|s, f| {
                let (interval, bare) = parse_interval(&f.value).map_err(|e| e.to_string())?;
                if bare {
                    s.notes.push(format!("sleep interval {:?} from {} read as {interval}", f.value, f.origin));
                }
                put(&mut s.sleep_interval, Ok(interval))
            })
            .gfd(),
        // One environment often serves daemons and one-shot runs alike (a test harness, a node's
        // profile): a port for daemons is no slip in a one-shot run.
        F::MetricsAddr => r(flag, &["NVLABEL_METRICS_ADDR"])
            .default(":8080")
            .set(|s, f| put(&mut s.metrics_addr, Ok(f.value.clone())))
            .never_in(&[(Mode::Oneshot, "with --oneshot: only a daemon serves /metrics")])
            .quiet_env(),
        F::SharingCheckGrace => r(flag, &["NVLABEL_SHARING_CHECK_GRACE"])
            .default("5m")
            .empty(Empty::Default)
            .set(|s, f| put(&mut s.sharing_check_grace, duration(&f.value, "use a duration such as 5m")))
            .when(|r| {
                (r.mode.labels() && !r.settings.extended_labels)
                    .then_some("without --extended-labels, which alone checks the sharing labels against the Node")
            }),
        // Paths: an empty env value is as if unset.
        F::NvmlLibrary => r(flag, &["NVLABEL_NVML_LIBRARY"])
            .default(crate::probe::DEFAULT_LIBRARY)
            .empty(Empty::EnvUnset)
            .set(|s, f| put(&mut s.probe.library, Ok(f.value.clone().into()))),
        F::CudaLibrary => r(flag, &["NVLABEL_CUDA_LIBRARY"])
            .default(crate::probe::DEFAULT_CUDA_LIBRARY)
            .empty(Empty::EnvUnset)
            .set(|s, f| put(&mut s.probe.cuda_library, Ok(f.value.clone().into())))
            .never_in(&[(Mode::Health, READS_NVML)]),
        F::HostRoot => r(flag, &["NVLABEL_HOST_ROOT"])
            .default("/")
            .empty(Empty::EnvUnset)
            .set(|s, f| put(&mut s.probe.host_root, Ok(f.value.clone().into())))
            .never_in(&[(Mode::Health, READS_NVML)]),
        F::PciIds => r(flag, &["NVLABEL_PCI_IDS"])
            .set(|s, f| put(&mut s.probe.pci_ids, Ok(non_empty(&f.value).map(PathBuf::from))))
            .never_in(&[(Mode::Health, READS_NVML)]),
        F::SysfsRoot => r(flag, &["NVLABEL_SYSFS_ROOT"])
            .default("/sys")
            .empty(Empty::EnvUnset)
            .set(|s, f| put(&mut s.probe.sysfs_root, Ok(f.value.clone().into()))),
        F::Snapshot => r(flag, &["NVLABEL_SNAPSHOT"])
            .empty(Empty::EnvUnset)
            .set(|s, f| put(&mut s.snapshot, Ok(Some(f.value.clone().into()))))
            .never_in(&[(Mode::Health, "in `nvlabel health`, which reads NVML, never a snapshot")]),
        F::LogFormat => r(flag, &["NVLABEL_LOG_FORMAT"])
            .default("text")
            .set(|s, f| put(&mut s.log_format, choice(&f.value, crate::logging::LogFormat::parse, "text or json"))),
        F::Health => r(flag, &["NVLABEL_HEALTH"])
            .file("health", |f| f.health.map(|b| b.to_string()))
            .default("false")
            .set(|s, f| put(&mut s.health.enabled, boolean(&f.value)))
            .never_in(&[
                (Mode::Oneshot, "with --oneshot: only a daemon keeps the GPU health condition"),
                (Mode::Health, "in `nvlabel health`, which always reads GPU health and publishes nothing"),
                (Mode::HealthClear, ONLY_CLEARS),
            ]),
        F::HealthConditionType => r(flag, &["NVLABEL_HEALTH_CONDITION_TYPE"])
            .file("healthConditionType", |f| f.health_condition_type.clone())
            .default(health::DEFAULT_CONDITION_TYPE)
            .set(|s, f| put(&mut s.health.condition_type, health::condition_type(&f.value)))
            .never_in(&[(Mode::Health, "in `nvlabel health`, which keeps no condition")])
            .when(|r| {
                (r.mode != Mode::HealthClear && !health_daemon(r))
                    .then_some("without --health in a daemon or `nvlabel health clear`")
            }),
        F::HealthIgnoreXids => r(flag, &["NVLABEL_HEALTH_IGNORE_XIDS"])
            .file("healthIgnoreXids", |f| f.health_ignore_xids.clone())
            .set(|s, f| put(&mut s.health.judging.ignored_xids, health::xids(&f.value)))
            .never_in(&[(Mode::HealthClear, ONLY_CLEARS)])
            .when(xids_unread),
        F::HealthFatalXids => r(flag, &["NVLABEL_HEALTH_FATAL_XIDS"])
            .file("healthFatalXids", |f| f.health_fatal_xids.clone())
            .set(|s, f| put(&mut s.health.judging.fatal_xids, health::xids(&f.value)))
            .never_in(&[(Mode::HealthClear, ONLY_CLEARS)])
            .when(xids_unread),
        F::HealthXidThresholds => r(flag, &["NVLABEL_HEALTH_XID_THRESHOLDS"])
            .file("healthXidThresholds", |f| f.health_xid_thresholds.clone())
            .set(|s, f| put(&mut s.health.judging.xid_thresholds, crate::health::judging::thresholds::parse(&f.value)))
            .never_in(&[(Mode::Health, "in `nvlabel health`, which looks once and counts no Xid events")])
            .when(|r| (!health_daemon(r)).then_some("without --health in a daemon")),
        F::HealthExpectedGpus => r(flag, &["NVLABEL_HEALTH_EXPECTED_GPUS"])
            .file("healthExpectedGpus", |f| f.health_expected_gpus.clone())
            .set(|s, f| {
                let count = |v: &str| health::gpu_count(v).ok_or("use a whole number of GPUs from 1".to_string());
                let v = f.value.trim();
                put(&mut s.health.judging.expected_gpus, (!v.is_empty()).then(|| count(v)).transpose())
            })
            .never_in(&[(Mode::HealthClear, ONLY_CLEARS)])
            .when(xids_unread),
        // The deadline bounds a daemon's labelling passes too, with or without --health.
        F::HealthNvmlTimeout => r(flag, &["NVLABEL_HEALTH_NVML_TIMEOUT"])
            .file("healthNvmlTimeout", |f| f.health_nvml_timeout.clone())
            .default("30s")
            .set(|s, f| {
                let timeout = crate::duration::parse_go_duration(&f.value)
                    .ok()
                    .filter(|d| *d >= std::time::Duration::from_secs(1))
                    .ok_or("use a duration of at least 1s, such as 30s or 2m".to_string());
                put(&mut s.health.nvml_timeout, timeout)
            })
            .never_in(&[
                (Mode::Oneshot, NO_DEADLINE),
                (Mode::Probe, NO_DEADLINE),
                (Mode::Prune, NO_DEADLINE),
                (Mode::Hook, NO_DEADLINE),
                (Mode::Health, NO_DEADLINE),
                (Mode::HealthClear, NO_DEADLINE),
            ]),
        F::HealthRecoveryHold => r(flag, &["NVLABEL_HEALTH_RECOVERY_HOLD"])
            .file("healthRecoveryHold", |f| f.health_recovery_hold.clone())
            .default("2m")
            .set(|s, f| {
                let hold = crate::duration::parse_go_duration(&f.value)
                    .map_err(|_| "use a duration such as 2m, 30s or 0s (clear at the first reading that shows it)".to_string());
                put(&mut s.health.recovery_hold, hold)
            })
            .never_in(&[
                (Mode::Health, "in `nvlabel health`, which reads once and keeps nothing"),
                (Mode::HealthClear, ONLY_CLEARS),
            ])
            .when(|r| (!health_daemon(r)).then_some("without --health in a daemon")),
        F::HealthTaintEffect => r(flag, &["NVLABEL_HEALTH_TAINT_EFFECT"])
            .file("healthTaintEffect", |f| f.health_taint_effect.clone())
            .default("NoSchedule")
            .set(|s, f| {
                put(&mut s.health.taint_effect, choice(&f.value, TaintEffect::parse, "NoSchedule, NoExecute or None"))
            })
            .never_in(&[(Mode::Health, "in `nvlabel health`, which taints nothing"), (Mode::HealthClear, ONLY_CLEARS)])
            .when(|r| {
                (!health_daemon(r) || r.settings.allocation_mode == AllocationMode::DevicePlugin)
                    .then_some("without --health in a daemon with --allocation-mode dra or auto")
            }),
        F::BootIdFile => r(flag, &["NVLABEL_BOOT_ID_FILE"])
            .default(health::DEFAULT_BOOT_ID_FILE)
            .empty(Empty::Default)
            .set(|s, f| put(&mut s.health.boot_id_file, Ok(f.value.clone().into())))
            .never_in(&[
                (Mode::Health, "in `nvlabel health`, which keeps no faults across runs"),
                (Mode::HealthClear, ONLY_CLEARS),
            ])
            .when(|r| (!health_daemon(r)).then_some("without --health in a daemon")),
        F::Instance => r(flag, &["NVLABEL_INSTANCE"])
            .set(|s, f| put(&mut s.health.instance, crate::health::values::instance::name(&f.value)))
            .never_in(&[
                (Mode::Oneshot, NOT_AN_INSTANCES),
                (Mode::Probe, NOT_AN_INSTANCES),
                (Mode::Hook, NOT_AN_INSTANCES),
                (Mode::Health, NOT_AN_INSTANCES),
            ])
            .when(|r| (r.mode == Mode::Daemon && !r.settings.health.enabled).then_some("without --health in a daemon")),
    }
}

/// Every environment variable nvlabel reads: the flags' and the log filter.
pub fn env_vars() -> impl Iterator<Item = &'static str> {
    F::ALL.iter().flat_map(|f| row(*f).env.iter().copied()).chain(["RUST_LOG"])
}
