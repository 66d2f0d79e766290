//! The flag groups, one per concern (labels, label options, facts, config, API, target, output,
//! daemon, health, source, prune, clear, logs): each flag's type, value parser (and so its
//! values), default and help, said once here (its env names, config-file key and where it has
//! no effect are its row's, in [`super::rows`], and so is where GFD accepts it without effect,
//! which `--help` adds); [`super::flags`] flattens into each subcommand only the groups it uses.

use super::health_checks::{
    condition_type, expected_gpus, nvml_timeout, recovery_hold, xids, TaintEffect, DEFAULT_BOOT_ID_FILE,
    DEFAULT_CONDITION_TYPE, DEFAULT_NVML_TIMEOUT,
};
use super::value_parsers::{expiry, go, interval, parsed_by, shown, strategy, Maybe};
use crate::duration::Interval;
use crate::health::config::DEFAULT_RECOVERY_HOLD;
use crate::health::values::fault::Thresholds;
use crate::labels::{AllocationMode, MigStrategy};
use crate::logging::LogFormat;
use crate::probe::Strategy;
use crate::publish::{Format, Sink};
use clap::Args;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

/// GFD's default feature file (NFD's `features.d`).
pub const DEFAULT_OUTPUT_FILE: &str = "/etc/kubernetes/node-feature-discovery/features.d/gfd";

/// Parses GFD's booleans (`strconv.ParseBool`): 1 t T TRUE true True 0 f F FALSE false False.
pub fn parse_bool(s: &str) -> Result<bool, String> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!("invalid boolean {s:?}: use true or false")),
    }
}

/// All of the daemon's flags, as parsed (a flag not given is `None`); the settings come from
/// [`super::Settings::resolve`], which reads the given flags' text.
#[derive(Debug, Default, Clone, Args)]
pub struct LabelArgs {
    /// How facts are read.
    #[command(flatten)]
    pub facts: FactArgs,
    /// What the labels say.
    #[command(flatten)]
    pub options: LabelOptionArgs,
    /// The sharing config.
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Identity and API.
    #[command(flatten)]
    pub api: ApiArgs,
    /// Where labels go.
    #[command(flatten)]
    pub target: TargetArgs,
    /// How what is written looks.
    #[command(flatten)]
    pub output: OutputArgs,
    /// How the daemon runs.
    #[command(flatten)]
    pub daemon: DaemonArgs,
    /// GPU health reporting.
    #[command(flatten)]
    pub health: HealthArgs,
}

/// GPU health reporting (nvlabel's own).
#[derive(Debug, Default, Clone, Args)]
pub struct HealthArgs {
    /// Publish GPU health as a Node condition (Node or NodeFeature publishing)
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool, default_value = "false")]
    pub health: Option<bool>,
    /// Type of the Node condition
    #[arg(long, default_value = DEFAULT_CONDITION_TYPE, value_parser = parsed_by(condition_type))]
    pub health_condition_type: Option<String>,
    /// Comma-separated Xids that are never faults, whatever NVIDIA's Xid catalog says
    /// [default: none]
    #[arg(long, value_parser = parsed_by(xids))]
    pub health_ignore_xids: Option<BTreeSet<u64>>,
    /// Comma-separated Xids that are always faults, whatever NVIDIA's Xid catalog says
    /// [default: none]
    #[arg(long, value_parser = parsed_by(xids))]
    pub health_fatal_xids: Option<BTreeSet<u64>>,
    /// Comma-separated XID:COUNT/WINDOW: an Xid that is no fault alone is one when it comes
    /// COUNT times on one GPU within WINDOW (43:3/1m) [default: none]
    #[arg(long, value_parser = parsed_by(crate::health::judging::thresholds::parse))]
    pub health_xid_thresholds: Option<Thresholds>,
    /// GPUs this node should have: fewer through NVML is a fault (the node's
    /// nvidia.com/gpu.expected-count label, where set, wins) [default: none]
    #[arg(long, value_parser = parsed_by(expected_gpus))]
    pub health_expected_gpus: Option<Maybe<u32>>,
    /// How long an NVML call may run before health says Unknown (NvmlUnresponsive) and the
    /// labelling pass stops waiting for it
    #[arg(long, default_value = go(DEFAULT_NVML_TIMEOUT), value_parser = parsed_by(nvml_timeout))]
    pub health_nvml_timeout: Option<Duration>,
    /// How long a fault must read as gone, in every reading, before it clears without a reboot
    /// (a fault nothing can show the end of stays until reboot)
    #[arg(long, default_value = go(DEFAULT_RECOVERY_HOLD), value_parser = parsed_by(recovery_hold))]
    pub health_recovery_hold: Option<Duration>,
    /// With --allocation-mode dra or auto: the effect of the device taints on a faulty GPU's DRA
    /// devices: NoSchedule, NoExecute (also evicts the pods using them) or None
    #[arg(long, default_value = shown(TaintEffect::default()))]
    pub health_taint_effect: Option<TaintEffect>,
    /// The node's boot id file; a new boot id clears recorded faults
    #[arg(long, default_value = DEFAULT_BOOT_ID_FILE)]
    pub boot_id_file: Option<PathBuf>,
}

/// How facts are read (GFD flags).
#[derive(Debug, Default, Clone, Args)]
pub struct FactArgs {
    /// DMI product-name file; "" means unknown (default:
    /// `<sysfs root>/class/dmi/id/product_name`)
    #[arg(long)]
    pub machine_type_file: Option<String>,
    /// Fail when the driver (NVML, or CUDA on integrated GPUs) cannot be initialised
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool, default_value = "true")]
    pub fail_on_init_error: Option<bool>,
    /// Where GPUs are found: auto (as GFD decides: NVML, or CUDA on Jetson, IGX and Thor), nvml,
    /// tegra (CUDA) or vfio (GPUs bound to vfio-pci, from sysfs)
    #[arg(long, default_value = shown(Strategy::default()), value_parser = parsed_by(strategy))]
    pub device_discovery_strategy: Option<Strategy>,
    /// Driver root inside the container
    #[arg(long, visible_alias = "container-driver-root", default_value = "/driver-root")]
    pub driver_root_ctr_path: Option<String>,
}

/// What the labels say: which labels the GPUs get, and the timestamp.
#[derive(Debug, Default, Clone, Args)]
pub struct LabelOptionArgs {
    /// Which labels the GPUs get.
    #[command(flatten)]
    pub gpu: GpuLabelArgs,
    /// Leave out nvidia.com/gfd.timestamp
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool, default_value = "false")]
    pub no_timestamp: Option<bool>,
}

/// Which labels a node's GPUs get: the MIG strategy, nvlabel's own labels, the allocation's
/// profile. A group of its own because a pool's template (`nvlabel template`) takes these, and
/// not the timestamp.
#[derive(Debug, Default, Clone, Args)]
pub struct GpuLabelArgs {
    /// MIG strategy: none, single or mixed
    #[arg(long, default_value = shown(MigStrategy::None))]
    pub mig_strategy: Option<MigStrategy>,
    /// Add nvlabel's own labels (stable model name, PCI device id, physical and per-model
    /// inventory) to GFD's
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool, default_value = "false")]
    pub extended_labels: Option<bool>,
    /// How the node's GPUs are allocated: device-plugin (GFD's labels), dra (physical facts
    /// only: no sharing or MIG-strategy labels) or auto (dra while the node has a gpu.nvidia.com
    /// ResourceSlice)
    #[arg(long, default_value = shown(AllocationMode::default()))]
    pub allocation_mode: Option<AllocationMode>,
}

/// Where the sharing config comes from.
#[derive(Debug, Default, Clone, Args)]
pub struct ConfigArgs {
    /// Device-plugin config file; empty means none
    #[arg(long)]
    pub config_file: Option<String>,
    /// Directory of config files (a mounted ConfigMap, one key per file), chosen by the node label
    /// nvidia.com/device-plugin.config, else by --config-default
    #[arg(long, conflicts_with = "config_file")]
    pub config_dir: Option<PathBuf>,
    /// Key of --config-dir to use when the node has no label
    #[arg(long)]
    pub config_default: Option<String>,
}

/// Who this labeler is, and how it reaches the Kubernetes API.
#[derive(Debug, Default, Clone, Args)]
pub struct ApiArgs {
    /// This node's name, for the NodeFeature object, --sink node, --config-dir, --health and
    /// `nvlabel health clear`
    #[arg(long)]
    pub node_name: Option<String>,
    /// Namespace of the NodeFeature object and of --instance's ServiceAccount
    #[arg(long, default_value = "default")]
    pub namespace: Option<String>,
    /// This pod's name, for owner references
    #[arg(long)]
    pub pod_name: Option<String>,
    /// The kubeconfig.
    #[command(flatten)]
    pub kubeconfig: KubeconfigArgs,
    /// API client QPS
    #[arg(long, default_value = "5")]
    pub kube_api_qps: Option<f64>,
    /// API client burst
    #[arg(long, default_value = "10")]
    pub kube_api_burst: Option<u32>,
    /// This deployment's ServiceAccount (in --namespace), where several share a cluster: health
    /// is written under a field manager of its own, and `nvlabel prune --health-only --instance`
    /// removes exactly what its daemons wrote (they write nothing after) [default: none]
    #[arg(long, value_parser = parsed_by(crate::health::values::instance::name))]
    pub instance: Option<Maybe<String>>,
}

/// The kubeconfig: a group of its own because a pool's template (`nvlabel template
/// --from-cluster`) takes it, and none of the API's other flags.
#[derive(Debug, Default, Clone, Args)]
pub struct KubeconfigArgs {
    /// Kubeconfig; empty means in-cluster
    #[arg(long)]
    pub kubeconfig: Option<String>,
}

/// Where labels go.
#[derive(Debug, Default, Clone, Args)]
pub struct TargetArgs {
    /// Feature file to write; "" prints to stdout
    #[arg(long, short = 'o', visible_alias = "output", default_value = DEFAULT_OUTPUT_FILE)]
    pub output_file: Option<String>,
    /// Publish a NodeFeature object instead of a file
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool, default_value = "true")]
    pub use_node_feature_api: Option<bool>,
    /// Where labels go: `gfd` (GFD's choice: NodeFeature, feature file or stdout) or `node` (patch
    /// this Node's labels by server-side apply, no NFD)
    #[arg(long, default_value = shown(Sink::Gfd))]
    pub sink: Option<Sink>,
}

/// How what is written looks: the feature file's expiry, the printed format.
#[derive(Debug, Default, Clone, Args)]
pub struct OutputArgs {
    /// Add NFD's `# +expiry-time` to the feature file, this long after each refresh, so labels of a
    /// labeler that is gone expire (e.g. 1h)
    #[arg(long, value_parser = parsed_by(expiry))]
    pub expiry: Option<Maybe<Duration>>,
    /// Output format of printed labels: text (key=value lines) or json
    #[arg(long, default_value = shown(Format::Text))]
    pub format: Option<Format>,
}

/// How the labeler runs.
#[derive(Debug, Default, Clone, Args)]
pub struct DaemonArgs {
    /// Label once and exit
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool, default_value = "false")]
    pub oneshot: Option<bool>,
    /// Time between passes: Go duration, `infinite`, or seconds
    #[arg(long, default_value = "60s", value_parser = parsed_by(interval))]
    pub sleep_interval: Option<Interval>,
    /// Serve /healthz, /readyz and /metrics here, when running as a daemon (`host:port` or
    /// `:port`; "" for none)
    #[arg(long, default_value = ":8080")]
    pub metrics_addr: Option<String>,
    /// With --extended-labels: how long the sharing labels and the Node's allocatable may
    /// disagree (the device plugin lags a config change) before a warning
    #[arg(long, default_value = "5m")]
    pub sharing_check_grace: Option<String>,
}

/// Where facts come from.
#[derive(Debug, Default, Clone, Args)]
pub struct SourceArgs {
    /// NVML library name or path
    #[arg(long, default_value = crate::probe::DEFAULT_LIBRARY)]
    pub nvml_library: Option<PathBuf>,
    /// CUDA driver library name or path (integrated GPUs: Jetson, IGX, Thor)
    #[arg(long, default_value = crate::probe::DEFAULT_CUDA_LIBRARY)]
    pub cuda_library: Option<PathBuf>,
    /// Root of sysfs, for PCI class and vGPU facts
    #[arg(long, default_value = "/sys")]
    pub sysfs_root: Option<PathBuf>,
    /// The host's root directory, where /etc/nv_tegra_release marks a Tegra system
    #[arg(long, default_value = "/")]
    pub host_root: Option<PathBuf>,
    /// A pci.ids file naming vfio GPUs (default: the system's copy, else a built-in one)
    #[arg(long)]
    pub pci_ids: Option<PathBuf>,
    /// Read this snapshot (from `nvlabel probe`) instead of NVML and sysfs
    #[arg(long)]
    pub snapshot: Option<PathBuf>,
}

/// What `nvlabel prune` removes, and on which nodes.
#[derive(Debug, Default, Clone, Args)]
pub struct PruneArgs {
    /// Remove only what --health left on the Node (its GPU health condition, fault record and
    /// device taints), not the labels (what the chart's uninstall runs)
    #[arg(long)]
    pub health_only: bool,
    /// With --health-only: on every node, instead of --node-name's
    #[arg(long, conflicts_with = "node_name")]
    pub all_nodes: bool,
}

/// Which GPUs `nvlabel health clear` clears.
#[derive(Debug, Default, Clone, Args)]
pub struct ClearArgs {
    /// A GPU whose faults to clear, by index or UUID (repeat it, or list several with commas);
    /// without it, every fault of the node [default: none]
    #[arg(long)]
    pub gpu: Vec<String>,
}

/// How logs look (every command).
#[derive(Debug, Default, Clone, Args)]
pub struct LogArgs {
    /// Log format: text or json
    #[arg(long, default_value = shown(LogFormat::default()))]
    pub log_format: Option<LogFormat>,
}
