//! This node's `nvidia.com/device-plugin.config` label, read once at start, and what the daemon
//! follows of its Node through the one Node watch: that label and the allocatable resources.

use crate::kubeapi::object_watch::{ObjectWatch, Seen};
use futures::Stream;
use k8s_openapi::api::core::v1::Node;
use kube::{Api, Client};
use std::collections::BTreeMap;

/// The node label that names the config key.
pub const CONFIG_LABEL: &str = "nvidia.com/device-plugin.config";

/// The requests the config-label watch makes: one get at start, then the watcher's list and watch.
pub const API_CALLS: &[crate::kubeapi::ApiCall] = &[
    crate::kubeapi::ApiCall { namespaced: false, group: "", resource: "nodes", verb: "get" },
    crate::kubeapi::ApiCall { namespaced: false, group: "", resource: "nodes", verb: "list" },
    crate::kubeapi::ApiCall { namespaced: false, group: "", resource: "nodes", verb: "watch" },
];

/// The label's value on a node object.
pub fn config_label(node: &Node) -> Option<String> {
    node.metadata.labels.as_ref()?.get(CONFIG_LABEL).cloned()
}

/// Reads the label once, at start, so the first pass of any run (one-shot, the hook, the daemon)
/// already uses the node's config; the daemon then follows it through [`views`].
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

/// The Node's view every time it changes (the first one included), from one watch of the Node
/// (shared with the Node writer in Node mode, so there is one Node watch, not two). A deleted
/// node reads as no label and nothing allocatable.
pub fn views(watch: ObjectWatch<Node>) -> impl Stream<Item = NodeView> + Send + 'static {
    futures::stream::unfold((watch, None::<NodeView>), |(mut watch, mut last)| async move {
        loop {
            let view = match watch.seen() {
                Seen::Unknown => None,
                Seen::Absent => Some(NodeView::default()),
                Seen::Present(node) => Some(NodeView::of(&node)),
            };
            // Only changes matter: the watch also reports unrelated updates of the node.
            if let Some(view) = view.filter(|v| last.as_ref() != Some(v)) {
                last = Some(view.clone());
                return Some((view, (watch, last)));
            }
            watch.changed().await;
        }
    })
}
