//! The flag table: one row per flag, with what its clap field ([`super::arg_groups`]: type,
//! value parser, default, help) cannot say: its env names, config-file key, how an empty env
//! value is read, how its value goes into [`super::settings::Settings`] (through the same parser
//! as the command line's) and where it has no effect. From both come `--help`'s env names and
//! each subcommand's list ([`super::flags`]), the resolution ([`super::resolve`]), the refusal of
//! flags without effect ([`super::modes`]) and docs/flags.md ([`super::flag_docs`]).
//! The match is exhaustive, so a [`F`] without a row fails to compile; a clap flag without a
//! [`F`] fails `every_flag_of_every_command_has_one_row`.
//!
//! No effect: a flag given on the command line where its row says it has none is a usage error
//! naming the flag and the mode; the same from its environment variable is one warning, since the
//! GPU Operator sets env for every mode. GFD's flags stay accepted wherever GFD accepts them
//! (their `--help` says so); only nvlabel's own modes refuse them.

use super::flag::Flag as F;
use super::health_checks::{self as health, TaintEffect};
use super::row::{boolean, choice, duration, non_empty, number, put, Empty, Mode, Row, Run};
use super::value_parsers as value;
use crate::duration::parse_interval;
use crate::labels::{AllocationMode, MigStrategy};
use crate::publish::{Format, Sink, Target};
use std::path::PathBuf;

const HOOK_WITHOUT_DIR: &str = "in `nvlabel hook` without --config-dir (a hook publishes nothing)";

fn hook_without_dir(r: &Run) -> bool {
    r.mode == Mode::Hook && r.settings.config_dir.is_none()
}

/// A snapshot stands in for NVML and sysfs.
const FROM_SNAPSHOT: &str = "with --snapshot, which stands in for NVML and sysfs";

fn from_snapshot(r: &Run) -> bool {
    r.settings.snapshot.is_some()
}

fn health_daemon(r: &Run) -> bool {
    r.mode == Mode::Daemon && r.settings.health.enabled
}

const XIDS_UNREAD: &str = "without --health in a daemon or `nvlabel health`";

fn xids_unread(r: &Run) -> bool {
    r.mode != Mode::Health && !health_daemon(r)
}

/// Where GFD accepts its API flags without effect, as `--help` says it.
const NO_API: &str = "accepted without effect where nothing reads the API, as GFD does";
const FILE_OR_STDOUT: &str = "accepted without effect where labels go to a file or stdout, as GFD does";

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
            .set(|s, f| put(&mut s.mig_strategy, choice::<MigStrategy>(&f.value)))
            .when("with --allocation-mode dra, which gives physical facts only (no MIG-strategy labels)", |r| r.settings.allocation_mode == AllocationMode::Dra),
        F::NoTimestamp => r(flag, &["GFD_NO_TIMESTAMP"])
            .file("gfd.noTimestamp", |f| f.gfd.as_ref()?.no_timestamp.map(|b| b.to_string()))
            .set(|s, f| put(&mut s.no_timestamp, boolean(&f.value)))
            .never_in(&[(Mode::Hook, "in `nvlabel hook`, which never writes a timestamp")]),
        F::ExtendedLabels => r(flag, &["NVLABEL_EXTENDED_LABELS"])
            .file("extendedLabels", |f| f.extended_labels.map(|b| b.to_string()))
            .set(|s, f| put(&mut s.extended_labels, boolean(&f.value))),
        // `nvlabel prune`'s own, read from the command line alone: each changes what it removes;
        // and `nvlabel health clear`'s, which GPUs it clears.
        F::HealthOnly | F::AllNodes | F::Gpu => r(flag, &[]),
        F::AllocationMode => r(flag, &["NVLABEL_ALLOCATION_MODE"])
            .file("allocationMode", |f| f.allocation_mode.clone())
            .set(|s, f| put(&mut s.allocation_mode, choice::<AllocationMode>(&f.value))),
        F::FailOnInitError => r(flag, &["GFD_FAIL_ON_INIT_ERROR", "FAIL_ON_INIT_ERROR"])
            .file("failOnInitError", |f| f.fail_on_init_error.map(|b| b.to_string()))
            .set(|s, f| put(&mut s.fail_on_init_error, boolean(&f.value)))
            .never_in(&[(Mode::Health, "in `nvlabel health`, which exits 2 when NVML cannot start")])
            .when(FROM_SNAPSHOT, from_snapshot),
        // Without it, the file under --sysfs-root (the resolver's cross-field step).
        F::MachineTypeFile => r(flag, &["GFD_MACHINE_TYPE_FILE"])
            .file("gfd.machineTypeFile", |f| f.gfd.as_ref()?.machine_type_file.clone())
            .set(|s, f| put(&mut s.probe.machine_type_file, Ok(f.value.clone().into())))
            .never_in(&[(Mode::Health, "in `nvlabel health`, which reads no machine type")])
            .when(FROM_SNAPSHOT, from_snapshot),
        F::DeviceDiscoveryStrategy => r(flag, &["DEVICE_DISCOVERY_STRATEGY"])
            .file("deviceDiscoveryStrategy", |f| f.device_discovery_strategy.clone())
            .set(|s, f| put(&mut s.probe.strategy, value::strategy(&f.value)))
            .never_in(&[(Mode::Health, "in `nvlabel health`, which reads NVML whatever the strategy")])
            .when(FROM_SNAPSHOT, from_snapshot),
        // Accepted for GFD compatibility; unused, as in GFD.
        F::DriverRootCtrPath => r(flag, &["DRIVER_ROOT_CTR_PATH", "CONTAINER_DRIVER_ROOT"])
            .gfd("accepted for GFD compatibility; unused, as in GFD")
            .never_in(&[(Mode::Health, "in `nvlabel health`, which GFD does not have")]),
        F::ConfigFile => r(flag, &["GFD_CONFIG_FILE", "CONFIG_FILE"])
            .set(|s, f| put(&mut s.config_file, Ok(non_empty(&f.value).map(PathBuf::from)))),
        F::ConfigDir => r(flag, &["NVLABEL_CONFIG_DIR"])
            .empty(Empty::EnvUnset)
            .set(|s, f| put(&mut s.config_dir, Ok(Some(f.value.clone().into())))),
        F::ConfigDefault => r(flag, &["NVLABEL_CONFIG_DEFAULT"])
            .set(|s, f| put(&mut s.config_default, Ok(non_empty(&f.value))))
            .when("without --config-dir, whose default key it names", |r| r.settings.config_dir.is_none()),
        F::NodeName => r(flag, &["NODE_NAME"])
            .set(|s, f| put(&mut s.node_name, Ok(non_empty(&f.value))))
            .gfd("accepted elsewhere without effect, as GFD does")
            .when(HOOK_WITHOUT_DIR, hook_without_dir),
        // POD_NAMESPACE (what manifests usually pass) after GFD's NAMESPACE.
        F::Namespace => r(flag, &["NAMESPACE", "POD_NAMESPACE"])
            .set(|s, f| put(&mut s.namespace, Ok(f.value.clone())))
            .gfd(FILE_OR_STDOUT)
            .never_in(&[(Mode::Hook, "in `nvlabel hook`, which publishes nothing")])
            .when("in `nvlabel health clear` without --instance, whose ServiceAccount's namespace it names", |r| r.mode == Mode::HealthClear && r.settings.health.instance.is_none()),
        F::PodName => r(flag, &["POD_NAME"])
            .set(|s, f| put(&mut s.pod_name, Ok(non_empty(&f.value))))
            .gfd(FILE_OR_STDOUT)
            .never_in(&[
                (Mode::Hook, OUTSIDE_A_LABELLER),
                (Mode::Prune, OUTSIDE_A_LABELLER),
                (Mode::HealthClear, OUTSIDE_A_LABELLER),
            ]),
        F::Kubeconfig => r(flag, &["KUBECONFIG"])
            .set(|s, f| put(&mut s.kubeconfig, Ok(non_empty(&f.value))))
            .gfd(NO_API)
            .when(HOOK_WITHOUT_DIR, hook_without_dir),
        F::KubeApiQps => r(flag, &["KUBE_API_QPS"])
            .empty(Empty::EnvUnset)
            .set(|s, f| put(&mut s.kube_api_qps, number(&f.value)))
            .gfd(NO_API)
            .when(HOOK_WITHOUT_DIR, hook_without_dir),
        F::KubeApiBurst => r(flag, &["KUBE_API_BURST"])
            .empty(Empty::EnvUnset)
            .set(|s, f| put(&mut s.kube_api_burst, number(&f.value)))
            .gfd(NO_API)
            .when(HOOK_WITHOUT_DIR, hook_without_dir),
        F::OutputFile => r(flag, &["GFD_OUTPUT_FILE"])
            .file("gfd.outputFile", |f| f.gfd.as_ref()?.output_file.clone())
            .set(|s, f| put(&mut s.output_file, Ok(f.value.clone())))
            .gfd("accepted without effect with the NodeFeature API or --sink node, as GFD does"),
        F::UseNodeFeatureApi => r(flag, &["GFD_USE_NODE_FEATURE_API", "USE_NODE_FEATURE_API"])
            .file("useNodeFeatureAPI", |f| f.use_node_feature_api.map(|b| b.to_string()))
            .set(|s, f| put(&mut s.use_node_feature_api, boolean(&f.value)))
            .gfd("accepted without effect with --sink node, as GFD does"),
        F::Sink => r(flag, &["NVLABEL_SINK"])
            .set(|s, f| put(&mut s.sink, choice::<Sink>(&f.value))),
        // On the command line the resolver refuses it with its value; from env it is this row's
        // warning.
        F::Expiry => r(flag, &["NVLABEL_EXPIRY"])
            .set(|s, f| put(&mut s.expiry, value::expiry(&f.value)))
            .when("where labels do not go to the feature file", |r| r.mode.labels() && !r.settings.expiry_applies()),
        F::Format => r(flag, &["NVLABEL_FORMAT"])
            .set(|s, f| put(&mut s.format, choice::<Format>(&f.value)))
            .when("where labels are not printed (only --output-file \"\" with --use-node-feature-api=false prints them)", |r| {
                let printed = matches!(r.settings.target(), Ok(Target::Stdout(_)));
                r.mode.labels() && !printed
            }),
        F::Oneshot => r(flag, &["GFD_ONESHOT"])
            .file("gfd.oneshot", |f| f.gfd.as_ref()?.oneshot.map(|b| b.to_string()))
            .set(|s, f| put(&mut s.oneshot, boolean(&f.value))),
        F::SleepInterval => r(flag, &["GFD_SLEEP_INTERVAL"])
            .file("gfd.sleepInterval", |f| f.gfd.as_ref()?.sleep_interval.map(|i| i.to_string()))
            .empty(Empty::EnvUnset)
            .set(|s, f| {
                let (interval, bare) = parse_interval(&f.value).map_err(|e| e.to_string())?;
                if bare {
                    s.notes.push(format!("sleep interval {:?} from {} read as {interval}", f.value, f.origin));
                }
                put(&mut s.sleep_interval, Ok(interval))
            })
            .gfd("accepted without effect with --oneshot, as GFD does"),
        // One environment often serves daemons and one-shot runs alike (a test harness, a node's
        // profile): a port for daemons is no slip in a one-shot run.
        F::MetricsAddr => r(flag, &["NVLABEL_METRICS_ADDR"])
            .set(|s, f| put(&mut s.metrics_addr, Ok(f.value.clone())))
            .never_in(&[(Mode::Oneshot, "with --oneshot: only a daemon serves /metrics")])
            .quiet_env(),
        F::SharingCheckGrace => r(flag, &["NVLABEL_SHARING_CHECK_GRACE"])
            .empty(Empty::Default)
            .set(|s, f| put(&mut s.sharing_check_grace, duration(&f.value, "use a duration such as 5m")))
            .when("without --extended-labels, which alone checks the sharing labels against the Node", |r| r.mode.labels() && !r.settings.extended_labels),
        // Paths: an empty env value is as if unset.
        F::NvmlLibrary => r(flag, &["NVLABEL_NVML_LIBRARY"])
            .empty(Empty::EnvUnset)
            .set(|s, f| put(&mut s.probe.library, Ok(f.value.clone().into()))),
        F::CudaLibrary => r(flag, &["NVLABEL_CUDA_LIBRARY"])
            .empty(Empty::EnvUnset)
            .set(|s, f| put(&mut s.probe.cuda_library, Ok(f.value.clone().into())))
            .never_in(&[(Mode::Health, READS_NVML)]),
        F::HostRoot => r(flag, &["NVLABEL_HOST_ROOT"])
            .empty(Empty::EnvUnset)
            .set(|s, f| put(&mut s.probe.host_root, Ok(f.value.clone().into())))
            .never_in(&[(Mode::Health, READS_NVML)]),
        F::PciIds => r(flag, &["NVLABEL_PCI_IDS"])
            .set(|s, f| put(&mut s.probe.pci_ids, Ok(non_empty(&f.value).map(PathBuf::from))))
            .never_in(&[(Mode::Health, READS_NVML)]),
        F::SysfsRoot => r(flag, &["NVLABEL_SYSFS_ROOT"])
            .empty(Empty::EnvUnset)
            .set(|s, f| put(&mut s.probe.sysfs_root, Ok(f.value.clone().into()))),
        F::Snapshot => r(flag, &["NVLABEL_SNAPSHOT"])
            .empty(Empty::EnvUnset)
            .set(|s, f| put(&mut s.snapshot, Ok(Some(f.value.clone().into()))))
            .never_in(&[(Mode::Health, "in `nvlabel health`, which reads NVML, never a snapshot")]),
        F::LogFormat => r(flag, &["NVLABEL_LOG_FORMAT"])
            .set(|s, f| put(&mut s.log_format, choice::<crate::logging::LogFormat>(&f.value))),
        F::Health => r(flag, &["NVLABEL_HEALTH"])
            .file("health", |f| f.health.map(|b| b.to_string()))
            .set(|s, f| put(&mut s.health.enabled, boolean(&f.value)))
            .never_in(&[
                (Mode::Oneshot, "with --oneshot: only a daemon keeps the GPU health condition"),
                (Mode::Health, "in `nvlabel health`, which always reads GPU health and publishes nothing"),
                (Mode::HealthClear, ONLY_CLEARS),
            ]),
        F::HealthConditionType => r(flag, &["NVLABEL_HEALTH_CONDITION_TYPE"])
            .file("healthConditionType", |f| f.health_condition_type.clone())
            .set(|s, f| put(&mut s.health.condition_type, health::condition_type(&f.value)))
            .never_in(&[(Mode::Health, "in `nvlabel health`, which keeps no condition")])
            .when("without --health in a daemon or `nvlabel health clear`", |r| r.mode != Mode::HealthClear && !health_daemon(r)),
        F::HealthIgnoreXids => r(flag, &["NVLABEL_HEALTH_IGNORE_XIDS"])
            .file("healthIgnoreXids", |f| f.health_ignore_xids.clone())
            .set(|s, f| put(&mut s.health.judging.ignored_xids, health::xids(&f.value)))
            .never_in(&[(Mode::HealthClear, ONLY_CLEARS)])
            .when(XIDS_UNREAD, xids_unread),
        F::HealthFatalXids => r(flag, &["NVLABEL_HEALTH_FATAL_XIDS"])
            .file("healthFatalXids", |f| f.health_fatal_xids.clone())
            .set(|s, f| put(&mut s.health.judging.fatal_xids, health::xids(&f.value)))
            .never_in(&[(Mode::HealthClear, ONLY_CLEARS)])
            .when(XIDS_UNREAD, xids_unread),
        F::HealthXidThresholds => r(flag, &["NVLABEL_HEALTH_XID_THRESHOLDS"])
            .file("healthXidThresholds", |f| f.health_xid_thresholds.clone())
            .set(|s, f| put(&mut s.health.judging.xid_thresholds, crate::health::judging::thresholds::parse(&f.value)))
            .never_in(&[(Mode::Health, "in `nvlabel health`, which looks once and counts no Xid events")])
            .when("without --health in a daemon", |r| !health_daemon(r)),
        F::HealthExpectedGpus => r(flag, &["NVLABEL_HEALTH_EXPECTED_GPUS"])
            .file("healthExpectedGpus", |f| f.health_expected_gpus.clone())
            .set(|s, f| put(&mut s.health.judging.expected_gpus, health::expected_gpus(&f.value)))
            .never_in(&[(Mode::HealthClear, ONLY_CLEARS)])
            .when(XIDS_UNREAD, xids_unread),
        // The deadline bounds a daemon's labelling passes too, with or without --health.
        F::HealthNvmlTimeout => r(flag, &["NVLABEL_HEALTH_NVML_TIMEOUT"])
            .file("healthNvmlTimeout", |f| f.health_nvml_timeout.clone())
            .set(|s, f| put(&mut s.health.nvml_timeout, health::nvml_timeout(&f.value)))
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
            .set(|s, f| put(&mut s.health.recovery_hold, health::recovery_hold(&f.value)))
            .never_in(&[
                (Mode::Health, "in `nvlabel health`, which reads once and keeps nothing"),
                (Mode::HealthClear, ONLY_CLEARS),
            ])
            .when("without --health in a daemon", |r| !health_daemon(r)),
        F::HealthTaintEffect => r(flag, &["NVLABEL_HEALTH_TAINT_EFFECT"])
            .file("healthTaintEffect", |f| f.health_taint_effect.clone())
            .set(|s, f| put(&mut s.health.taint_effect, choice::<TaintEffect>(&f.value)))
            .never_in(&[(Mode::Health, "in `nvlabel health`, which taints nothing"), (Mode::HealthClear, ONLY_CLEARS)])
            .when("without --health in a daemon with --allocation-mode dra or auto", |r| !health_daemon(r) || r.settings.allocation_mode == AllocationMode::DevicePlugin),
        F::BootIdFile => r(flag, &["NVLABEL_BOOT_ID_FILE"])
            .empty(Empty::Default)
            .set(|s, f| put(&mut s.health.boot_id_file, Ok(f.value.clone().into())))
            .never_in(&[
                (Mode::Health, "in `nvlabel health`, which keeps no faults across runs"),
                (Mode::HealthClear, ONLY_CLEARS),
            ])
            .when("without --health in a daemon", |r| !health_daemon(r)),
        F::Instance => r(flag, &["NVLABEL_INSTANCE"])
            .set(|s, f| put(&mut s.health.instance, crate::health::values::instance::name(&f.value)))
            .never_in(&[
                (Mode::Oneshot, NOT_AN_INSTANCES),
                (Mode::Probe, NOT_AN_INSTANCES),
                (Mode::Hook, NOT_AN_INSTANCES),
                (Mode::Health, NOT_AN_INSTANCES),
            ])
            .when("without --health in a daemon", |r| r.mode == Mode::Daemon && !r.settings.health.enabled),
    }
}

/// Every environment variable nvlabel reads: the flags' and the log filter.
pub fn env_vars() -> impl Iterator<Item = &'static str> {
    F::ALL.iter().flat_map(|f| row(*f).env.iter().copied()).chain(["RUST_LOG"])
}
