//! What a run starts from, decided in one place: whether it needs the API (and the client),
//! and, where the configuration follows this node's label, that label read once before the first
//! pass (the daemon's watch delivers later changes). The one file besides `main` and `config/`
//! that reads the settings: it turns them into the service's [`Plan`].

use crate::config::{CommandKind, ConfigSource, ConfigState, DaemonInputs, Settings};
use crate::daemon::service::Plan;
use crate::daemon::DaemonError;

/// A loaded configuration and the API client the command needs, if any.
pub struct Startup {
    /// The configuration, with this node's config label applied.
    pub config: ConfigState,
    /// The API client, when the command talks to the API.
    pub client: Option<kube::Client>,
    /// Config reloads rejected on the way (counted by the daemon's metrics).
    pub rejected_reloads: u64,
}

/// Connects to the API if `command` needs it (the target's writer, or the config label that
/// picks this node's ConfigMap key) and applies that label. An unreadable label is not fatal:
/// the default config is used until the watch reads it.
pub async fn prepare(command: Option<CommandKind>, mut config: ConfigState) -> Result<Startup, DaemonError> {
    let settings = config.loaded().settings.clone();
    let follows_label = matches!(config.source(), ConfigSource::Dir { .. })
        && settings.node_name.is_some()
        && matches!(command, None | Some(CommandKind::Hook));
    let publishes = matches!(command, None | Some(CommandKind::Prune));
    // A command that publishes needs a target that can be set up: say so before anything runs.
    let target = if publishes { Some(settings.target()?) } else { None };
    let needs_api = follows_label || target.as_ref().is_some_and(|t| t.needs_client());
    // `auto` asks the API about this node's ResourceSlices where it can; without API access it
    // labels for the device plugin, so a client that cannot be made is not fatal for it alone.
    let wants_slices = settings.slices_wanted() && command.is_none();
    let connect = || connect(&settings);
    let client = match (needs_api, wants_slices) {
        (true, _) => Some(connect().await?),
        (false, true) => match connect().await {
            Ok(client) => Some(client),
            Err(e) => {
                tracing::info!(error = %e, "no API access: --allocation-mode=auto labels for the device plugin");
                None
            }
        },
        (false, false) => None,
    };
    let mut rejected_reloads = 0;
    if let (true, Some(node), Some(client)) = (follows_label, &settings.node_name, &client) {
        match crate::kubeapi::node_view::get_config_label(client.clone(), node).await {
            Ok(label) => {
                if config.set_label(label) {
                    if let Err(e) = config.reload(false) {
                        rejected_reloads += 1;
                        tracing::error!(error = %e, "configuration rejected; keeping the last good one");
                    }
                }
            }
            Err(e) => {
                tracing::warn!(%node, error = %crate::kubeapi::errors::Short(&e), "cannot read this node's config label yet; using the default config")
            }
        }
    }
    Ok(Startup { config, client, rejected_reloads })
}

/// The API client as `settings` say (kubeconfig, QPS and burst): the one place a run makes it,
/// whichever command needs it; it connects when awaited.
pub fn connect(
    settings: &Settings,
) -> impl std::future::Future<Output = Result<kube::Client, crate::kubeapi::ClientError>> + '_ {
    client(settings.kubeconfig.as_deref(), settings.kube_api_qps, settings.kube_api_burst)
}

/// The API client from `kubeconfig` (in-cluster or `KUBECONFIG`'s without), at `qps` and `burst`
/// (0: no limit); what [`connect`] makes, for a command without settings (`nvlabel template`).
pub fn client(
    kubeconfig: Option<&str>,
    qps: f64,
    burst: u32,
) -> impl std::future::Future<Output = Result<kube::Client, crate::kubeapi::ClientError>> + '_ {
    crate::kubeapi::client(kubeconfig, qps, burst)
}

/// The daemon's plan from what [`prepare`] resolved.
pub fn plan(startup: Startup) -> Result<Plan, crate::publish::SetupError> {
    let Startup { config, client, rejected_reloads } = startup;
    let settings = &config.loaded().settings;
    let (target, slices_wanted, metrics_addr) =
        (settings.target()?, settings.slices_wanted(), settings.metrics_addr.clone());
    let inputs = Box::new(DaemonInputs::new(config));
    Ok(Plan { inputs, client, rejected_reloads, target, slices_wanted, metrics_addr })
}
