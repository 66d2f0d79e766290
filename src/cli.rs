//! Command line and environment, with GFD's flag names, env names, defaults and precedence:
//! command line > env (the first defined name of each flag's list, even when empty) > default.
//!
//! clap parses only the command line; [`Settings::resolve`] layers the environment on top
//! through a lookup function, so tests never touch the process environment.

use crate::config::FileFlags;
use crate::duration::{parse_interval, DurationError, Interval};
use crate::labels::MigStrategy;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::{Path, PathBuf};

/// GFD's default feature file.
pub const DEFAULT_OUTPUT_FILE: &str = "/etc/kubernetes/node-feature-discovery/features.d/gfd";
/// Where the DMI product name lives under sysfs.
const MACHINE_TYPE_UNDER_SYSFS: &str = "class/dmi/id/product_name";

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
}

/// How facts are read (GFD flags).
#[derive(Debug, Default, Clone, Args)]
pub struct FactArgs {
    /// DMI product-name file; "" means unknown [env: GFD_MACHINE_TYPE_FILE]
    /// [default: <sysfs root>/class/dmi/id/product_name]
    #[arg(long)]
    pub machine_type_file: Option<String>,
    /// Fail when NVML cannot be initialised [env: GFD_FAIL_ON_INIT_ERROR, FAIL_ON_INIT_ERROR] [default: true]
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool)]
    pub fail_on_init_error: Option<bool>,
    /// auto, nvml, tegra or vfio [env: DEVICE_DISCOVERY_STRATEGY] [default: auto]
    #[arg(long)]
    pub device_discovery_strategy: Option<String>,
    /// Driver root inside the container (accepted for GFD compatibility; unused, as in GFD)
    /// [env: DRIVER_ROOT_CTR_PATH, CONTAINER_DRIVER_ROOT] [default: /driver-root]
    #[arg(long, visible_alias = "container-driver-root")]
    pub driver_root_ctr_path: Option<String>,
}

/// What the labels say: MIG strategy, timestamp, the sharing config.
#[derive(Debug, Default, Clone, Args)]
pub struct ConfigArgs {
    /// MIG strategy: none, single or mixed [env: GFD_MIG_STRATEGY, MIG_STRATEGY] [default: none]
    #[arg(long, value_enum)]
    pub mig_strategy: Option<MigStrategy>,
    /// Leave out nvidia.com/gfd.timestamp [env: GFD_NO_TIMESTAMP] [default: false]
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool)]
    pub no_timestamp: Option<bool>,
    /// Device-plugin config file [env: GFD_CONFIG_FILE, CONFIG_FILE]
    #[arg(long)]
    pub config_file: Option<String>,
    /// Directory of config files (a mounted ConfigMap, one key per file), chosen by the node label
    /// nvidia.com/device-plugin.config [env: NVLABEL_CONFIG_DIR]
    #[arg(long, conflicts_with = "config_file")]
    pub config_dir: Option<PathBuf>,
    /// Key of --config-dir to use when the node has no label [env: NVLABEL_CONFIG_DEFAULT]
    #[arg(long)]
    pub config_default: Option<String>,
}

/// Who this labeler is, and how it reaches the Kubernetes API.
#[derive(Debug, Default, Clone, Args)]
pub struct ApiArgs {
    /// This node's name [env: NODE_NAME]
    #[arg(long)]
    pub node_name: Option<String>,
    /// Namespace of the NodeFeature object [env: NAMESPACE] [default: default]
    #[arg(long)]
    pub namespace: Option<String>,
    /// This pod's name, for owner references [env: POD_NAME]
    #[arg(long)]
    pub pod_name: Option<String>,
    /// Kubeconfig; empty means in-cluster [env: KUBECONFIG]
    #[arg(long)]
    pub kubeconfig: Option<String>,
    /// API client QPS [env: KUBE_API_QPS] [default: 5]
    #[arg(long)]
    pub kube_api_qps: Option<f64>,
    /// API client burst [env: KUBE_API_BURST] [default: 10]
    #[arg(long)]
    pub kube_api_burst: Option<u32>,
}

/// Where labels go.
#[derive(Debug, Default, Clone, Args)]
pub struct TargetArgs {
    /// Feature file to write; "" prints to stdout [env: GFD_OUTPUT_FILE]
    /// [default: /etc/kubernetes/node-feature-discovery/features.d/gfd]
    #[arg(long, short = 'o', visible_alias = "output")]
    pub output_file: Option<String>,
    /// Publish a NodeFeature object instead of a file [env: GFD_USE_NODE_FEATURE_API, USE_NODE_FEATURE_API] [default: true]
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool)]
    pub use_node_feature_api: Option<bool>,
    /// Where labels go: `gfd` (GFD's choice: NodeFeature, feature file or stdout) or `node` (patch
    /// this Node's labels by server-side apply, no NFD) [env: NVLABEL_SINK] [default: gfd]
    #[arg(long, value_enum)]
    pub sink: Option<Sink>,
    /// Add NFD's `# +expiry-time` to the feature file, this long after each refresh, so labels of a
    /// labeler that is gone expire [env: NVLABEL_EXPIRY] (e.g. 1h)
    #[arg(long)]
    pub expiry: Option<String>,
    /// Output format of printed labels: text (key=value lines) or json [env: NVLABEL_FORMAT] [default: text]
    #[arg(long, value_enum)]
    pub format: Option<Format>,
}

/// How the labeler runs.
#[derive(Debug, Default, Clone, Args)]
pub struct DaemonArgs {
    /// Label once and exit [env: GFD_ONESHOT] [default: false]
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool)]
    pub oneshot: Option<bool>,
    /// Time between passes: Go duration, `infinite`, or seconds [env: GFD_SLEEP_INTERVAL] [default: 60s]
    #[arg(long)]
    pub sleep_interval: Option<String>,
    /// Serve /healthz, /readyz and /metrics here (`host:port` or `:port`; "" for none)
    /// [env: NVLABEL_METRICS_ADDR] [default: :8080 when running as a daemon, none otherwise]
    #[arg(long)]
    pub metrics_addr: Option<String>,
}

/// Where facts come from, and how logs look (every command).
#[derive(Debug, Default, Clone, Args)]
pub struct SourceArgs {
    /// NVML library name or path [env: NVLABEL_NVML_LIBRARY] [default: libnvidia-ml.so.1]
    #[arg(long)]
    pub nvml_library: Option<PathBuf>,
    /// Root of sysfs, for PCI class and vGPU facts [env: NVLABEL_SYSFS_ROOT] [default: /sys]
    #[arg(long)]
    pub sysfs_root: Option<PathBuf>,
    /// Read this snapshot (from `nvlabel probe`) instead of NVML and sysfs [env: NVLABEL_SNAPSHOT]
    #[arg(long)]
    pub snapshot: Option<PathBuf>,
    /// Log format: text or json [env: NVLABEL_LOG_FORMAT] [default: text]
    #[arg(long, value_enum)]
    pub log_format: Option<LogFormat>,
}

/// Where labels are published.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Sink {
    /// As GFD: a NodeFeature object with `--use-node-feature-api`, else the feature file or stdout.
    Gfd,
    /// This Node's labels, by server-side apply.
    Node,
}

/// How printed labels look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// `key=value` lines, NFD's feature-file format.
    Text,
    /// One JSON object, keys sorted.
    Json,
}

/// How log lines look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable.
    Text,
    /// One JSON object per line.
    Json,
}

/// `--device-discovery-strategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscoveryStrategy {
    /// NVML when it loads.
    Auto,
    /// NVML.
    Nvml,
}

/// Everything resolved: command line over env over defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// `--mig-strategy`.
    pub mig_strategy: MigStrategy,
    /// `--fail-on-init-error`.
    pub fail_on_init_error: bool,
    /// `--oneshot`.
    pub oneshot: bool,
    /// `--no-timestamp`.
    pub no_timestamp: bool,
    /// `--sleep-interval`.
    pub sleep_interval: Interval,
    /// `--output-file`; empty means stdout.
    pub output_file: String,
    /// `--expiry`.
    pub expiry: Option<std::time::Duration>,
    /// `--machine-type-file`; empty means none.
    pub machine_type_file: PathBuf,
    /// `--config-file`.
    pub config_file: Option<PathBuf>,
    /// `--config-dir`.
    pub config_dir: Option<PathBuf>,
    /// `--config-default`.
    pub config_default: Option<String>,
    /// `--use-node-feature-api`.
    pub use_node_feature_api: bool,
    /// `--device-discovery-strategy`.
    pub device_discovery_strategy: DiscoveryStrategy,
    /// `--namespace`.
    pub namespace: String,
    /// `--node-name`.
    pub node_name: Option<String>,
    /// `--pod-name`.
    pub pod_name: Option<String>,
    /// `--kubeconfig`.
    pub kubeconfig: Option<String>,
    /// `--kube-api-qps`.
    pub kube_api_qps: f64,
    /// `--kube-api-burst`.
    pub kube_api_burst: u32,
    /// `--format`.
    pub format: Format,
    /// `--sink`.
    pub sink: Sink,
    /// `--metrics-addr` as given (`None`: not given).
    pub metrics_addr: Option<String>,
    /// `--nvml-library`.
    pub nvml_library: PathBuf,
    /// `--sysfs-root`.
    pub sysfs_root: PathBuf,
    /// `--snapshot`.
    pub snapshot: Option<PathBuf>,
    /// `--log-format`.
    pub log_format: LogFormat,
    /// Notes for the log about how values were read (bare-number durations).
    pub notes: Vec<String>,
}

/// A flag or env value that is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CliError {
    /// A bad value, from the command line or from an env var.
    #[error("invalid value {value:?} for {origin}: {reason}")]
    Invalid {
        /// `flag --x` or `environment variable "X" (flag --x)`.
        origin: String,
        /// The value.
        value: String,
        /// What is wrong.
        reason: String,
    },
}

/// One flag's value and where it came from.
struct Found {
    value: String,
    origin: String,
}

/// Every environment variable nvlabel reads (GFD's names first, then nvlabel's own).
pub const ENV_VARS: &[&str] = &[
    "GFD_MIG_STRATEGY",
    "MIG_STRATEGY",
    "GFD_FAIL_ON_INIT_ERROR",
    "FAIL_ON_INIT_ERROR",
    "GFD_ONESHOT",
    "GFD_NO_TIMESTAMP",
    "GFD_SLEEP_INTERVAL",
    "GFD_OUTPUT_FILE",
    "GFD_MACHINE_TYPE_FILE",
    "GFD_CONFIG_FILE",
    "CONFIG_FILE",
    "GFD_USE_NODE_FEATURE_API",
    "USE_NODE_FEATURE_API",
    "DEVICE_DISCOVERY_STRATEGY",
    "DRIVER_ROOT_CTR_PATH",
    "CONTAINER_DRIVER_ROOT",
    "KUBECONFIG",
    "KUBE_API_QPS",
    "KUBE_API_BURST",
    "NAMESPACE",
    "POD_NAMESPACE",
    "NODE_NAME",
    "POD_NAME",
    "NVLABEL_CONFIG_DIR",
    "NVLABEL_CONFIG_DEFAULT",
    "NVLABEL_EXPIRY",
    "NVLABEL_SINK",
    "NVLABEL_METRICS_ADDR",
    "NVLABEL_FORMAT",
    "NVLABEL_NVML_LIBRARY",
    "NVLABEL_SYSFS_ROOT",
    "NVLABEL_SNAPSHOT",
    "NVLABEL_LOG_FORMAT",
    "RUST_LOG",
];

/// The env lookup used by [`Settings::resolve`].
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

fn from_env(env: Env, flag: &str, names: &[&str]) -> Option<Found> {
    // urfave/cli: the first *defined* variable wins, even when it is empty.
    names.iter().find_map(|n| {
        env(n).map(|value| Found { value, origin: format!("environment variable {n:?} (flag --{flag})") })
    })
}

fn invalid(found: &Found, reason: impl ToString) -> CliError {
    CliError::Invalid { origin: found.origin.clone(), value: found.value.clone(), reason: reason.to_string() }
}

/// A boolean from the command line or env; `None` when neither sets it.
fn bool_flag(cli: Option<bool>, env: Env, flag: &str, names: &[&str]) -> Result<Option<bool>, CliError> {
    if let Some(v) = cli {
        return Ok(Some(v));
    }
    match from_env(env, flag, names) {
        // urfave: an empty boolean env var means false.
        Some(f) if f.value.is_empty() => Ok(Some(false)),
        Some(f) => parse_bool(&f.value).map(Some).map_err(|e| invalid(&f, e)),
        None => Ok(None),
    }
}

fn string_flag(cli: Option<String>, env: Env, flag: &str, names: &[&str]) -> Option<String> {
    cli.or_else(|| from_env(env, flag, names).map(|f| f.value))
}

/// A string flag as a [`Found`], remembering where it came from for error messages.
fn found_flag(cli: Option<String>, env: Env, flag: &str, names: &[&str]) -> Option<Found> {
    cli.map(|value| Found { value, origin: format!("flag --{flag}") }).or_else(|| from_env(env, flag, names))
}

fn number_flag<T: std::str::FromStr>(
    cli: Option<T>,
    env: Env,
    flag: &str,
    names: &[&str],
    default: T,
) -> Result<T, CliError>
where
    T::Err: std::fmt::Display,
{
    if let Some(v) = cli {
        return Ok(v);
    }
    match from_env(env, flag, names) {
        // urfave ignores empty numeric env vars.
        Some(f) if f.value.is_empty() => Ok(default),
        Some(f) => f.value.parse().map_err(|e| invalid(&f, e)),
        None => Ok(default),
    }
}

/// The flags section of a config file and where it came from.
pub type FileLayer<'a> = Option<(&'a Path, &'a FileFlags)>;

/// Parses `host:port`, or Go's `:port` for every address.
pub fn parse_listen_addr(text: &str) -> Result<std::net::SocketAddr, String> {
    let full = if text.starts_with(':') { format!("0.0.0.0{text}") } else { text.to_string() };
    full.parse().map_err(|e| format!("invalid listen address {text:?}: {e} (use host:port or :port)"))
}

impl Settings {
    /// `--config-file` from the command line or env (`GFD_CONFIG_FILE`, `CONFIG_FILE`).
    pub fn config_file_path(cli: &Cli, env: Env) -> Option<PathBuf> {
        string_flag(
            cli.label.config.config_file.clone(),
            env,
            "config-file",
            &["GFD_CONFIG_FILE", "CONFIG_FILE"],
        )
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
    }

    /// Resolves the command line against an env lookup (`std::env::var(..).ok()` in `main`).
    pub fn resolve(cli: &Cli, env: Env) -> Result<Settings, CliError> {
        Self::resolve_with(cli, env, None)
    }

    /// Resolves command line > env > config file `flags` > default.
    pub fn resolve_with(cli: &Cli, env: Env, file: FileLayer) -> Result<Settings, CliError> {
        let a = &cli.label;
        let s = &cli.source;
        let mut notes = Vec::new();
        let empty = FileFlags::default();
        let (file_path, ff) = match file {
            Some((p, f)) => (p.display().to_string(), f),
            None => (String::new(), &empty),
        };
        let gfd = ff.gfd.clone().unwrap_or_default();
        let in_file = |field: &str, value: &str| Found {
            value: value.to_string(),
            origin: format!("{field} in config file {file_path}"),
        };

        let strategy = found_flag(
            a.config.mig_strategy.map(|m| m.as_str().to_string()),
            env,
            "mig-strategy",
            &["GFD_MIG_STRATEGY", "MIG_STRATEGY"],
        )
        .or_else(|| ff.mig_strategy.as_deref().map(|v| in_file("flags.migStrategy", v)));
        let mig_strategy = match strategy {
            Some(f) => MigStrategy::from_str(&f.value, false)
                .map_err(|_| invalid(&f, "use none, single or mixed"))?,
            None => MigStrategy::None,
        };

        let sleep =
            match found_flag(a.daemon.sleep_interval.clone(), env, "sleep-interval", &["GFD_SLEEP_INTERVAL"])
            {
                // urfave ignores an empty env value for this flag.
                Some(f) if f.value.is_empty() && f.origin.starts_with("environment") => None,
                other => other,
            };
        let sleep_interval = match (sleep, gfd.sleep_interval) {
            (Some(f), _) => {
                let (interval, bare) = parse_interval(&f.value).map_err(|e: DurationError| invalid(&f, e))?;
                if bare {
                    notes.push(format!("sleep interval {:?} from {} read as {interval}", f.value, f.origin));
                }
                interval
            }
            (None, Some(interval)) => interval,
            (None, None) => Interval::Every(std::time::Duration::from_secs(60)),
        };

        let discovery = found_flag(
            a.facts.device_discovery_strategy.clone(),
            env,
            "device-discovery-strategy",
            &["DEVICE_DISCOVERY_STRATEGY"],
        )
        .or_else(|| {
            ff.device_discovery_strategy.as_deref().map(|v| in_file("flags.deviceDiscoveryStrategy", v))
        });
        let device_discovery_strategy = match discovery {
            None => DiscoveryStrategy::Auto,
            Some(f) => match f.value.as_str() {
                "auto" => DiscoveryStrategy::Auto,
                "nvml" => DiscoveryStrategy::Nvml,
                "tegra" | "vfio" => {
                    return Err(invalid(&f, "nvlabel reads GPUs through NVML only; use auto or nvml"));
                }
                _ => {
                    return Err(invalid(
                        &f,
                        format!("invalid --device-discovery-strategy option {}", f.value),
                    ))
                }
            },
        };

        let sysfs_root = s
            .sysfs_root
            .clone()
            .or_else(|| env("NVLABEL_SYSFS_ROOT").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("/sys"));
        let machine_type_file = string_flag(
            a.facts.machine_type_file.clone(),
            env,
            "machine-type-file",
            &["GFD_MACHINE_TYPE_FILE"],
        )
        .or(gfd.machine_type_file.clone())
        .map(PathBuf::from)
        .unwrap_or_else(|| sysfs_root.join(MACHINE_TYPE_UNDER_SYSFS));

        let format = match (a.target.format, env("NVLABEL_FORMAT")) {
            (Some(f), _) => f,
            (None, Some(v)) => Format::from_str(&v, false).map_err(|_| CliError::Invalid {
                origin: "environment variable \"NVLABEL_FORMAT\" (flag --format)".into(),
                value: v.clone(),
                reason: "use text or json".into(),
            })?,
            (None, None) => Format::Text,
        };
        let log_format = match (s.log_format, env("NVLABEL_LOG_FORMAT")) {
            (Some(f), _) => f,
            (None, Some(v)) => LogFormat::from_str(&v, false).map_err(|_| CliError::Invalid {
                origin: "environment variable \"NVLABEL_LOG_FORMAT\" (flag --log-format)".into(),
                value: v.clone(),
                reason: "use text or json".into(),
            })?,
            (None, None) => LogFormat::Text,
        };
        let non_empty = |v: Option<String>| v.filter(|v| !v.is_empty());
        let expiry = match a
            .target
            .expiry
            .clone()
            .map(|value| Found { value, origin: "flag --expiry".into() })
            .or_else(|| {
                env("NVLABEL_EXPIRY").filter(|v| !v.is_empty()).map(|value| Found {
                    value,
                    origin: "environment variable \"NVLABEL_EXPIRY\" (flag --expiry)".into(),
                })
            }) {
            None => None,
            Some(f) => match parse_interval(&f.value).map_err(|e| invalid(&f, e))? {
                (Interval::Every(d), _) if !d.is_zero() => Some(d),
                _ => return Err(invalid(&f, "use a positive duration such as 1h")),
            },
        };
        let sink = match (a.target.sink, env("NVLABEL_SINK")) {
            (Some(s), _) => s,
            (None, Some(v)) => Sink::from_str(&v, false).map_err(|_| CliError::Invalid {
                origin: "environment variable \"NVLABEL_SINK\" (flag --sink)".into(),
                value: v.clone(),
                reason: "use gfd or node".into(),
            })?,
            (None, None) => Sink::Gfd,
        };
        let fail_names = ["GFD_FAIL_ON_INIT_ERROR", "FAIL_ON_INIT_ERROR"];
        let nfd_names = ["GFD_USE_NODE_FEATURE_API", "USE_NODE_FEATURE_API"];

        Ok(Settings {
            mig_strategy,
            fail_on_init_error: bool_flag(
                a.facts.fail_on_init_error,
                env,
                "fail-on-init-error",
                &fail_names,
            )?
            .or(ff.fail_on_init_error)
            .unwrap_or(true),
            oneshot: bool_flag(a.daemon.oneshot, env, "oneshot", &["GFD_ONESHOT"])?
                .or(gfd.oneshot)
                .unwrap_or(false),
            no_timestamp: bool_flag(a.config.no_timestamp, env, "no-timestamp", &["GFD_NO_TIMESTAMP"])?
                .or(gfd.no_timestamp)
                .unwrap_or(false),
            sleep_interval,
            output_file: string_flag(a.target.output_file.clone(), env, "output-file", &["GFD_OUTPUT_FILE"])
                .or(gfd.output_file.clone())
                .unwrap_or_else(|| DEFAULT_OUTPUT_FILE.into()),
            expiry,
            machine_type_file,
            config_file: Self::config_file_path(cli, env),
            config_dir: a
                .config
                .config_dir
                .clone()
                .or_else(|| non_empty(env("NVLABEL_CONFIG_DIR")).map(PathBuf::from)),
            config_default: a
                .config
                .config_default
                .clone()
                .or_else(|| non_empty(env("NVLABEL_CONFIG_DEFAULT"))),
            use_node_feature_api: bool_flag(
                a.target.use_node_feature_api,
                env,
                "use-node-feature-api",
                &nfd_names,
            )?
            .or(ff.use_node_feature_api)
            .unwrap_or(true),
            device_discovery_strategy,
            // POD_NAMESPACE (what manifests usually pass) after GFD's NAMESPACE.
            namespace: string_flag(
                a.api.namespace.clone(),
                env,
                "namespace",
                &["NAMESPACE", "POD_NAMESPACE"],
            )
            .unwrap_or_else(|| "default".into()),
            node_name: non_empty(string_flag(a.api.node_name.clone(), env, "node-name", &["NODE_NAME"])),
            pod_name: non_empty(string_flag(a.api.pod_name.clone(), env, "pod-name", &["POD_NAME"])),
            kubeconfig: non_empty(string_flag(a.api.kubeconfig.clone(), env, "kubeconfig", &["KUBECONFIG"])),
            kube_api_qps: number_flag(a.api.kube_api_qps, env, "kube-api-qps", &["KUBE_API_QPS"], 5.0)?,
            kube_api_burst: number_flag(
                a.api.kube_api_burst,
                env,
                "kube-api-burst",
                &["KUBE_API_BURST"],
                10,
            )?,
            format,
            sink,
            metrics_addr: a.daemon.metrics_addr.clone().or_else(|| env("NVLABEL_METRICS_ADDR")),
            nvml_library: s
                .nvml_library
                .clone()
                .or_else(|| env("NVLABEL_NVML_LIBRARY").map(PathBuf::from))
                .unwrap_or_else(|| PathBuf::from(crate::probe::DEFAULT_LIBRARY)),
            sysfs_root,
            snapshot: s.snapshot.clone().or_else(|| non_empty(env("NVLABEL_SNAPSHOT")).map(PathBuf::from)),
            log_format,
            notes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn resolve(args: &[&str], env: &[(&str, &str)]) -> Result<Settings, CliError> {
        let cli = Cli::try_parse_from(std::iter::once("nvlabel").chain(args.iter().copied())).unwrap();
        let env: HashMap<String, String> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Settings::resolve(&cli, &|k| env.get(k).cloned())
    }

    #[test]
    fn gfd_defaults() {
        let s = resolve(&[], &[]).unwrap();
        assert_eq!(s.mig_strategy, MigStrategy::None);
        assert!(s.fail_on_init_error);
        assert!(!s.oneshot);
        assert!(!s.no_timestamp);
        assert!(s.use_node_feature_api);
        assert_eq!(s.sleep_interval, Interval::Every(std::time::Duration::from_secs(60)));
        assert_eq!(s.output_file, DEFAULT_OUTPUT_FILE);
        assert_eq!(s.machine_type_file, PathBuf::from("/sys/class/dmi/id/product_name"));
        assert_eq!(s.namespace, "default");
        assert_eq!((s.kube_api_qps, s.kube_api_burst), (5.0, 10));
        assert_eq!(s.nvml_library, PathBuf::from("libnvidia-ml.so.1"));
    }

    #[test]
    fn command_line_beats_env_beats_default() {
        let env = [("GFD_MIG_STRATEGY", "single"), ("MIG_STRATEGY", "mixed")];
        assert_eq!(resolve(&[], &env).unwrap().mig_strategy, MigStrategy::Single);
        assert_eq!(resolve(&[], &env[1..]).unwrap().mig_strategy, MigStrategy::Mixed);
        assert_eq!(resolve(&["--mig-strategy", "none"], &env).unwrap().mig_strategy, MigStrategy::None);
        assert!(!resolve(&["--oneshot=false"], &[("GFD_ONESHOT", "true")]).unwrap().oneshot);
    }

    #[test]
    fn the_first_defined_env_var_wins_even_when_empty() {
        let s = resolve(&[], &[("GFD_FAIL_ON_INIT_ERROR", ""), ("FAIL_ON_INIT_ERROR", "true")]).unwrap();
        assert!(!s.fail_on_init_error, "an empty boolean env var is false");
        let s = resolve(&[], &[("GFD_OUTPUT_FILE", "")]).unwrap();
        assert_eq!(s.output_file, "", "an empty string env var is used verbatim");
    }

    #[test]
    fn booleans_take_flag_and_equals_forms() {
        assert!(resolve(&["--oneshot"], &[]).unwrap().oneshot);
        assert!(resolve(&["--oneshot=True"], &[]).unwrap().oneshot);
        assert!(!resolve(&["--use-node-feature-api=false"], &[]).unwrap().use_node_feature_api);
        assert!(!resolve(&["--fail-on-init-error=0"], &[]).unwrap().fail_on_init_error);
        assert!(resolve(&[], &[("GFD_ONESHOT", "T")]).unwrap().oneshot);
        let err = resolve(&[], &[("GFD_ONESHOT", "yes")]).unwrap_err().to_string();
        assert!(err.contains("GFD_ONESHOT") && err.contains("\"yes\""), "{err}");
    }

    #[test]
    fn output_file_empty_means_stdout() {
        assert_eq!(resolve(&["--output-file", ""], &[]).unwrap().output_file, "");
        assert_eq!(resolve(&["--output-file="], &[]).unwrap().output_file, "");
        assert_eq!(resolve(&["-o", "/tmp/x"], &[]).unwrap().output_file, "/tmp/x");
        assert_eq!(resolve(&["--output", "/tmp/y"], &[]).unwrap().output_file, "/tmp/y");
    }

    #[test]
    fn sleep_interval_syntax() {
        let s = resolve(&[], &[("GFD_SLEEP_INTERVAL", "90")]).unwrap();
        assert_eq!(s.sleep_interval, Interval::Every(std::time::Duration::from_secs(90)));
        assert_eq!(s.notes.len(), 1, "a bare number is logged as seconds");
        assert_eq!(
            resolve(&["--sleep-interval", "infinite"], &[]).unwrap().sleep_interval,
            Interval::Infinite
        );
        let err = resolve(&[], &[("GFD_SLEEP_INTERVAL", "1d")]).unwrap_err().to_string();
        assert!(err.contains("GFD_SLEEP_INTERVAL") && err.contains("\"1d\""), "{err}");
        let s = resolve(&[], &[("GFD_SLEEP_INTERVAL", "")]).unwrap();
        assert_eq!(s.sleep_interval, Interval::Every(std::time::Duration::from_secs(60)), "empty is ignored");
    }

    #[test]
    fn bad_values_name_the_source() {
        let err = resolve(&[], &[("MIG_STRATEGY", "bogus")]).unwrap_err().to_string();
        assert!(err.contains("\"MIG_STRATEGY\"") && err.contains("\"bogus\""), "{err}");
        let err = resolve(&["--device-discovery-strategy", "foo"], &[]).unwrap_err().to_string();
        assert!(err.contains("invalid --device-discovery-strategy option foo"), "{err}");
        assert!(resolve(&[], &[("KUBE_API_QPS", "")]).is_ok(), "empty numbers are ignored");
        assert!(resolve(&[], &[("KUBE_API_QPS", "fast")]).is_err());
    }

    #[test]
    fn machine_type_follows_sysfs_root_unless_set() {
        let s = resolve(&["--sysfs-root", "/fake/sys"], &[]).unwrap();
        assert_eq!(s.machine_type_file, PathBuf::from("/fake/sys/class/dmi/id/product_name"));
        let s = resolve(&["--machine-type-file", ""], &[]).unwrap();
        assert_eq!(s.machine_type_file, PathBuf::from(""));
    }

    #[test]
    fn config_file_flags_sit_between_env_and_default() {
        let file = crate::config::ConfigFile::parse(
            "flags:\n  migStrategy: mixed\n  failOnInitError: false\n  gfd:\n    oneshot: true\n    sleepInterval: 5s\n    outputFile: /x\n",
        )
        .unwrap();
        let cli = Cli::try_parse_from(["nvlabel"]).unwrap();
        let path = Path::new("/etc/cfg.yaml");
        let with = |env: &[(&str, &str)]| {
            let env: HashMap<String, String> =
                env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            Settings::resolve_with(&cli, &|k| env.get(k).cloned(), Some((path, &file.flags))).unwrap()
        };
        let s = with(&[]);
        assert_eq!(s.mig_strategy, MigStrategy::Mixed);
        assert!(!s.fail_on_init_error);
        assert!(s.oneshot);
        assert_eq!(s.output_file, "/x");
        assert_eq!(s.sleep_interval, Interval::Every(std::time::Duration::from_secs(5)));
        assert_eq!(with(&[("MIG_STRATEGY", "single")]).mig_strategy, MigStrategy::Single, "env beats file");
        let cli = Cli::try_parse_from(["nvlabel", "--mig-strategy", "none"]).unwrap();
        let s = Settings::resolve_with(&cli, &|_| None, Some((path, &file.flags))).unwrap();
        assert_eq!(s.mig_strategy, MigStrategy::None, "command line beats file");
        let bad = crate::config::ConfigFile::parse("flags:\n  migStrategy: yes\n").unwrap();
        let cli = Cli::try_parse_from(["nvlabel"]).unwrap();
        let err = Settings::resolve_with(&cli, &|_| None, Some((path, &bad.flags))).unwrap_err().to_string();
        assert!(
            err.contains("flags.migStrategy in config file /etc/cfg.yaml") && err.contains("\"true\""),
            "{err}"
        );
    }

    #[test]
    fn bad_command_line_values_are_rejected_by_the_parser() {
        assert!(Cli::try_parse_from(["nvlabel", "--mig-strategy", "bogus"]).is_err());
        assert!(Cli::try_parse_from(["nvlabel", "--oneshot=maybe"]).is_err());
    }
}
