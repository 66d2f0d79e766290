//! The command line: clap's definitions of GFD's flags and nvlabel's own, grouped by what they
//! are about, so that each subcommand takes only the groups it uses. Values are checked here
//! only for spelling; [`super::settings`] resolves them against env, the config file and
//! defaults. Each flag's environment variables are declared once, in [`FLAG_ENV`]: the
//! resolver reads them and `--help` shows them.

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use std::path::PathBuf;

/// Each flag's environment variables, in precedence order (the first one defined wins, even
/// when empty, as urfave/cli does in GFD). The only place env names are written.
pub const FLAG_ENV: &[(&str, &[&str])] = &[
    ("mig-strategy", &["GFD_MIG_STRATEGY", "MIG_STRATEGY"]),
    ("fail-on-init-error", &["GFD_FAIL_ON_INIT_ERROR", "FAIL_ON_INIT_ERROR"]),
    ("oneshot", &["GFD_ONESHOT"]),
    ("no-timestamp", &["GFD_NO_TIMESTAMP"]),
    ("sleep-interval", &["GFD_SLEEP_INTERVAL"]),
    ("output-file", &["GFD_OUTPUT_FILE"]),
    ("machine-type-file", &["GFD_MACHINE_TYPE_FILE"]),
    ("config-file", &["GFD_CONFIG_FILE", "CONFIG_FILE"]),
    ("use-node-feature-api", &["GFD_USE_NODE_FEATURE_API", "USE_NODE_FEATURE_API"]),
    ("device-discovery-strategy", &["DEVICE_DISCOVERY_STRATEGY"]),
    ("driver-root-ctr-path", &["DRIVER_ROOT_CTR_PATH", "CONTAINER_DRIVER_ROOT"]),
    ("kubeconfig", &["KUBECONFIG"]),
    ("kube-api-qps", &["KUBE_API_QPS"]),
    ("kube-api-burst", &["KUBE_API_BURST"]),
    // POD_NAMESPACE (what manifests usually pass) after GFD's NAMESPACE.
    ("namespace", &["NAMESPACE", "POD_NAMESPACE"]),
    ("node-name", &["NODE_NAME"]),
    ("pod-name", &["POD_NAME"]),
    ("config-dir", &["NVLABEL_CONFIG_DIR"]),
    ("config-default", &["NVLABEL_CONFIG_DEFAULT"]),
    ("expiry", &["NVLABEL_EXPIRY"]),
    ("sink", &["NVLABEL_SINK"]),
    ("metrics-addr", &["NVLABEL_METRICS_ADDR"]),
    ("format", &["NVLABEL_FORMAT"]),
    ("nvml-library", &["NVLABEL_NVML_LIBRARY"]),
    ("sysfs-root", &["NVLABEL_SYSFS_ROOT"]),
    ("snapshot", &["NVLABEL_SNAPSHOT"]),
    ("log-format", &["NVLABEL_LOG_FORMAT"]),
    ("extended-labels", &["NVLABEL_EXTENDED_LABELS"]),
    ("sharing-check-grace", &["NVLABEL_SHARING_CHECK_GRACE"]),
    ("health", &["NVLABEL_HEALTH"]),
    ("health-condition-type", &["NVLABEL_HEALTH_CONDITION_TYPE"]),
    ("health-ignore-xids", &["NVLABEL_HEALTH_IGNORE_XIDS"]),
    ("boot-id-file", &["NVLABEL_BOOT_ID_FILE"]),
];

/// The env names of `flag` (its long name).
pub fn env_names(flag: &str) -> &'static [&'static str] {
    FLAG_ENV.iter().find(|(f, _)| *f == flag).map_or(&[], |(_, names)| names)
}

/// Every environment variable nvlabel reads: the flags' and the log filter.
pub fn env_vars() -> impl Iterator<Item = &'static str> {
    FLAG_ENV.iter().flat_map(|(_, names)| names.iter().copied()).chain(["RUST_LOG"])
}

/// The clap command with each flag's env names appended to its help, in every subcommand.
pub fn command() -> clap::Command {
    fn decorate(cmd: clap::Command) -> clap::Command {
        let ids: Vec<String> = cmd.get_arguments().filter_map(|a| a.get_long().map(String::from)).collect();
        let mut cmd = ids.iter().fold(cmd, |cmd, long| {
            let names = env_names(long);
            if names.is_empty() {
                return cmd;
            }
            let id = cmd.get_arguments().find(|a| a.get_long() == Some(long)).unwrap().get_id().clone();
            cmd.mut_arg(id, |a| {
                let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
                a.help(format!("{help} [env: {}]", names.join(", ")))
            })
        });
        let subs: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_string()).collect();
        for name in subs {
            cmd = cmd.mut_subcommand(name, decorate);
        }
        cmd
    }
    decorate(Cli::command())
}

impl Cli {
    /// Parses the process's arguments (clap exits with its message on an error, as usual).
    pub fn from_args() -> Cli {
        Cli::from_arg_matches(&command().get_matches()).unwrap_or_else(|e| e.exit())
    }

    /// Parses `args` (tests; `args[0]` is the program name).
    pub fn try_from_args<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        Cli::from_arg_matches(&command().try_get_matches_from(args)?)
    }
}

/// The nvlabel command line. Without a subcommand it labels the node (GFD's flags); each
/// subcommand takes only the flags it uses, after its name.
#[derive(Debug, Parser)]
#[command(name = "nvlabel", version, about = "Label Kubernetes nodes with their NVIDIA GPUs' features")]
#[command(args_conflicts_with_subcommands = true)]
pub struct Cli {
    /// What to do; without a command, label the node.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Labelling options (GFD's flags).
    #[command(flatten)]
    pub label: LabelArgs,
    /// Where facts come from.
    #[command(flatten)]
    pub source: SourceArgs,
}

/// Subcommands, each with only the flags it uses.
#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Print the probe's snapshot of this node as YAML (input for `--snapshot`).
    Probe {
        /// How facts are read.
        #[command(flatten)]
        facts: FactArgs,
        /// Where facts come from.
        #[command(flatten)]
        source: SourceArgs,
    },
    /// Remove what nvlabel published: its Node labels (`--sink node`), its NodeFeature object
    /// (`--use-node-feature-api`), or the feature file (only if nvlabel wrote it).
    Prune {
        /// The config file may choose the target (`flags.gfd.outputFile`).
        #[command(flatten)]
        config: ConfigArgs,
        /// The API.
        #[command(flatten)]
        api: ApiArgs,
        /// The target.
        #[command(flatten)]
        target: TargetArgs,
        /// Logs.
        #[command(flatten)]
        source: SourceArgs,
    },
    /// Run as an NFD local-source hook (`source.d/`): print feature-file lines to stdout and exit
    /// 0; without a driver, print nothing. No timestamp, since NFD runs hooks on every rescan.
    Hook {
        /// How facts are read.
        #[command(flatten)]
        facts: FactArgs,
        /// What the labels say.
        #[command(flatten)]
        config: ConfigArgs,
        /// The API, for the node's config label with `--config-dir`.
        #[command(flatten)]
        api: ApiArgs,
        /// Where facts come from.
        #[command(flatten)]
        source: SourceArgs,
    },
    /// Print each GPU's health once and exit 0 (healthy), 1 (a fault) or 2 (NVML cannot tell),
    /// as node-problem-detector's custom plugins do.
    Health {
        /// How facts are read.
        #[command(flatten)]
        facts: FactArgs,
        /// What counts as a fault.
        #[command(flatten)]
        health: HealthArgs,
        /// Where facts come from.
        #[command(flatten)]
        source: SourceArgs,
    },
}

/// Which subcommand, without its flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandKind {
    /// `nvlabel probe`.
    Probe,
    /// `nvlabel prune`.
    Prune,
    /// `nvlabel hook`.
    Hook,
    /// `nvlabel health`.
    Health,
}

impl Cli {
    /// The subcommand, and every flag given (the subcommand's moved into the top-level groups),
    /// so that one resolver serves every command.
    pub fn split(self) -> (Option<CommandKind>, Cli) {
        let Cli { command, mut label, source } = self;
        let (kind, source) = match command {
            None => (None, source),
            Some(Command::Probe { facts, source }) => {
                label.facts = facts;
                (Some(CommandKind::Probe), source)
            }
            Some(Command::Prune { config, api, target, source }) => {
                (label.config, label.api, label.target) = (config, api, target);
                (Some(CommandKind::Prune), source)
            }
            Some(Command::Hook { facts, config, api, source }) => {
                (label.facts, label.config, label.api) = (facts, config, api);
                (Some(CommandKind::Hook), source)
            }
            Some(Command::Health { facts, health, source }) => {
                (label.facts, label.health) = (facts, health);
                (Some(CommandKind::Health), source)
            }
        };
        (kind, Cli { command: None, label, source })
    }
}

/// Parses GFD's booleans (`strconv.ParseBool`): 1 t T TRUE true True 0 f F FALSE false False.
pub fn parse_bool(s: &str) -> Result<bool, String> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!("invalid boolean {s:?}: use true or false")),
    }
}

/// All of the daemon's flags; defaults and env are applied by [`Settings::resolve`].
#[derive(Debug, Default, Clone, Args)]
pub struct LabelArgs {
    /// How facts are read.
    #[command(flatten)]
    pub facts: FactArgs,
    /// What the labels say.
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Identity and API.
    #[command(flatten)]
    pub api: ApiArgs,
    /// Where labels go.
    #[command(flatten)]
    pub target: TargetArgs,
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
    /// Publish GPU health as a Node condition (Node or NodeFeature publishing) [default: false]
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool)]
    pub health: Option<bool>,
    /// Type of the Node condition [default: GPUHealthy]
    #[arg(long)]
    pub health_condition_type: Option<String>,
    /// Comma-separated Xids that are not faults; "" makes every Xid one
    /// [default: 13,31,43,45,68,109]
    #[arg(long)]
    pub health_ignore_xids: Option<String>,
    /// The node's boot id file; a new boot id clears recorded faults
    /// [default: /proc/sys/kernel/random/boot_id]
    #[arg(long)]
    pub boot_id_file: Option<PathBuf>,
}

/// How facts are read (GFD flags).
#[derive(Debug, Default, Clone, Args)]
pub struct FactArgs {
    /// DMI product-name file; "" means unknown
    /// [default: <sysfs root>/class/dmi/id/product_name]
    #[arg(long)]
    pub machine_type_file: Option<String>,
    /// Fail when NVML cannot be initialised [default: true]
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool)]
    pub fail_on_init_error: Option<bool>,
    /// auto, nvml, tegra or vfio [default: auto]
    #[arg(long)]
    pub device_discovery_strategy: Option<String>,
    /// Driver root inside the container (accepted for GFD compatibility; unused, as in GFD)
    /// [default: /driver-root]
    #[arg(long, visible_alias = "container-driver-root")]
    pub driver_root_ctr_path: Option<String>,
}

/// What the labels say: MIG strategy, timestamp, the sharing config.
#[derive(Debug, Default, Clone, Args)]
pub struct ConfigArgs {
    /// MIG strategy: none, single or mixed [default: none]
    #[arg(long, value_parser = ["none", "single", "mixed"])]
    pub mig_strategy: Option<String>,
    /// Leave out nvidia.com/gfd.timestamp [default: false]
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool)]
    pub no_timestamp: Option<bool>,
    /// Device-plugin config file
    #[arg(long)]
    pub config_file: Option<String>,
    /// Directory of config files (a mounted ConfigMap, one key per file), chosen by the node label
    /// nvidia.com/device-plugin.config
    #[arg(long, conflicts_with = "config_file")]
    pub config_dir: Option<PathBuf>,
    /// Key of --config-dir to use when the node has no label
    #[arg(long)]
    pub config_default: Option<String>,
    /// Add nvlabel's own labels (stable model name, PCI device id, physical and per-model
    /// inventory) to GFD's [default: false]
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool)]
    pub extended_labels: Option<bool>,
}

/// Who this labeler is, and how it reaches the Kubernetes API.
#[derive(Debug, Default, Clone, Args)]
pub struct ApiArgs {
    /// This node's name
    #[arg(long)]
    pub node_name: Option<String>,
    /// Namespace of the NodeFeature object [default: default]
    #[arg(long)]
    pub namespace: Option<String>,
    /// This pod's name, for owner references
    #[arg(long)]
    pub pod_name: Option<String>,
    /// Kubeconfig; empty means in-cluster
    #[arg(long)]
    pub kubeconfig: Option<String>,
    /// API client QPS [default: 5]
    #[arg(long)]
    pub kube_api_qps: Option<f64>,
    /// API client burst [default: 10]
    #[arg(long)]
    pub kube_api_burst: Option<u32>,
}

/// Where labels go.
#[derive(Debug, Default, Clone, Args)]
pub struct TargetArgs {
    /// Feature file to write; "" prints to stdout
    /// [default: /etc/kubernetes/node-feature-discovery/features.d/gfd]
    #[arg(long, short = 'o', visible_alias = "output")]
    pub output_file: Option<String>,
    /// Publish a NodeFeature object instead of a file [default: true]
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool)]
    pub use_node_feature_api: Option<bool>,
    /// Where labels go: `gfd` (GFD's choice: NodeFeature, feature file or stdout) or `node` (patch
    /// this Node's labels by server-side apply, no NFD) [default: gfd]
    #[arg(long, value_parser = ["gfd", "node"])]
    pub sink: Option<String>,
    /// Add NFD's `# +expiry-time` to the feature file, this long after each refresh, so labels of a
    /// labeler that is gone expire (e.g. 1h)
    #[arg(long)]
    pub expiry: Option<String>,
    /// Output format of printed labels: text (key=value lines) or json [default: text]
    #[arg(long, value_parser = ["text", "json"])]
    pub format: Option<String>,
}

/// How the labeler runs.
#[derive(Debug, Default, Clone, Args)]
pub struct DaemonArgs {
    /// Label once and exit [default: false]
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool)]
    pub oneshot: Option<bool>,
    /// Time between passes: Go duration, `infinite`, or seconds [default: 60s]
    #[arg(long)]
    pub sleep_interval: Option<String>,
    /// Serve /healthz, /readyz and /metrics here (`host:port` or `:port`; "" for none)
    /// [default: :8080 when running as a daemon, none otherwise]
    #[arg(long)]
    pub metrics_addr: Option<String>,
    /// With --extended-labels: how long the sharing labels and the Node's allocatable may
    /// disagree (the device plugin lags a config change) before a warning [default: 5m]
    #[arg(long)]
    pub sharing_check_grace: Option<String>,
}

/// Where facts come from, and how logs look (every command).
#[derive(Debug, Default, Clone, Args)]
pub struct SourceArgs {
    /// NVML library name or path [default: libnvidia-ml.so.1]
    #[arg(long)]
    pub nvml_library: Option<PathBuf>,
    /// Root of sysfs, for PCI class and vGPU facts [default: /sys]
    #[arg(long)]
    pub sysfs_root: Option<PathBuf>,
    /// Read this snapshot (from `nvlabel probe`) instead of NVML and sysfs
    #[arg(long)]
    pub snapshot: Option<PathBuf>,
    /// Log format: text or json [default: text]
    #[arg(long, value_parser = ["text", "json"])]
    pub log_format: Option<String>,
}
