//! The nvlabel binary: parse, resolve, log, wire the API client, signals and watches, dispatch.
//! Everything else is library code.

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use nvlabel::config::{Cli, CommandKind, ConfigSource, ConfigState};
use nvlabel::daemon::{Control, Daemon, Metrics};
use nvlabel::kubeapi::object_watch::ObjectWatch;
use nvlabel::logging::LogFormat;
use nvlabel::publish::Target;
use std::collections::HashMap;
use std::sync::Arc;

fn main() {
    let runtime = nvlabel::runtime().expect("a tokio runtime");
    let (command, cli) = Cli::from_args().split();
    let env: HashMap<String, String> = std::env::vars().collect();
    // Logging first, so config warnings are logged; a bad NVLABEL_LOG_FORMAT is reported by resolve.
    let log_format = cli
        .log
        .log_format
        .clone()
        .or_else(|| nvlabel::config::env::env_names("log-format").iter().find_map(|n| env.get(*n).cloned()))
        .and_then(|v| LogFormat::parse(&v))
        .unwrap_or(LogFormat::Text);
    nvlabel::logging::init(log_format);
    if let Err(e) = runtime.block_on(real_main(command, cli, env)) {
        nvlabel::logging::fatal(log_format, e.as_ref(), hint(&e));
        std::process::exit(if nvlabel::config::usage::is_usage(&e) {
            nvlabel::config::usage::EXIT
        } else {
            1
        });
    }
}

/// What to do about an error that ended the process, when there is a usual fix: NVML that does
/// not start is the commonest first-run failure.
fn hint(e: &anyhow::Error) -> Option<&'static str> {
    use nvlabel::daemon::DaemonError;
    use nvlabel::pass::PassError;
    let probe = match (e.downcast_ref::<DaemonError>(), e.downcast_ref::<PassError>()) {
        (Some(DaemonError::Pass(PassError::Probe(p))), _) | (_, Some(PassError::Probe(p))) => p,
        _ => return None,
    };
    probe.is_init().then_some(
        "install the driver or point --nvml-library at its libnvidia-ml.so.1; --fail-on-init-error=false labels this node without GPUs",
    )
}

async fn real_main(
    command: Option<CommandKind>,
    cli: Cli,
    env: HashMap<String, String>,
) -> anyhow::Result<()> {
    let source = ConfigSource::of(&cli, &|k| env.get(k).cloned())?;
    let dir_source = matches!(source, ConfigSource::Dir { .. });
    // The one resolution of the settings (again only when the configuration changes).
    let mut config = ConfigState::load(cli, env, source, None)?;
    let settings = config.loaded().settings.clone();
    let label_node = match (dir_source, &settings.node_name, command) {
        (true, Some(node), None | Some(CommandKind::Hook)) => Some(node.clone()),
        _ => None,
    };

    let metrics = Arc::new(Metrics::default());
    let publishes = matches!(command, None | Some(CommandKind::Prune));
    // A command that publishes needs a target that can be set up: say so before anything runs.
    let target = if publishes { Some(settings.target()?) } else { None };
    let needs_api = label_node.is_some() || target.as_ref().is_some_and(|t| t.needs_client());
    let client = if needs_api {
        Some(
            nvlabel::kubeapi::client(
                settings.kubeconfig.as_deref(),
                settings.kube_api_qps,
                settings.kube_api_burst,
            )
            .await?,
        )
    } else {
        None
    };
    if let (Some(node), Some(client)) = (&label_node, &client) {
        match nvlabel::kubeapi::node_view::get_config_label(client.clone(), node).await {
            Ok(label) => {
                if config.set_label(label) {
                    if let Err(e) = config.reload(false) {
                        metrics.config_reload_failures.inc();
                        tracing::error!(error = %e, "configuration rejected; keeping the last good one");
                    }
                }
            }
            // The watch below delivers the label once the API answers.
            Err(e) => {
                tracing::warn!(%node, error = %nvlabel::kubeapi::errors::Short(&e), "cannot read this node's config label yet; using the default config")
            }
        }
    }
    let settings = config.loaded().settings.clone();

    match command {
        // The snapshot records every fact, the extended labels' too, whatever the flags.
        Some(CommandKind::Probe) => {
            let all = nvlabel::config::Settings { extended_labels: true, ..settings };
            print!("{}", nvlabel::pass::snapshot(&all)?.to_yaml()?)
        }
        Some(CommandKind::Hook) => {
            print!("{}", nvlabel::pass::hook(&settings, config.loaded().config.sharing.clone())?)
        }
        Some(CommandKind::Health) => {
            let (code, report) = nvlabel::health::oneshot::check(&settings);
            print!("{report}");
            std::process::exit(code);
        }
        Some(CommandKind::Prune) => {
            let target = settings.target()?;
            target.build(client.as_ref()).await?.prune().await?;
        }
        None => {
            // Signals first: a SIGTERM from here on is a clean stop, never the default kill.
            let control = if settings.oneshot { None } else { Some(signals()?) };
            let mut daemon = Daemon::new(config, metrics.clone());
            daemon.set_client(client.clone());
            if settings.oneshot {
                return Ok(daemon.oneshot().await?);
            }
            // One watch of this Node serves both the Node writer and the config-label watch.
            let watched_node = match (&client, &settings.node_name) {
                (Some(_), Some(node)) if label_node.is_some() || matches!(target, Some(Target::Node(_))) => {
                    Some(node.clone())
                }
                _ => None,
            };
            let node_watch = match (&client, watched_node) {
                (Some(client), Some(node)) => {
                    Some(ObjectWatch::spawn(Api::<Node>::all(client.clone()), &node))
                }
                _ => None,
            };
            daemon.watch_objects(node_watch.clone());
            let health = nvlabel::health::monitor::start(&settings, client.clone())?;
            if let Some(target) = &target {
                metrics.zero(target);
            }
            let addr = settings.metrics_addr.clone();
            if !addr.is_empty() {
                let addr = nvlabel::http::parse_listen_addr(&addr).map_err(anyhow::Error::msg)?;
                let mut registry = prometheus_client::registry::Registry::default();
                metrics.register(&mut registry);
                if let Some(health) = &health {
                    health.register(&mut registry);
                }
                nvlabel::http::serve(addr, metrics.health.clone(), Arc::new(registry)).await?;
            }
            let labels = match (label_node, node_watch) {
                (Some(_), Some(watch)) => Some(nvlabel::kubeapi::node_view::views(watch).boxed()),
                _ => None,
            };
            daemon.serve(labels, control.expect("installed above")).await?;
        }
    }
    Ok(())
}

/// SIGHUP reloads; SIGTERM (what Kubernetes sends), SIGINT and SIGQUIT stop cleanly. A signal
/// that arrives during a pass waits in the channel, so none is lost.
fn signals() -> anyhow::Result<tokio::sync::mpsc::Receiver<Control>> {
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
