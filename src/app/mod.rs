//! One run of the nvlabel command, after its command line is parsed: the settings resolved once,
//! the flags that have no effect refused, the API client made where the command needs one, then
//! the daemon, a one-shot pass or the subcommand. `main` only wires the runtime, the logs and the
//! exit code around [`run`], as controller-rs's `main` does.

pub mod os_signals;
pub mod startup;

use crate::config::modes::NoEffectError;
use crate::config::{Cli, CommandKind, ConfigSource, ConfigState, ReloadError, Settings};
use crate::daemon::service::Service;
use crate::daemon::DaemonError;
use crate::exit::Classify;
use crate::health::commands::clear::ClearError;
use crate::health::commands::prune::PruneError;
use crate::pass::PassError;
use crate::probe::Session;
use crate::publish::{PublishError, SetupError};
use crate::snapshot::SnapshotError;
use startup::Startup;
use std::collections::HashMap;

/// The error that ended the run, as the room that met it made it: kept typed to the end, so it
/// says itself whether it is a bad configuration. Each says what it says on its own: the line
/// and the chain of causes are the wrapped error's.
#[derive(Debug, thiserror::Error)]
pub enum Stop {
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
    /// `nvlabel template`'s command line.
    #[error(transparent)]
    TemplateArgs(#[from] crate::config::template::TemplateArgsError),
    /// `nvlabel template`.
    #[error(transparent)]
    Template(#[from] crate::template::command::TemplateError),
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
            Stop::TemplateArgs(e) => e.is_bad_configuration(),
            Stop::Template(e) => e.is_bad_configuration(),
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
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            Stop::Daemon(DaemonError::Pass(PassError::Probe(p))) | Stop::Pass(PassError::Probe(p)) => {
                p.hint()
            }
            _ => None,
        }
    }
}

/// Runs `command` (`None`: the labeller) with `cli` and the process's `env`; `Ok` is the exit
/// status of a run that ended as it should (`nvlabel health` says the GPUs' state in it).
pub async fn run(command: Option<CommandKind>, cli: Cli, env: HashMap<String, String>) -> Result<i32, Stop> {
    if let Some(args) = &cli.template {
        // A pool's template reads no GPU, no env and no settings: its command line says it all.
        let config = args.config()?;
        let kubeconfig = args.kubeconfig();
        print!("{}", crate::template::command::run(&config, startup::client(kubeconfig, 0.0, 0)).await?);
        return Ok(0);
    }
    let (prune, gpus) = (cli.prune.clone(), cli.clear.gpu.clone());
    let source = ConfigSource::of(&cli, &|k| env.get(k).cloned())?;
    let given = cli.given.clone();
    let env_of = env.clone();
    // The one resolution of the settings (again only when the configuration changes).
    let config = ConfigState::load(cli, env, source, None)?;
    let lookup = |k: &str| env_of.get(k).cloned();
    for warning in crate::config::modes::check(command, &given, &lookup, &config.loaded().settings)? {
        tracing::warn!("{warning}");
    }
    if prune.all_nodes && !prune.health_only {
        return Err(PruneError::AllNodesAlone.into());
    }
    if command == Some(CommandKind::Prune) && prune.health_only {
        // No writer is set up: the labels stay.
        let s = &config.loaded().settings;
        crate::health::commands::prune::health_only(&s.health_config(), prune.all_nodes, startup::connect(s))
            .await?;
        return Ok(0);
    }
    let daemon = command.is_none() && !config.loaded().settings.oneshot;
    // Signals first: a SIGTERM from here on is a clean stop, never the default kill.
    let control = if daemon { Some(os_signals::install().map_err(Stop::Signals)?) } else { None };
    let Startup { config, client, rejected_reloads } = startup::prepare(command, config).await?;
    let settings = config.loaded().settings.clone();
    match (command, control) {
        // The snapshot records every fact, the extended labels' too, whatever the flags.
        (Some(CommandKind::Probe), _) => {
            let all = Settings { extended_labels: true, ..settings };
            let pass = all.pass_config(Default::default(), None);
            print!("{}", crate::pass::snapshot(&pass, &Session::new())?.to_yaml()?)
        }
        (Some(CommandKind::Hook), _) => {
            print!("{}", crate::pass::hook(&config.loaded().pass_config())?)
        }
        (Some(CommandKind::Health), _) => {
            let (code, report) = crate::health::commands::oneshot::check(&settings.health_config());
            print!("{report}");
            return Ok(code);
        }
        (Some(CommandKind::HealthClear), _) => {
            print!(
                "{}",
                crate::health::commands::clear::clear(
                    &settings.health_config(),
                    &gpus,
                    startup::connect(&settings)
                )
                .await?
            );
        }
        (Some(CommandKind::Prune), _) => prune_published(&settings, client.as_ref()).await?,
        (None, None) => {
            let target = settings.target()?;
            crate::daemon::oneshot(&config.loaded().loop_config(), target, client).await?
        }
        (None, Some(control)) => {
            let plan = startup::plan(Startup { config, client, rejected_reloads })?;
            Service::start(plan).await?.run(control).await?
        }
    }
    Ok(0)
}

/// `nvlabel prune`: the labels the target's writer published, then health's condition, Events
/// and taints (an instance's, with `--instance`), through `client` where the writer needs one.
async fn prune_published(settings: &Settings, client: Option<&kube::Client>) -> Result<(), Stop> {
    let target = settings.target()?;
    target.build_to_prune(client).await?.prune().await?;
    crate::health::commands::prune::prune(&settings.health_config(), client).await?;
    // Said even where there was nothing to remove, so a prune never ends in silence.
    tracing::info!(writer = target.writer_name(), "prune done: nothing nvlabel published there is left");
    Ok(())
}
