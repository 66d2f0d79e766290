//! Watching this node's `nvidia.com/device-plugin.config` label through the Kubernetes API.

use crate::config::select::CONFIG_LABEL;
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use std::collections::BTreeMap;

/// The requests the config-label watch makes: one get at start, then the watcher's list and watch.
pub const API_CALLS: &[crate::publish::ApiCall] = &[
    crate::publish::ApiCall { namespaced: false, group: "", resource: "nodes", verb: "get" },
    crate::publish::ApiCall { namespaced: false, group: "", resource: "nodes", verb: "list" },
    crate::publish::ApiCall { namespaced: false, group: "", resource: "nodes", verb: "watch" },
];

/// The label's value on a node object.
pub fn config_label(node: &Node) -> Option<String> {
    node.metadata.labels.as_ref()?.get(CONFIG_LABEL).cloned()
}

/// Reads the label once (for one-shot runs).
pub async fn get_config_label(client: Client, node_name: &str) -> Result<Option<String>, kube::Error> {
    let nodes: Api<Node> = Api::all(client);
    Ok(config_label(&nodes.get(node_name).await?))
}

/// What the daemon follows of its Node: the config label, and what the device plugin made
/// allocatable (for the sharing cross-check).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeView {
    /// `nvidia.com/device-plugin.config`.
    pub config_label: Option<String>,
    /// `status.allocatable`, quantities as the API gives them.
    pub allocatable: BTreeMap<String, String>,
}

impl NodeView {
    /// The view of a Node object.
    pub fn of(node: &Node) -> NodeView {
        NodeView { config_label: config_label(node), allocatable: allocatable(node) }
    }
}

/// A Node's `status.allocatable`.
pub fn allocatable(node: &Node) -> BTreeMap<String, String> {
    node.status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .map(|a| a.iter().map(|(k, q)| (k.clone(), q.0.clone())).collect())
        .unwrap_or_default()
}

/// The Node's view every time it changes (the first one included). API errors are retried with
/// the watcher's default backoff and logged; a deleted node reads as no label and nothing
/// allocatable.
pub fn node_changes(client: Client, node_name: &str) -> impl Stream<Item = NodeView> + Send + 'static {
    let nodes: Api<Node> = Api::all(client);
    let config = watcher::Config::default().fields(&format!("metadata.name={node_name}"));
    let mut last: Option<NodeView> = None;
    watcher(nodes, config).default_backoff().filter_map(move |event| {
        let value = match event {
            Ok(watcher::Event::Apply(node) | watcher::Event::InitApply(node)) => Some(NodeView::of(&node)),
            Ok(watcher::Event::Delete(_)) => Some(NodeView::default()),
            Ok(watcher::Event::Init | watcher::Event::InitDone) => None,
            Err(e) => {
                tracing::warn!(error = %e, "watching this node failed; retrying");
                None
            }
        };
        // Only changes matter: the watcher also reports unrelated updates of the node.
        let changed = match value {
            Some(v) if last.as_ref() != Some(&v) => {
                last = Some(v.clone());
                Some(v)
            }
            _ => None,
        };
        futures::future::ready(changed)
    })
}
