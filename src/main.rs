//! The nvlabel binary: parse, resolve the settings, log, install the signals, hand over.
//! Everything else is library code.

use nvlabel::config::modes::NoEffectError;
use nvlabel::config::{Cli, CommandKind, ConfigSource, ConfigState, ReloadError};
use nvlabel::daemon::service::Service;
use nvlabel::daemon::{Control, DaemonError};
use nvlabel::exit::Classify;
use nvlabel::health::commands::clear::ClearError;
use nvlabel::health::commands::prune::PruneError;
use nvlabel::logging::LogFormat;
use nvlabel::pass::PassError;
use nvlabel::probe::Session;
use nvlabel::publish::{PublishError, SetupError};
use nvlabel::snapshot::SnapshotError;
use nvlabel::startup::{self, Startup};
use std::collections::HashMap;

fn main() {
    // The command line before the runtime: `--help`, `--version` and a usage error exit here,
    // without starting the runtime's threads (each brings its stack and malloc arena).
    let (command, cli) = Cli::from_args().split();
    let runtime = nvlabel::runtime().expect("a tokio runtime");
    let env: HashMap<String, String> = std::env::vars().collect();
    // Logging first, so config warnings are logged; a bad NVLABEL_LOG_FORMAT is reported by resolve.
    let log_format = cli
        .log
        .log_format
        .clone()
        .or_else(|| {
            let names = nvlabel::config::rows::row(nvlabel::config::Flag::LogFormat).env;
            names.iter().find_map(|n| env.get(*n).cloned())
        })
        .and_then(|v| LogFormat::parse(&v))
        .unwrap_or(LogFormat::Text);
    nvlabel::logging::init(log_format);
    if let Err(e) = runtime.block_on(real_main(command, cli, env)) {
        nvlabel::logging::fatal(log_format, &e, e.hint());
        std::process::exit(nvlabel::exit::code(&e));
    }
}

/// The error that ended the run, as the room that met it made it: kept typed to the end, so it
/// says itself whether it is a bad configuration. Each says what it says on its own: the line
/// and the chain of causes are the wrapped error's.
#[derive(Debug, thiserror::Error)]
enum Stop {
    /// The configuration (flags, env, the config file) is unusable.
    #[error(transparent)]
    Config(#[from] ReloadError),
    /// A flag given where it has no effect.
    #[error(transparent)]
    NoEffect(#[from] NoEffectError),
    /// `nvlabel prune --health-only` (or its flags).
    #[error(transparent)]
    Prune(#[from] PruneError),
    /// `nvlabel health clear`.
    #[error(transparent)]
    Clear(#[from] ClearError),
    /// The signal handlers could not be installed.
    #[error(transparent)]
    Signals(std::io::Error),
    /// The daemon, a one-shot run or what they start from.
    #[error(transparent)]
    Daemon(#[from] DaemonError),
    /// `nvlabel probe` or `nvlabel hook`'s pass.
    #[error(transparent)]
    Pass(#[from] PassError),
    /// `nvlabel probe`'s snapshot could not be rendered.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// `nvlabel prune`'s writer could not be set up.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// `nvlabel prune`'s writer failed.
    #[error(transparent)]
    Publish(#[from] PublishError),
}

impl Classify for Stop {
    fn is_bad_configuration(&self) -> bool {
        match self {
            Stop::Config(e) => e.is_bad_configuration(),
            Stop::NoEffect(e) => e.is_bad_configuration(),
            Stop::Prune(e) => e.is_bad_configuration(),
            Stop::Clear(e) => e.is_bad_configuration(),
            Stop::Signals(_) => false,
            Stop::Daemon(e) => e.is_bad_configuration(),
            Stop::Pass(e) => e.is_bad_configuration(),
            Stop::Snapshot(e) => e.is_bad_configuration(),
            Stop::Setup(e) => e.is_bad_configuration(),
            Stop::Publish(e) => e.is_bad_configuration(),
        }
    }
}

impl Stop {
    /// What to do about it, when there is a usual fix: a driver that does not start is the
    /// commonest first-run failure.
    fn hint(&self) -> Option<&'static str> {
        match self {
            Stop::Daemon(DaemonError::Pass(PassError::Probe(p))) | Stop::Pass(PassError::Probe(p)) => {
                p.hint()
            }
            _ => None,
        }
    }
}

async fn real_main(command: Option<CommandKind>, cli: Cli, env: HashMap<String, String>) -> Result<(), Stop> {
    let (prune, gpus) = (cli.prune.clone(), cli.clear.gpu.clone());
    let source = ConfigSource::of(&cli, &|k| env.get(k).cloned())?;
    let given = cli.given.clone();
    let env_of = env.clone();
    // The one resolution of the settings (again only when the configuration changes).
    let config = ConfigState::load(cli, env, source, None)?;
    let lookup = |k: &str| env_of.get(k).cloned();
    for warning in nvlabel::config::modes::check(command, &given, &lookup, &config.loaded().settings)? {
        tracing::warn!("{warning}");
    }
    if prune.all_nodes && !prune.health_only {
        return Err(PruneError::AllNodesAlone.into());
    }
    if command == Some(CommandKind::Prune) && prune.health_only {
        // No writer is set up: the labels stay.
        let s = &config.loaded().settings;
        let connect = nvlabel::kubeapi::client(s.kubeconfig.as_deref(), s.kube_api_qps, s.kube_api_burst);
        return Ok(nvlabel::health::commands::prune::health_only(
            &s.health_config(),
            prune.all_nodes,
            connect,
        )
        .await?);
    }
    let daemon = command.is_none() && !config.loaded().settings.oneshot;
    // Signals first: a SIGTERM from here on is a clean stop, never the default kill.
    let control = if daemon { Some(signals().map_err(Stop::Signals)?) } else { None };
    let Startup { config, client, rejected_reloads } = startup::prepare(command, config).await?;
    let settings = config.loaded().settings.clone();
    match (command, control) {
        // The snapshot records every fact, the extended labels' too, whatever the flags.
        (Some(CommandKind::Probe), _) => {
            let all = nvlabel::config::Settings { extended_labels: true, ..settings };
            let pass = all.pass_config(Default::default(), None);
            print!("{}", nvlabel::pass::snapshot(&pass, &Session::new())?.to_yaml()?)
        }
        (Some(CommandKind::Hook), _) => {
            print!("{}", nvlabel::pass::hook(&config.loaded().pass_config())?)
        }
        (Some(CommandKind::Health), _) => {
            let (code, report) = nvlabel::health::commands::oneshot::check(&settings.health_config());
            print!("{report}");
            std::process::exit(code);
        }
        (Some(CommandKind::HealthClear), _) => {
            let s = &settings;
            let connect = nvlabel::kubeapi::client(s.kubeconfig.as_deref(), s.kube_api_qps, s.kube_api_burst);
            print!("{}", nvlabel::health::commands::clear::clear(&s.health_config(), &gpus, connect).await?);
        }
        (Some(CommandKind::Prune), _) => {
            let target = settings.target()?;
            target.build_to_prune(client.as_ref()).await?.prune().await?;
            nvlabel::health::commands::prune::prune(&settings.health_config(), client.as_ref()).await?;
            // Said even where there was nothing to remove, so a prune never ends in silence.
            tracing::info!(
                writer = target.writer_name(),
                "prune done: nothing nvlabel published there is left"
            );
        }
        (None, None) => {
            let target = settings.target()?;
            nvlabel::daemon::oneshot(&config.loaded().loop_config(), target, client).await?
        }
        (None, Some(control)) => {
            let plan = startup::plan(Startup { config, client, rejected_reloads })?;
            Service::start(plan).await?.run(control).await?
        }
    }
    Ok(())
}

/// SIGHUP reloads; SIGTERM (what Kubernetes sends), SIGINT and SIGQUIT stop cleanly. A pass is
/// abandoned for a signal; one that arrives during a refresh or repair waits in the channel, so
/// none is lost.
fn signals() -> std::io::Result<tokio::sync::mpsc::Receiver<Control>> {
    use tokio::signal::unix::{signal, SignalKind};
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let mut hup = signal(SignalKind::hangup())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut quit = signal(SignalKind::quit())?;
    tokio::spawn(async move {
        loop {
            let message = tokio::select! {
                _ = hup.recv() => Control::Reload,
                _ = term.recv() => Control::Shutdown,
                _ = int.recv() => Control::Shutdown,
                _ = quit.recv() => Control::Shutdown,
            };
            if tx.send(message).await.is_err() || message == Control::Shutdown {
                return;
            }
        }
    });
    Ok(rx)
}
