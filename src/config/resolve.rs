//! The resolver: each flag's value from the command line, then env, then the config file's
//! `flags`, then its default (GFD's precedence), parsed into [`Settings`] by its row
//! ([`super::rows`]), remembering where it came from so that a bad value's error names its
//! origin; then the checks that span several flags. Env is read through a lookup function, so
//! tests never touch the process environment.

use super::flag::{Flag, Found, Origin};
use super::flags::{default_of, Cli};
use super::row::{Empty, Row};
use super::rows::row;
use super::settings::{FileLayer, Settings};
use super::value_parsers::Reason;
use crate::exit::Classify;
use std::path::PathBuf;

/// A flag or env value that is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CliError {
    /// A bad value, from the command line, an env var, the config file or a default.
    #[error("invalid value {value:?} for {origin}: {reason}")]
    Invalid {
        /// Where it came from.
        origin: Origin,
        /// The value.
        value: String,
        /// What is wrong.
        reason: String,
    },
}

impl Classify for CliError {
    fn is_bad_configuration(&self) -> bool {
        match self {
            CliError::Invalid { .. } => true,
        }
    }
}

/// The command line's bad value as the resolver names one from env or the config file, where its
/// flag's parser (the one its row parses env and the file with) said why; `None` for clap's other
/// errors, which say themselves.
pub fn invalid_on_command_line(e: &clap::Error) -> Option<CliError> {
    use clap::error::{ContextKind, ContextValue};
    let reason = std::error::Error::source(e)?.downcast_ref::<Reason>()?;
    let (Some(ContextValue::String(arg)), Some(ContextValue::String(value))) =
        (e.get(ContextKind::InvalidArg), e.get(ContextKind::InvalidValue))
    else {
        return None;
    };
    let flag = Flag::named(arg.strip_prefix("--")?.split([' ', '[', '=']).next()?)?;
    Some(CliError::Invalid {
        origin: Origin::CommandLine(flag),
        value: value.clone(),
        reason: reason.0.clone(),
    })
}

/// The env lookup used by [`Settings::resolve`].
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The error for `found`'s value, naming where it came from.
fn invalid(found: &Found, reason: impl ToString) -> CliError {
    CliError::Invalid { origin: found.origin.clone(), value: found.value.clone(), reason: reason.to_string() }
}

/// Where the DMI product name lives under sysfs.
const MACHINE_TYPE_UNDER_SYSFS: &str = "class/dmi/id/product_name";

/// `row`'s value, and where it came from: the command line, else env, else the config file,
/// else its default. A command that reads its command line alone gives the rows nothing: no
/// flag given (`cli.given` is empty there), no env and no config file.
fn lookup(row: &Row, cli: &Cli, env: Env, file: FileLayer) -> Option<Found> {
    let flag = row.flag;
    let (env, file): (Env, FileLayer) = if cli.reads.rows() { (env, file) } else { (&|_| None, None) };
    let given = cli.given.iter().rev().find(|(f, _)| *f == flag);
    let from_command_line = given.map(|(_, v)| Found { value: v.clone(), origin: Origin::CommandLine(flag) });
    // urfave/cli: the first *defined* variable wins, even when it is empty.
    let from_env = || {
        let first = row.env.iter().find_map(|var| env(var).map(|v| (*var, v)));
        let (var, value) = first.filter(|(_, v)| !v.is_empty() || row.empty != Empty::EnvUnset)?;
        Some(Found { value, origin: Origin::Env { var, flag } })
    };
    let from_file = || {
        let ((path, flags), key) = file.zip(row.file.as_ref())?;
        let origin = Origin::File { key: key.key, path: path.display().to_string() };
        (key.get)(flags).map(|value| Found { value, origin })
    };
    let default = || default_of(flag).map(|d| Found { value: d.to_string(), origin: Origin::Default(flag) });
    match from_command_line.or_else(from_env).or_else(from_file) {
        Some(f) if f.value.is_empty() && row.empty == Empty::Default => default(),
        None => default(),
        found => found,
    }
}

impl Settings {
    /// Resolves the command line against an env lookup, without a config file (the tests' way in;
    /// a run resolves through [`super::source::ConfigState::load`], with its config file).
    pub fn resolve(cli: &Cli, env: Env) -> Result<Settings, CliError> {
        Self::resolve_with(cli, env, None)
    }

    /// Resolves command line > env > config file `flags` > default, row by row, then the checks
    /// that span several flags.
    pub fn resolve_with(cli: &Cli, env: Env, file: FileLayer) -> Result<Settings, CliError> {
        let mut settings = unset();
        let mut found: Vec<(Flag, Found)> = Vec::new();
        for flag in Flag::ALL {
            let row = row(*flag);
            let (Some(set), Some(f)) = (row.set, lookup(&row, cli, env, file)) else { continue };
            set(&mut settings, &f).map_err(|reason| invalid(&f, reason))?;
            found.push((*flag, f));
        }
        let found = |flag: Flag| found.iter().find(|(f, _)| *f == flag).map(|(_, found)| found);
        if found(Flag::MachineTypeFile).is_none() {
            settings.probe.machine_type_file = settings.probe.sysfs_root.join(MACHINE_TYPE_UNDER_SYSFS);
        }
        let judging = &settings.health.judging;
        if let Some(xid) = judging.ignored_xids.intersection(&judging.fatal_xids).next() {
            let origin = Origin::Both(Flag::HealthIgnoreXids, Flag::HealthFatalXids);
            return Err(invalid(
                &Found { value: xid.to_string(), origin },
                "an Xid cannot be both ignored and fatal",
            ));
        }
        // A threshold makes a fault of repeats of an Xid that is none alone: an ignored Xid is
        // never one, a fatal one is one the first time.
        let listed = [
            (Flag::HealthIgnoreXids, &judging.ignored_xids, "ignored: it is never a fault"),
            (Flag::HealthFatalXids, &judging.fatal_xids, "fatal: it is a fault the first time"),
        ];
        for (flag, xids, why) in listed {
            if let Some(xid) = judging.xid_thresholds.keys().find(|x| xids.contains(x)) {
                let origin = Origin::Both(flag, Flag::HealthXidThresholds);
                let reason = format!("an Xid with a threshold cannot be {why}; keep it in one of the two");
                return Err(invalid(&Found { value: xid.to_string(), origin }, reason));
            }
        }
        // vfio GPUs have no driver on this node: nothing could read their health.
        if let Some(f) = found(Flag::DeviceDiscoveryStrategy)
            .filter(|_| settings.health.enabled && settings.probe.strategy == crate::probe::Strategy::Vfio)
        {
            return Err(invalid(
                f,
                "--health reads GPU health through the driver, and GPUs bound to vfio-pci have none on this node: turn --health off here",
            ));
        }
        // From env it is one warning (`modes`): the GPU Operator's env serves every mode.
        match found(Flag::Expiry).filter(|f| f.origin.is_command_line() && !settings.expiry_applies()) {
            Some(f) => {
                Err(invalid(f, "--expiry applies only to the feature file (--output-file <path> with --use-node-feature-api=false), and labels do not go there"))
            }
            None => Ok(settings),
        }
    }

    /// `--config-file` from the command line or env.
    pub fn config_file_path(cli: &Cli, env: Env) -> Option<PathBuf> {
        only(Flag::ConfigFile, cli, env).config_file
    }

    /// `--config-default` from the command line or env; empty is unset.
    pub fn config_default_key(cli: &Cli, env: Env) -> Option<String> {
        only(Flag::ConfigDefault, cli, env).config_default
    }

    /// `--config-dir` from the command line or env.
    pub fn config_dir_path(cli: &Cli, env: Env) -> Option<PathBuf> {
        only(Flag::ConfigDir, cli, env).config_dir
    }

    /// `--log-format` from the command line or env, read by its one parser before anything else
    /// is resolved, so that what the resolution says is logged in it; a bad value is text here,
    /// and the resolution's error. A command that reads its command line alone has it parsed
    /// there already, or its default: never env.
    pub fn log_format_of(cli: &Cli, env: Env) -> crate::logging::LogFormat {
        match cli.reads.rows() {
            true => only(Flag::LogFormat, cli, env).log_format,
            false => cli.log.log_format.unwrap_or_default(),
        }
    }
}

/// The settings with `flag` alone resolved (from the command line and env: these name the config
/// file, so it cannot set them), for the flags whose values always parse or are read again.
fn only(flag: Flag, cli: &Cli, env: Env) -> Settings {
    let mut settings = unset();
    let row = row(flag);
    if let (Some(set), Some(f)) = (row.set, lookup(&row, cli, env, None)) {
        // Text is these flags' type: every value parses.
        let _ = set(&mut settings, &f);
    }
    settings
}

/// The settings before any row is applied: what a flag without a default and not given leaves.
/// Every other field is overwritten by its row's default.
fn unset() -> Settings {
    Settings {
        mig_strategy: crate::labels::MigStrategy::None,
        fail_on_init_error: false,
        oneshot: false,
        no_timestamp: false,
        extended_labels: false,
        allocation_mode: crate::labels::AllocationMode::default(),
        sharing_check_grace: std::time::Duration::ZERO,
        sleep_interval: crate::duration::Interval::Infinite,
        output_file: String::new(),
        expiry: None,
        config_file: None,
        config_dir: None,
        config_default: None,
        use_node_feature_api: false,
        namespace: String::new(),
        node_name: None,
        pod_name: None,
        kubeconfig: None,
        kube_api_qps: 0.0,
        kube_api_burst: 0,
        format: crate::publish::Format::Text,
        sink: crate::publish::Sink::Gfd,
        metrics_addr: String::new(),
        probe: crate::probe::ProbeOptions::default(),
        snapshot: None,
        log_format: crate::logging::LogFormat::Text,
        notes: Vec::new(),
        health: super::health_checks::HealthSettings::default(),
    }
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
