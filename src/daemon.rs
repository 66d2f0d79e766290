//! The long-running labeler: probe → labels → publish, then wait for the interval, a config
//! change (the file, or the node label choosing another ConfigMap key), or a signal. A config
//! change is applied without restarting; an invalid one keeps the last good config and labels.

use crate::cli::{Cli, Settings};
use crate::config::ConfigFile;
use crate::duration::Interval;
use crate::http::Health;
use crate::labels::Labels;
use crate::publish::{PublishError, SetupError, Target, Writer};
use crate::run::{self, RunError};
use crate::select::{self, SelectError};
use futures::stream::BoxStream;
use futures::StreamExt;
use notify::Watcher;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

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

/// What the process is told from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// SIGHUP: re-read the configuration and label again.
    Reload,
    /// SIGTERM/SIGINT: stop after the write in flight; labels stay.
    Shutdown,
}

/// A publish failure, by writer and reason.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PublishFailure {
    /// The writer.
    pub writer: String,
    /// Why (`conflict`, `throttled`, `server`, `connection`, `file`, ...).
    pub reason: String,
}

/// An NVML function that failed.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NvmlFunction {
    /// The function (or `nvmlInit`).
    pub function: String,
}

/// The daemon's metrics and health.
#[derive(Debug)]
pub struct Metrics {
    /// Labelling passes.
    pub passes: Counter,
    /// Time a pass takes (probe and labels).
    pub pass_duration: Histogram,
    /// Publishes that failed.
    pub publish_failures: Family<PublishFailure, Counter>,
    /// NVML calls that failed, by function.
    pub nvml_errors: Family<NvmlFunction, Counter>,
    /// Config reloads rejected (invalid file, missing key).
    pub config_reload_failures: Counter,
    /// Labels in the last successful publish.
    pub labels_published: Gauge,
    /// Unix time of the last successful publish.
    pub last_success: Gauge<f64, AtomicU64>,
    /// 1 while MPS is configured on a node with MIG enabled (no sharing is labelled).
    pub mps_on_mig: Gauge,
    /// Readiness.
    pub health: Arc<Health>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics {
            passes: Counter::default(),
            pass_duration: Histogram::new([0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0]),
            publish_failures: Family::default(),
            nvml_errors: Family::default(),
            config_reload_failures: Counter::default(),
            labels_published: Gauge::default(),
            last_success: Gauge::default(),
            mps_on_mig: Gauge::default(),
            health: Arc::new(Health::default()),
        }
    }
}

impl Metrics {
    /// Registers the metrics.
    pub fn register(&self, registry: &mut Registry) {
        registry.register("nvlabel_passes", "Labelling passes", self.passes.clone());
        registry.register(
            "nvlabel_pass_duration_seconds",
            "Time to probe and compute labels",
            self.pass_duration.clone(),
        );
        registry.register(
            "nvlabel_publish_failures",
            "Publishes that failed, by writer and reason",
            self.publish_failures.clone(),
        );
        registry.register(
            "nvlabel_nvml_errors",
            "NVML calls that failed, by function",
            self.nvml_errors.clone(),
        );
        registry.register(
            "nvlabel_config_reload_failures",
            "Configuration reloads rejected; the last good configuration stayed in use",
            self.config_reload_failures.clone(),
        );
        registry.register(
            "nvlabel_labels_published",
            "Labels in the last successful publish",
            self.labels_published.clone(),
        );
        registry.register(
            "nvlabel_last_success_timestamp_seconds",
            "Unix time of the last successful publish",
            self.last_success.clone(),
        );
        registry.register(
            "nvlabel_mps_on_mig",
            "1 while MPS is configured on a node with MIG enabled: the device plugin cannot share such GPUs, so no sharing is labelled",
            self.mps_on_mig.clone(),
        );
    }

    /// Creates every labelled series a fresh process can know of at zero, so that alerts see 0
    /// rather than no data: failures of `writer` for each reason, and errors of every NVML
    /// function the probe calls.
    pub fn zero(&self, writer: &str) {
        for reason in crate::publish::FAILURE_REASONS {
            let _ = self
                .publish_failures
                .get_or_create(&PublishFailure { writer: writer.into(), reason: (*reason).into() });
        }
        for function in crate::probe::NVML_FUNCTIONS {
            let _ = self.nvml_errors.get_or_create(&NvmlFunction { function: (*function).into() });
        }
    }

    fn publish_failed(&self, writer: &str, reason: &str) {
        self.publish_failures
            .get_or_create(&PublishFailure { writer: writer.into(), reason: reason.into() })
            .inc();
        self.health.record(false);
    }
}

/// Why the daemon stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The configuration at start-up is invalid.
    #[error(transparent)]
    Config(#[from] ReloadError),
    /// A pass failed in a way that ends the process (NVML init with `--fail-on-init-error`).
    #[error(transparent)]
    Run(#[from] RunError),
    /// Publishing failed in a one-shot run.
    #[error(transparent)]
    Publish(#[from] PublishError),
    /// The writer could not be set up.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// The config watch could not be set up.
    #[error("cannot watch the configuration: {0}")]
    Watch(#[from] notify::Error),
    /// The feature file was not pruned.
    #[error(transparent)]
    PruneFile(#[from] crate::publish::PruneFileError),
}

/// Why a (re)load was rejected.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// No key could be selected.
    #[error(transparent)]
    Select(#[from] SelectError),
    /// The file is invalid.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// Its flags are invalid.
    #[error(transparent)]
    Flags(#[from] crate::cli::CliError),
}

/// The configuration in force.
#[derive(Debug, Clone)]
struct Loaded {
    path: Option<PathBuf>,
    bytes: Option<Vec<u8>>,
    config: ConfigFile,
    settings: Settings,
    timestamp: Option<u64>,
}

/// The labeler's state between passes.
pub struct Daemon {
    cli: Cli,
    env: HashMap<String, String>,
    source: ConfigSource,
    label: Option<String>,
    loaded: Loaded,
    metrics: Arc<Metrics>,
    /// The labels last published, for logging what changed.
    published: Option<Labels>,
    /// NVML was down or the publish failed in the last pass: look again sooner, with backoff.
    retry_soon: Option<Duration>,
    /// The writer and the target it was built for.
    writer: Option<(Target, Box<dyn Writer>)>,
    client: Option<kube::Client>,
    /// The last rejected (path, bytes), so one bad edit is reported and counted once.
    rejected: Option<Input>,
    /// What went wrong in the last pass, logged when it starts and when it ends.
    conditions: crate::conditions::Conditions,
}

impl Daemon {
    /// Loads the configuration; an invalid one is a start-up error.
    pub fn start(
        cli: Cli,
        env: HashMap<String, String>,
        source: ConfigSource,
        label: Option<String>,
        metrics: Arc<Metrics>,
    ) -> Result<Daemon, ReloadError> {
        let loaded = load(&cli, &env, &source, label.as_deref(), None)
            .map_err(|rejected| rejected.1)?
            .expect("a load without a previous config always yields one");
        Ok(Daemon {
            cli,
            env,
            source,
            label,
            loaded,
            metrics,
            published: None,
            retry_soon: None,
            writer: None,
            client: None,
            rejected: None,
            conditions: Default::default(),
        })
    }

    /// The settings in force.
    pub fn settings(&self) -> &Settings {
        &self.loaded.settings
    }

    /// Where labels go, as the settings in force say.
    pub fn target(&self) -> Result<Target, SetupError> {
        Target::of(&self.loaded.settings)
    }

    /// Gives the API writers (and nothing else) their client.
    pub fn set_client(&mut self, client: Option<kube::Client>) {
        self.client = client;
        self.writer = None;
    }

    /// The writer for the current target; rebuilt when a reload changed the target.
    async fn writer(&mut self) -> Result<&mut Box<dyn Writer>, SetupError> {
        let target = self.target()?;
        if self.writer.as_ref().is_none_or(|(built_for, _)| *built_for != target) {
            let writer = target.build(self.client.as_ref()).await?;
            self.writer = Some((target, writer));
        }
        Ok(&mut self.writer.as_mut().expect("just built").1)
    }

    /// Removes what this labeler published (`nvlabel prune`).
    pub async fn prune(&mut self) -> Result<(), DaemonError> {
        let client = || self.client.clone().ok_or_else(|| SetupError::Client("no client configured".into()));
        match &self.target()? {
            Target::Stdout(_) => {}
            Target::File(path, _) => {
                if crate::publish::prune_file(path)? {
                    tracing::info!(path = %path.display(), "removed feature file");
                }
            }
            Target::Node(node) => {
                crate::publish::NodeLabels::new(client()?, node).prune().await?;
                tracing::info!(%node, "removed nvlabel's node labels");
            }
            Target::NodeFeature { namespace, node, .. } => {
                let nf = crate::publish::NodeFeature::new(client()?, namespace, node, None);
                if nf.delete().await? {
                    tracing::info!(%namespace, %node, "deleted NodeFeature object");
                }
            }
        }
        Ok(())
    }

    /// The sharing config in force.
    pub fn sharing(&self) -> crate::sharing::Sharing {
        self.loaded.config.sharing.clone()
    }

    /// Re-reads the configuration. Returns whether it changed; a rejected one is logged, counted,
    /// and the last good configuration stays.
    pub fn reload(&mut self, force: bool) -> bool {
        let previous = if force { None } else { Some(&self.loaded) };
        match load(&self.cli, &self.env, &self.source, self.label.as_deref(), previous) {
            Ok(Some(loaded)) => {
                self.rejected = None;
                tracing::info!(config = ?loaded.path, "configuration loaded");
                self.loaded = loaded;
                true
            }
            Ok(None) => false,
            Err(rejected) => {
                let (input, e) = *rejected;
                let attempt = Some(input);
                if force || self.rejected != attempt {
                    self.metrics.config_reload_failures.inc();
                    tracing::error!(error = %e, "configuration rejected; keeping the last good one");
                }
                self.rejected = attempt;
                false
            }
        }
    }

    /// Sets the node label; returns whether it differs from the one in force.
    pub fn set_label(&mut self, label: Option<String>) -> bool {
        if self.label == label {
            return false;
        }
        tracing::info!(label = ?label, "node config label changed");
        self.label = label;
        true
    }

    /// The one-shot run: one pass, and any failure is the process's.
    pub async fn oneshot(&mut self) -> Result<(), DaemonError> {
        let pass = self.compute().await?;
        self.conditions.update(pass.conditions());
        self.writer().await?.publish(&pass.labels).await?;
        Ok(())
    }

    async fn compute(&self) -> Result<run::Pass, RunError> {
        let settings = self.loaded.settings.clone();
        let sharing = self.loaded.config.sharing.clone();
        let timestamp = self.loaded.timestamp;
        tokio::task::spawn_blocking(move || run::compute(&settings, sharing, timestamp))
            .await
            .unwrap_or_else(|e| Err(RunError::Internal(format!("labelling pass panicked: {e}"))))
    }

    /// One daemon pass, publishing only what changed. Only an NVML init failure with
    /// `--fail-on-init-error` ends the process; other failures are logged and the labels stay.
    pub async fn pass(&mut self) -> Result<(), RunError> {
        let started = std::time::Instant::now();
        self.metrics.passes.inc();
        let computed = self.compute().await;
        self.metrics.pass_duration.observe(started.elapsed().as_secs_f64());
        let pass = match computed {
            Ok(pass) => pass,
            Err(RunError::Probe(e)) if e.is_init() && self.loaded.settings.fail_on_init_error => {
                return Err(RunError::Probe(e));
            }
            Err(e) => {
                tracing::error!(error = %e, "labelling pass failed; the published labels stay");
                if let RunError::Probe(p) = &e {
                    self.metrics
                        .nvml_errors
                        .get_or_create(&NvmlFunction { function: p.function().into() })
                        .inc();
                }
                self.metrics.health.record(false);
                return Ok(());
            }
        };
        for issue in pass.issues.iter().filter(|i| i.function.starts_with("nvml")) {
            self.metrics.nvml_errors.get_or_create(&NvmlFunction { function: issue.function.clone() }).inc();
        }
        self.conditions.update(pass.conditions());
        self.metrics.mps_on_mig.set(i64::from(pass.mps_on_mig));
        let nvml_down = pass.nvml_down();
        let labels = pass.labels;
        let writer = match self.writer().await {
            Ok(w) => w,
            Err(e) => {
                tracing::error!(error = %e, "cannot set up the label writer; will retry");
                self.metrics.publish_failed("setup", "setup");
                self.back_off(true);
                return Ok(());
            }
        };
        let name = writer.name();
        let result = writer.publish(&labels).await;
        self.back_off(nvml_down || result.is_err());
        match result {
            Ok(changed) => {
                if changed {
                    log_changes(self.published.as_ref(), &labels, name);
                }
                self.metrics.health.record(true);
                self.metrics.labels_published.set(labels.len() as i64);
                self.metrics.last_success.set(run::now() as f64);
                self.published = Some(labels);
            }
            Err(e) => {
                tracing::error!(writer = name, error = %e, "publishing labels failed; will retry");
                self.metrics.publish_failed(name, e.reason());
            }
        }
        tracing::debug!(elapsed_ms = started.elapsed().as_millis() as u64, "pass done");
        Ok(())
    }

    /// Writes the last published labels again because the writer asked for it (an expiry that
    /// must move forward); no probe, no new labels.
    async fn refresh(&mut self) {
        let Some(labels) = self.published.clone() else { return };
        let Some((_, writer)) = self.writer.as_mut() else { return };
        if let Err(e) = writer.publish(&labels).await {
            let name = writer.name();
            tracing::error!(writer = name, error = %e, "refreshing the published labels failed; will retry");
            self.metrics.publish_failed(name, e.reason());
            self.back_off(true);
        }
    }

    /// After a pass that could not do its whole job (NVML down, publish failed), the next one
    /// comes after 1 s, 2 s, 4 s ... up to the cap, instead of after the full interval.
    fn back_off(&mut self, failed: bool) {
        self.retry_soon = match (failed, self.retry_soon) {
            (false, _) => None,
            (true, None) => Some(Duration::from_secs(1)),
            (true, Some(d)) => Some((d * 2).min(RETRY_CAP)),
        };
    }

    /// Directories whose changes may change the config in force: the directory of every hop of
    /// the file's symlink chain and of its final target (a ConfigMap mount swaps `..data` in the
    /// mount directory, which a link into the mount reaches only indirectly).
    fn watched_dirs(&self) -> Vec<PathBuf> {
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

    /// Runs until `control` says stop (or closes). `labels` are node-label changes, if watched.
    pub async fn run(
        mut self,
        mut labels: Option<BoxStream<'static, Option<String>>>,
        mut control: mpsc::Receiver<Control>,
    ) -> Result<(), DaemonError> {
        for note in &self.loaded.settings.notes {
            tracing::info!("{note}");
        }
        let (tx, mut changes) = mpsc::unbounded_channel();
        let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            // Our own reads show up as access events; only modifications can change the config.
            if event.is_ok_and(|e| !matches!(e.kind, notify::EventKind::Access(_))) {
                let _ = tx.send(());
            }
        })?;
        let mut watching = self.rewatch(&mut watcher, Vec::new());
        self.pass().await?;
        let mut floor_noted = None;
        loop {
            let interval = match self.loaded.settings.sleep_interval {
                // GFD relabels in a busy loop on 0; one second is the floor here.
                Interval::Every(d) if d < MIN_INTERVAL => {
                    if floor_noted != Some(d) {
                        tracing::warn!(
                            requested = %humantime::format_duration(d),
                            used = "1s",
                            "--sleep-interval is below the 1s floor; passes run every second"
                        );
                        floor_noted = Some(d);
                    }
                    Some(MIN_INTERVAL)
                }
                Interval::Every(d) => Some(d),
                Interval::Infinite => None,
            };
            *self.metrics.health.fresh_for.lock().unwrap_or_else(|p| p.into_inner()) =
                interval.map(|d| d * 3 + Duration::from_secs(60));
            // While NVML is down or publishing fails, look again sooner, backing off.
            let sleep = match (self.retry_soon, interval) {
                (Some(retry), Some(i)) => Some(retry.min(i)),
                (Some(retry), None) => Some(retry),
                (None, i) => i,
            };
            let timer = async {
                match sleep {
                    Some(d) => tokio::time::sleep(d).await,
                    None => futures::future::pending().await,
                }
            };
            // The feature file's expiry is refreshed on its own clock, whatever the interval.
            // A failed refresh waits like a failed pass, so a broken file is not a hot loop.
            let refresh_in = self
                .writer
                .as_ref()
                .and_then(|(_, w)| w.refresh_in())
                .map(|d| d.max(self.retry_soon.unwrap_or(Duration::ZERO)));
            let refresh = async {
                match refresh_in {
                    Some(d) => tokio::time::sleep(d).await,
                    None => futures::future::pending().await,
                }
            };
            let next_label = async {
                match labels.as_mut() {
                    Some(s) => s.next().await,
                    None => futures::future::pending().await,
                }
            };
            tokio::select! {
                () = timer => {}
                () = refresh => {
                    self.refresh().await;
                    continue;
                }
                Some(()) = changes.recv() => {
                    // One edit fires several events: let them settle, then compare contents once.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    while changes.try_recv().is_ok() {}
                    if !self.reload(false) {
                        watching = self.rewatch(&mut watcher, watching);
                        continue;
                    }
                }
                Some(label) = next_label => {
                    if !self.set_label(label) || !self.reload(false) {
                        continue;
                    }
                }
                message = control.recv() => match message {
                    Some(Control::Reload) => {
                        tracing::info!("Received SIGHUP, reloading");
                        self.reload(true);
                    }
                    Some(Control::Shutdown) | None => {
                        tracing::info!("shutting down; published labels stay in place");
                        return Ok(());
                    }
                },
            }
            watching = self.rewatch(&mut watcher, watching);
            self.pass().await?;
        }
    }

    fn rewatch(&self, watcher: &mut notify::RecommendedWatcher, old: Vec<PathBuf>) -> Vec<PathBuf> {
        let new = self.watched_dirs();
        for d in old.iter().filter(|d| !new.contains(d)) {
            let _ = watcher.unwatch(d);
        }
        for d in new.iter().filter(|d| !old.contains(d)) {
            if let Err(e) = watcher.watch(d, notify::RecursiveMode::NonRecursive) {
                tracing::warn!(dir = %d.display(), error = %e, "cannot watch config directory");
            }
        }
        new
    }
}

/// The shortest time between passes.
const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// The longest wait between retries while NVML is down or publishing fails.
const RETRY_CAP: Duration = Duration::from_secs(300);

/// Logs what a publish changed: one line, at info, only when something changed.
fn log_changes(before: Option<&Labels>, after: &Labels, writer: &str) {
    let empty = Labels::new();
    let before = before.unwrap_or(&empty);
    let added: Vec<&String> = after.keys().filter(|k| !before.contains_key(*k)).collect();
    let removed: Vec<&String> = before.keys().filter(|k| !after.contains_key(*k)).collect();
    let changed: Vec<String> = after
        .iter()
        .filter_map(|(k, v)| before.get(k).filter(|old| *old != v).map(|old| format!("{k}: {old} -> {v}")))
        .collect();
    tracing::info!(writer, labels = after.len(), ?added, ?removed, ?changed, "published labels");
}

/// What a load read: the selected path and its bytes.
type Input = (Option<PathBuf>, Option<Vec<u8>>);

/// Loads the configuration for `label`. `Ok(None)` when it is byte-for-byte what `previous` has.
/// A rejection comes with what was read, so a repeat of the same bad input is recognised.
fn load(
    cli: &Cli,
    env: &HashMap<String, String>,
    source: &ConfigSource,
    label: Option<&str>,
    previous: Option<&Loaded>,
) -> Result<Option<Loaded>, Box<(Input, ReloadError)>> {
    // Nothing was read when selection or reading failed: the error itself identifies the attempt.
    let (path, bytes) =
        read_input(source, label).map_err(|e| Box::new(((None, Some(e.to_string().into_bytes())), e)))?;
    if let Some(prev) = previous {
        if prev.path == path && prev.bytes == bytes {
            return Ok(None);
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
                tracing::warn!(dir = %dir.display(), "no config key selected: no label, no default, several keys; no sharing");
            }
            chosen
        }
    };
    let bytes = match &path {
        Some(p) => Some(
            crate::limits::read(p, crate::limits::CONFIG_FILE)
                .map_err(|source| crate::config::ConfigError::Read { path: p.clone(), source })?,
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
    let timestamp = (!settings.no_timestamp).then(run::now);
    Ok(Loaded { path: path.clone(), bytes: bytes.clone(), config, settings, timestamp })
}
