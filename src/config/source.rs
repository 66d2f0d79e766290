//! Where the device-plugin config comes from (nothing, a file, or a ConfigMap directory keyed by
//! the node label) and the configuration in force: loaded once at start-up, reloaded when the
//! file, the directory or the node label changes, or on SIGHUP. A rejected reload keeps the last
//! good configuration; each distinct bad input is reported once.
//!
//! An empty or comment-only file means defaults at start-up (as in GFD), but on reload it is
//! rejected: an editor or a copy truncates a file before writing it, and taking that moment as
//! "no sharing" would relabel every node. A deliberate "no configuration" on reload is a link to
//! `/dev/null` (what GFD's config manager makes), which is not a regular file.

use super::file::ConfigFile;
use super::flags::Cli;
use super::select::{self, SelectError};
use super::settings::Settings;
use crate::exit::Classify;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Where the configuration comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// No config file: flags and env only.
    None,
    /// `--config-file`.
    File(PathBuf),
    /// `--config-dir` (a mounted ConfigMap), keyed by the node label.
    Dir {
        /// The directory.
        dir: PathBuf,
        /// `--config-default`.
        default_key: Option<String>,
    },
}

impl ConfigSource {
    /// The source the command line and env name (a config file cannot name another source);
    /// `--config-file` and `--config-dir` exclude each other.
    pub fn of(cli: &Cli, env: super::resolve::Env) -> Result<ConfigSource, ReloadError> {
        Ok(match (Settings::config_file_path(cli, env), Settings::config_dir_path(cli, env)) {
            (Some(_), Some(_)) => return Err(ReloadError::BothSources),
            (Some(file), None) => ConfigSource::File(file),
            (None, Some(dir)) => {
                ConfigSource::Dir { dir, default_key: Settings::config_default_key(cli, env) }
            }
            (None, None) => ConfigSource::None,
        })
    }
}

/// Why a (re)load was rejected.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// Both a file and a directory were named.
    #[error("--config-file and --config-dir exclude each other")]
    BothSources,
    /// No key could be selected.
    #[error(transparent)]
    Select(#[from] SelectError),
    /// The file is invalid.
    #[error(transparent)]
    Config(#[from] super::file::ConfigError),
    /// Its flags are invalid.
    #[error(transparent)]
    Flags(#[from] super::resolve::CliError),
    /// A reload changed a setting that only a restart can change.
    #[error(
        "config file {file}: flags.{key} cannot change while nvlabel runs (it is {now:?}, the file asks for {asked:?}); restart nvlabel to change it"
    )]
    StartOnly {
        /// The file.
        file: String,
        /// The config file's key.
        key: &'static str,
        /// The value in force.
        now: String,
        /// The value the file asks for.
        asked: String,
    },
    /// A reload found an empty or comment-only file.
    #[error(
        "config file {0} is empty or only comments; on reload that is taken for a file being written, not for \"no configuration\" (link it to /dev/null for defaults)"
    )]
    Blank(PathBuf),
}

impl Classify for ReloadError {
    fn is_bad_configuration(&self) -> bool {
        match self {
            ReloadError::Select(e) => e.is_bad_configuration(),
            ReloadError::Config(e) => e.is_bad_configuration(),
            ReloadError::Flags(e) => e.is_bad_configuration(),
            ReloadError::BothSources | ReloadError::StartOnly { .. } | ReloadError::Blank(_) => true,
        }
    }
}

/// The configuration in force.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The file it came from.
    pub path: Option<PathBuf>,
    bytes: Option<Vec<u8>>,
    /// The parsed file (defaults without one).
    pub config: ConfigFile,
    /// The settings it resolves to.
    pub settings: Settings,
    /// `gfd.timestamp`: when it was loaded (`None` with `--no-timestamp`).
    pub timestamp: Option<u64>,
}

/// The settings the config file can set that only a restart can change: `--health` and its
/// condition type (the Node's record), `gfd.oneshot` (a one-shot run is another program), and the
/// allocation mode (it decides which watches the owner starts). A reload asking to change one is
/// rejected (the last good configuration stays) rather than half applied.
fn start_only_change(now: &Loaded, next: &Loaded) -> Option<ReloadError> {
    let (a, b) = (&now.settings, &next.settings);
    use super::flag::Flag;
    let pairs: [(Flag, String, String); 4] = [
        (Flag::Health, a.health.enabled.to_string(), b.health.enabled.to_string()),
        (Flag::HealthConditionType, a.health.condition_type.clone(), b.health.condition_type.clone()),
        (Flag::Oneshot, a.oneshot.to_string(), b.oneshot.to_string()),
        (Flag::AllocationMode, a.allocation_mode.as_str().into(), b.allocation_mode.as_str().into()),
    ];
    // A start-only flag the file cannot set never differs here; its key is the row's.
    let key = |flag: Flag| super::rows::row(flag).file.map_or("", |f| f.key);
    pairs.into_iter().find(|(_, x, y)| x != y).map(|(flag, now_value, asked)| ReloadError::StartOnly {
        file: next.path.as_ref().map_or_else(|| "(none)".into(), |p| p.display().to_string()),
        key: key(flag),
        now: now_value,
        asked,
    })
}

/// The inputs of the configuration and the configuration they gave.
pub struct ConfigState {
    cli: Cli,
    env: HashMap<String, String>,
    source: ConfigSource,
    label: Option<String>,
    loaded: Loaded,
    /// The last rejected (path, bytes), so one bad edit is reported and counted once.
    rejected: Option<Input>,
}

impl ConfigState {
    /// Resolves the command line and env, and loads the config the source points to; an invalid
    /// one is an error (at start-up nvlabel exits with it).
    pub fn load(
        cli: Cli,
        env: HashMap<String, String>,
        source: ConfigSource,
        label: Option<String>,
    ) -> Result<ConfigState, ReloadError> {
        let loaded = load(&cli, &env, &source, label.as_deref(), None, false)
            .map_err(|rejected| rejected.1)?
            .expect("a load without a previous config always yields one");
        Ok(ConfigState { cli, env, source, label, loaded, rejected: None })
    }

    /// The configuration in force.
    pub fn loaded(&self) -> &Loaded {
        &self.loaded
    }

    /// Where the configuration comes from.
    pub fn source(&self) -> &ConfigSource {
        &self.source
    }

    /// Re-reads the configuration (`force`: even if the bytes are the same, as SIGHUP asks).
    /// `Ok(true)` when a new configuration is in force; `Err` only for an input not rejected
    /// before, so the caller reports and counts each bad edit once.
    pub fn reload(&mut self, force: bool) -> Result<bool, ReloadError> {
        let previous = if force { None } else { Some(&self.loaded) };
        let loaded = load(&self.cli, &self.env, &self.source, self.label.as_deref(), previous, true)
            .and_then(|l| match l.as_ref().and_then(|l| start_only_change(&self.loaded, l)) {
                Some(e) => {
                    Err(Box::new(((l.as_ref().and_then(|l| l.path.clone()), l.and_then(|l| l.bytes)), e)))
                }
                None => Ok(l),
            });
        match loaded {
            Ok(Some(loaded)) => {
                self.rejected = None;
                match &loaded.path {
                    Some(path) => tracing::info!(config = %path.display(), "configuration loaded"),
                    None => tracing::info!("configuration loaded: no config file, flags and defaults"),
                }
                self.loaded = loaded;
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(rejected) => {
                let (input, e) = *rejected;
                let attempt = Some(input);
                let repeat = !force && self.rejected == attempt;
                self.rejected = attempt;
                if repeat {
                    Ok(false)
                } else {
                    Err(e)
                }
            }
        }
    }

    /// Sets the node's config label; returns whether it differs from the one in force.
    pub fn set_label(&mut self, label: Option<String>) -> bool {
        if self.label == label {
            return false;
        }
        tracing::info!(label = label.as_deref().unwrap_or("(none)"), "node config label changed");
        self.label = label;
        true
    }

    /// Directories whose changes may change the config in force: the directory of every hop of
    /// the file's symlink chain and of its final target (a ConfigMap mount swaps `..data` in the
    /// mount directory, which a link into the mount reaches only indirectly).
    pub fn watched_dirs(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = Vec::new();
        let mut add = |d: &Path| {
            if d.is_dir() && !dirs.iter().any(|x| x == d) {
                dirs.push(d.to_path_buf());
            }
        };
        if let ConfigSource::Dir { dir, .. } = &self.source {
            add(dir);
        }
        let file = match &self.source {
            ConfigSource::File(path) => Some(path.clone()),
            _ => self.loaded.path.clone(),
        };
        if let Some(mut hop) = file {
            // Bounded: a symlink loop must not hang the daemon.
            for _ in 0..16 {
                if let Some(parent) = hop.parent() {
                    add(parent);
                }
                match std::fs::read_link(&hop) {
                    Ok(target) if target.is_absolute() => hop = target,
                    Ok(target) => hop = hop.parent().map(|p| p.join(&target)).unwrap_or(target),
                    Err(_) => break,
                }
            }
            if let Some(parent) = std::fs::canonicalize(&hop).ok().as_deref().and_then(Path::parent) {
                add(parent);
            }
        }
        dirs
    }
}

/// What a load read: the selected path and its bytes.
type Input = (Option<PathBuf>, Option<Vec<u8>>);

/// Loads the configuration for `label`. `Ok(None)` when it is byte-for-byte what `previous` has.
/// A rejection comes with what was read, so a repeat of the same bad input is recognised.
/// `reloading`: a blank regular file is rejected (see the module's comment).
fn load(
    cli: &Cli,
    env: &HashMap<String, String>,
    source: &ConfigSource,
    label: Option<&str>,
    previous: Option<&Loaded>,
    reloading: bool,
) -> Result<Option<Loaded>, Box<(Input, ReloadError)>> {
    // Nothing was read when selection or reading failed: the error itself identifies the attempt.
    let (path, bytes) =
        read_input(source, label).map_err(|e| Box::new(((None, Some(e.to_string().into_bytes())), e)))?;
    if let Some(prev) = previous {
        if prev.path == path && prev.bytes == bytes {
            return Ok(None);
        }
    }
    if let (true, Some(p), Some(b)) = (reloading, &path, &bytes) {
        let blank = std::str::from_utf8(b).is_ok_and(super::file::is_blank);
        if blank && std::fs::metadata(p).is_ok_and(|m| m.is_file()) {
            return Err(Box::new(((path.clone(), bytes.clone()), ReloadError::Blank(p.clone()))));
        }
    }
    match parse_input(cli, env, &path, &bytes) {
        Ok(loaded) => Ok(Some(loaded)),
        Err(e) => Err(Box::new(((path, bytes), e))),
    }
}

/// Selects the config file and reads it.
fn read_input(source: &ConfigSource, label: Option<&str>) -> Result<Input, ReloadError> {
    let path = match source {
        ConfigSource::None => None,
        ConfigSource::File(p) => Some(p.clone()),
        ConfigSource::Dir { dir, default_key } => {
            let chosen = select::select(dir, label, default_key.as_deref())?;
            if chosen.is_none() {
                tracing::warn!("no config key selected: {}; no sharing", select::why_none(dir));
            }
            chosen
        }
    };
    let bytes = match &path {
        Some(p) => Some(
            crate::limits::read(p, crate::limits::CONFIG_FILE)
                .map_err(|source| super::file::ConfigError::Read { path: p.clone(), source })?,
        ),
        None => None,
    };
    Ok((path, bytes))
}

/// Parses what was read and resolves the settings it implies.
fn parse_input(
    cli: &Cli,
    env: &HashMap<String, String>,
    path: &Option<PathBuf>,
    bytes: &Option<Vec<u8>>,
) -> Result<Loaded, ReloadError> {
    let config = match (path, bytes) {
        (Some(p), Some(b)) => ConfigFile::from_bytes(p, b)?,
        _ => ConfigFile::default(),
    };
    if let Some(p) = path {
        for warning in &config.warnings {
            tracing::warn!(file = %p.display(), "{warning}");
        }
    }
    let lookup = |k: &str| env.get(k).cloned();
    let settings = Settings::resolve_with(cli, &lookup, path.as_deref().map(|p| (p, &config.flags)))?;
    let timestamp = (!settings.no_timestamp).then(crate::clock::now);
    Ok(Loaded { path: path.clone(), bytes: bytes.clone(), config, settings, timestamp })
}
