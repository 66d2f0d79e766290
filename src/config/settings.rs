//! Settings: the command line, env, the config file's `flags` and defaults resolved into one
//! value (GFD's precedence: command line > env > config file > default), which every command and
//! the daemon receive. Env is read through a lookup function, so tests never touch the process
//! environment.

use super::file::FileFlags;
use super::flags::Cli;
pub use super::flags::DEFAULT_OUTPUT_FILE;
use super::resolve::Found;
use super::resolve::{
    bool_flag, choice, default, defaulted, found_flag, invalid, number_flag, path_flag, string_flag,
};
pub use super::resolve::{CliError, Env};
use crate::duration::{parse_interval, DurationError, Interval};
use crate::labels::{AllocationMode, MigStrategy};
use crate::logging::LogFormat;
use crate::publish::{Format, Sink};
use std::path::{Path, PathBuf};

/// Where the DMI product name lives under sysfs.
const MACHINE_TYPE_UNDER_SYSFS: &str = "class/dmi/id/product_name";

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
    /// `--extended-labels`.
    pub extended_labels: bool,
    /// `--allocation-mode`.
    pub allocation_mode: AllocationMode,
    /// `--sharing-check-grace`.
    pub sharing_check_grace: std::time::Duration,
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
    pub device_discovery_strategy: crate::probe::Strategy,
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
    /// `--metrics-addr`; empty means none.
    pub metrics_addr: String,
    /// `--nvml-library`.
    pub nvml_library: PathBuf,
    /// `--cuda-library`.
    pub cuda_library: PathBuf,
    /// `--host-root`.
    pub host_root: PathBuf,
    /// `--pci-ids`; `None` for the system's copy, else the built-in one.
    pub pci_ids: Option<PathBuf>,
    /// `--sysfs-root`.
    pub sysfs_root: PathBuf,
    /// `--snapshot`.
    pub snapshot: Option<PathBuf>,
    /// `--log-format`.
    pub log_format: LogFormat,
    /// Notes for the log about how values were read (bare-number durations).
    pub notes: Vec<String>,
    /// `--health` and its options.
    pub health: super::health::HealthSettings,
}

/// The flags section of a config file and where it came from.
pub type FileLayer<'a> = Option<(&'a Path, &'a FileFlags)>;

impl Settings {
    /// `--config-file` from the command line or env (`GFD_CONFIG_FILE`, `CONFIG_FILE`).
    pub fn config_file_path(cli: &Cli, env: Env) -> Option<PathBuf> {
        string_flag(cli.label.config.config_file.clone(), env, "config-file")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    }

    /// `--config-default` from the command line or env (`NVLABEL_CONFIG_DEFAULT`); empty is unset.
    pub fn config_default_key(cli: &Cli, env: Env) -> Option<String> {
        string_flag(cli.label.config.config_default.clone(), env, "config-default").filter(|v| !v.is_empty())
    }

    /// `--config-dir` from the command line or env (`NVLABEL_CONFIG_DIR`).
    pub fn config_dir_path(cli: &Cli, env: Env) -> Option<PathBuf> {
        path_flag(cli.label.config.config_dir.clone(), env, "config-dir")
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

        let mig_strategy = match found_flag(a.options.mig_strategy.clone(), env, "mig-strategy")
            .or_else(|| ff.mig_strategy.as_deref().map(|v| in_file("flags.migStrategy", v)))
        {
            Some(f) => {
                MigStrategy::parse(&f.value).ok_or_else(|| invalid(&f, "use none, single or mixed"))?
            }
            None => MigStrategy::parse(&default::<String>("mig-strategy")).expect("a known strategy"),
        };

        let allocation_mode = match found_flag(a.options.allocation_mode.clone(), env, "allocation-mode")
            .or_else(|| ff.allocation_mode.as_deref().map(|v| in_file("flags.allocationMode", v)))
        {
            Some(f) => AllocationMode::parse(&f.value)
                .ok_or_else(|| invalid(&f, "use device-plugin, dra or auto"))?,
            None => AllocationMode::parse(&default::<String>("allocation-mode")).expect("a known mode"),
        };

        let sleep = match found_flag(a.daemon.sleep_interval.clone(), env, "sleep-interval") {
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
            (None, None) => parse_interval(&default::<String>("sleep-interval")).expect("a valid default").0,
        };

        let discovery = found_flag(
            a.facts.device_discovery_strategy.clone(),
            env,
            "device-discovery-strategy",
        )
        .or_else(|| {
            ff.device_discovery_strategy.as_deref().map(|v| in_file("flags.deviceDiscoveryStrategy", v))
        });
        let f = discovery.unwrap_or_else(|| defaulted("device-discovery-strategy"));
        let device_discovery_strategy = crate::probe::Strategy::parse(&f.value).ok_or_else(|| {
            invalid(
                &f,
                format!(
                    "invalid --device-discovery-strategy option {}; use auto, nvml, tegra or vfio",
                    f.value
                ),
            )
        })?;

        let sysfs_root =
            path_flag(s.sysfs_root.clone(), env, "sysfs-root").unwrap_or_else(|| default("sysfs-root"));
        let machine_type_file = string_flag(a.facts.machine_type_file.clone(), env, "machine-type-file")
            .or(gfd.machine_type_file.clone())
            .map(PathBuf::from)
            .unwrap_or_else(|| sysfs_root.join(MACHINE_TYPE_UNDER_SYSFS));
        let format = choice(a.output.format.clone(), env, "format", Format::parse, "text or json")?;
        let log_format =
            choice(cli.log.log_format.clone(), env, "log-format", LogFormat::parse, "text or json")?;
        let sink = choice(a.target.sink.clone(), env, "sink", Sink::parse, "gfd or node")?;
        let non_empty = |v: Option<String>| v.filter(|v| !v.is_empty());
        let sharing_check_grace =
            match found_flag(a.daemon.sharing_check_grace.clone(), env, "sharing-check-grace")
                .filter(|f| !f.value.is_empty())
            {
                None => match parse_interval(&default::<String>("sharing-check-grace")) {
                    Ok((Interval::Every(d), _)) => d,
                    _ => unreachable!("the default of --sharing-check-grace is a duration"),
                },
                Some(f) => match parse_interval(&f.value).map_err(|e| invalid(&f, e))? {
                    (Interval::Every(d), _) => d,
                    _ => return Err(invalid(&f, "use a duration such as 5m")),
                },
            };
        let expiry_given = found_flag(a.output.expiry.clone(), env, "expiry").filter(|f| !f.value.is_empty());
        let expiry = match &expiry_given {
            None => None,
            Some(f) => match parse_interval(&f.value).map_err(|e| invalid(f, e))? {
                (Interval::Every(d), _) if !d.is_zero() => Some(d),
                _ => return Err(invalid(f, "use a positive duration such as 1h")),
            },
        };

        let settings = Settings {
            mig_strategy,
            fail_on_init_error: bool_flag(a.facts.fail_on_init_error, env, "fail-on-init-error")?
                .or(ff.fail_on_init_error)
                .unwrap_or_else(|| default("fail-on-init-error")),
            oneshot: bool_flag(a.daemon.oneshot, env, "oneshot")?
                .or(gfd.oneshot)
                .unwrap_or_else(|| default("oneshot")),
            no_timestamp: bool_flag(a.options.no_timestamp, env, "no-timestamp")?
                .or(gfd.no_timestamp)
                .unwrap_or_else(|| default("no-timestamp")),
            extended_labels: bool_flag(a.options.extended_labels, env, "extended-labels")?
                .or(ff.extended_labels)
                .unwrap_or_else(|| default("extended-labels")),
            allocation_mode,
            sharing_check_grace,
            sleep_interval,
            output_file: string_flag(a.target.output_file.clone(), env, "output-file")
                .or(gfd.output_file.clone())
                .unwrap_or_else(|| default("output-file")),
            expiry,
            machine_type_file,
            config_file: Self::config_file_path(cli, env),
            config_dir: path_flag(a.config.config_dir.clone(), env, "config-dir"),
            config_default: Self::config_default_key(cli, env),
            use_node_feature_api: bool_flag(a.target.use_node_feature_api, env, "use-node-feature-api")?
                .or(ff.use_node_feature_api)
                .unwrap_or_else(|| default("use-node-feature-api")),
            device_discovery_strategy,
            namespace: string_flag(a.api.namespace.clone(), env, "namespace")
                .unwrap_or_else(|| default("namespace")),
            node_name: non_empty(string_flag(a.api.node_name.clone(), env, "node-name")),
            pod_name: non_empty(string_flag(a.api.pod_name.clone(), env, "pod-name")),
            kubeconfig: non_empty(string_flag(a.api.kubeconfig.clone(), env, "kubeconfig")),
            kube_api_qps: number_flag(a.api.kube_api_qps, env, "kube-api-qps")?,
            kube_api_burst: number_flag(a.api.kube_api_burst, env, "kube-api-burst")?,
            format,
            sink,
            // Empty is meaningful here: no endpoint.
            metrics_addr: string_flag(a.daemon.metrics_addr.clone(), env, "metrics-addr")
                .unwrap_or_else(|| default("metrics-addr")),
            nvml_library: path_flag(s.nvml_library.clone(), env, "nvml-library")
                .unwrap_or_else(|| default("nvml-library")),
            cuda_library: path_flag(s.cuda_library.clone(), env, "cuda-library")
                .unwrap_or_else(|| default("cuda-library")),
            host_root: path_flag(s.host_root.clone(), env, "host-root")
                .unwrap_or_else(|| default("host-root")),
            pci_ids: path_flag(s.pci_ids.clone(), env, "pci-ids").filter(|p| !p.as_os_str().is_empty()),
            sysfs_root,
            snapshot: path_flag(s.snapshot.clone(), env, "snapshot"),
            log_format,
            notes,
            health: super::health::resolve(&a.health, env, ff, &file_path)?,
        };
        // vfio GPUs have no driver on this node: nothing could read their health.
        if settings.health.enabled && settings.device_discovery_strategy == crate::probe::Strategy::Vfio {
            return Err(invalid(
                &f,
                "--health reads GPU health through the driver, and GPUs bound to vfio-pci have none on this node: turn --health off here",
            ));
        }
        // From env it is one warning (`modes`): the GPU Operator's env serves every mode.
        let on_command_line = |f: &Found| !f.origin.starts_with("environment");
        match expiry_given.filter(|f| !settings.expiry_applies() && on_command_line(f)) {
            Some(f) => {
                Err(invalid(&f, "--expiry applies only to the feature file (--output-file <path> with --use-node-feature-api=false), and labels do not go there"))
            }
            None => Ok(settings),
        }
    }
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
