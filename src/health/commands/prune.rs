//! `nvlabel prune`'s part for health: what `--health` left on the Node goes, so that no
//! remediation tool acts on a condition nothing watches any more. The condition is removed, not
//! set `Unknown`: NodeHealthCheck and Karpenter's node repair act on a condition of a type and
//! status they are configured with (NodeHealthCheck's own defaults treat `Ready=Unknown` as
//! unhealthy, and its users copy that for other conditions), while a condition that is absent
//! matches no rule of either. `--health-only --all-nodes --instance NAME` is what the chart's
//! uninstall runs: only that release's health goes, and its daemons, still running, are told to
//! write none back ([`crate::health::writing::retirement`]). Without `--instance`, what any nvlabel wrote goes.

use crate::exit::Classify;
use crate::health::config::HealthConfig;
use crate::health::values::instance::Instance;
use crate::health::writing::condition::{health_managers, NodeCondition};
use crate::health::writing::retirement;
use crate::health::writing::taints::{self, TaintError};
use crate::kubeapi::errors::ApiFailure;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};

/// The target of this file's log lines: the module it was before health had rooms, so no
/// line an operator reads or filters on changed with the move.
const LOG: &str = "nvlabel::health::prune";

/// Every API request `--health-only --all-nodes` makes (the uninstall hook's RBAC grants exactly
/// these, the device taints' [`taints::PRUNE_CALLS`] where they are written and, with
/// `--instance`, [`retirement::PRUNE_CALLS`]): the nodes listed, nvlabel's status fields removed.
pub const API_CALLS: &[crate::publish::ApiCall] = &[
    crate::publish::ApiCall { namespaced: false, group: "", resource: "nodes", verb: "list" },
    crate::publish::ApiCall { namespaced: false, group: "", resource: "nodes/status", verb: "patch" },
];

/// Nodes listed per request with `--all-nodes`.
const PAGE: u32 = 500;

/// Why health's traces could not be removed.
#[derive(Debug, thiserror::Error)]
pub enum PruneError {
    /// `--all-nodes` without `--health-only` (labels are pruned one node at a time).
    #[error("nvlabel prune --all-nodes goes with --health-only: labels are pruned one node at a time, with --node-name")]
    AllNodesAlone,
    /// Neither `--node-name` nor `--all-nodes`: no node to prune.
    #[error("nvlabel prune --health-only needs --node-name (or NODE_NAME) or --all-nodes")]
    NoNodes,
    /// No API client.
    #[error(transparent)]
    Client(#[from] crate::kubeapi::ClientError),
    /// The nodes could not be listed.
    #[error(transparent)]
    List(ApiFailure),
    /// The condition and record could not be removed, or the instance not marked retired.
    #[error(transparent)]
    Condition(#[from] ApiFailure),
    /// The device taints could not be removed.
    #[error(transparent)]
    Taints(#[from] TaintError),
}

impl Classify for PruneError {
    fn is_bad_configuration(&self) -> bool {
        match self {
            PruneError::AllNodesAlone | PruneError::NoNodes => true,
            PruneError::Client(e) => e.is_bad_configuration(),
            PruneError::List(e) | PruneError::Condition(e) => e.is_bad_configuration(),
            PruneError::Taints(e) => e.is_bad_configuration(),
        }
    }
}

/// Removes this node's GPU health condition, its fault record and its device taints, where the
/// command talks to the API: the instance's, or with none every nvlabel's.
pub async fn prune(config: &HealthConfig, client: Option<&kube::Client>) -> Result<(), PruneError> {
    let (Some(client), Some(node)) = (client, &config.node) else { return Ok(()) };
    if let Some(instance) = &config.instance {
        retire(client, instance).await?;
    }
    let api: Api<Node> = Api::all(client.clone());
    let read = crate::kubeapi::retry::retry("reading the Node", Default::default(), || api.get(node)).await;
    let found = match read {
        Ok(found) => found,
        // Who may not read the Node could not have written health to it either.
        Err(kube::Error::Api(s)) if s.code == 403 || s.code == 404 => return Ok(()),
        Err(source) => {
            return Err(PruneError::Condition(ApiFailure {
                action: "read",
                object: format!("Node {node}"),
                verb: "get",
                resource: "nodes",
                source,
            }))
        }
    };
    if remove(client, config, &found).await? {
        tracing::info!(target: LOG, node = %node, "this node's GPU health condition and fault record removed");
    }
    taints::prune_for(Some(node), Some(client)).await?;
    Ok(())
}

/// Marks `instance` retired, so its daemons write nothing after the prune.
async fn retire(client: &kube::Client, instance: &Instance) -> Result<(), PruneError> {
    if retirement::retire(client, instance).await? {
        tracing::info!(target: LOG, %instance, "instance marked retired: its daemons write no GPU health from now on");
    } else {
        tracing::info!(target: LOG, %instance, "the instance's ServiceAccount is gone: no daemon of it is left to stop");
    }
    Ok(())
}

/// Removes what health wrote on `node` under the instance's field manager (with no instance,
/// under every field manager of nvlabel's); returns whether there was any.
async fn remove(client: &kube::Client, config: &HealthConfig, node: &Node) -> Result<bool, ApiFailure> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let managers = match &config.instance {
        Some(instance) => vec![instance.manager()],
        None => health_managers(node),
    };
    let mut removed = false;
    for manager in managers {
        let mut condition = NodeCondition::new(
            client.clone(),
            &name,
            &config.settings.condition_type,
            &manager,
            Default::default(),
        );
        removed |= condition.remove_from(node).await?;
    }
    Ok(removed)
}

/// `nvlabel prune --health-only`: health's traces only (the labels stay), on `--node-name` or,
/// with `all_nodes`, on every node health wrote to (the instance's, with `--instance`), through a
/// client `connect` makes (only once the command is known to make sense).
pub async fn health_only<F>(config: &HealthConfig, all_nodes: bool, connect: F) -> Result<(), PruneError>
where
    F: std::future::Future<Output = Result<kube::Client, crate::kubeapi::ClientError>>,
{
    if !all_nodes && config.node.is_none() {
        return Err(PruneError::NoNodes);
    }
    let client = connect.await?;
    if !all_nodes {
        return prune(config, Some(&client)).await;
    }
    if let Some(instance) = &config.instance {
        retire(&client, instance).await?;
    }
    let api: Api<Node> = Api::all(client.clone());
    let (mut nodes, mut cleared, mut rules) = (0, 0, 0);
    let mut page = ListParams::default().limit(PAGE);
    loop {
        let list = api.list(&page).await.map_err(|source| {
            PruneError::List(ApiFailure {
                action: "list",
                object: "the nodes".into(),
                verb: "list",
                resource: "nodes",
                source,
            })
        })?;
        for node in &list.items {
            let name = node.metadata.name.clone().unwrap_or_default();
            if remove(&client, config, node).await? {
                tracing::info!(target: LOG, node = %name, "GPU health condition and fault record removed");
                cleared += 1;
                // An instance's device taints are those of the nodes it wrote health to.
                if config.instance.is_some() {
                    rules += taints::prune(&client, &name).await?;
                }
            }
        }
        nodes += list.items.len();
        match list.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => page = page.continue_token(&token),
            None => break,
        }
    }
    if config.instance.is_none() {
        rules = taints::prune_all(&client).await?;
    }
    tracing::info!(target: LOG, nodes, cleared, device_taints = rules, "GPU health's traces removed from every node");
    Ok(())
}
