//! The Node object itself (no NFD): server-side apply of only `metadata.labels` under field
//! manager `nvlabel`. Labels we stop emitting disappear; labels anyone else set are untouched.

use super::retry::{retry, Backoff};
use super::{PublishError, Writer};
use crate::labels::Labels;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube::Client;
use serde_json::json;

/// The requests this writer (and `prune`) makes: read the Node, apply its labels.
pub const API_CALLS: &[super::ApiCall] = &[
    super::ApiCall { namespaced: false, group: "", resource: "nodes", verb: "get" },
    super::ApiCall { namespaced: false, group: "", resource: "nodes", verb: "patch" },
];

/// Field manager of our apply requests.
pub const FIELD_MANAGER: &str = "nvlabel";

/// Applies labels to one Node.
pub struct NodeLabels {
    api: Api<Node>,
    node: String,
    /// What the last successful apply set.
    last: Option<Labels>,
    /// The Node's allocatable resources at the last read.
    allocatable: std::sync::Arc<std::sync::Mutex<Option<std::collections::BTreeMap<String, String>>>>,
    backoff: Backoff,
}

/// What one attempt did.
enum Step {
    Skipped,
    Applied,
}

impl NodeLabels {
    /// A writer for `node`.
    pub fn new(client: Client, node: &str) -> NodeLabels {
        NodeLabels {
            api: Api::all(client),
            node: node.into(),
            last: None,
            allocatable: Default::default(),
            backoff: Backoff::default(),
        }
    }

    /// Sets how hard one publish retries.
    pub fn with_backoff(mut self, backoff: Backoff) -> NodeLabels {
        self.backoff = backoff;
        self
    }

    /// Reads the Node, then applies `labels` (empty: `nvlabel prune`) unless it already carries
    /// exactly what we last applied.
    async fn apply(&self, labels: &Labels, skip_if_current: bool) -> Result<Step, PublishError> {
        let (api, node) = (self.api.clone(), self.node.clone());
        let last = if skip_if_current { self.last.clone() } else { None };
        let seen = self.allocatable.clone();
        let step = retry("Node labels", self.backoff, || {
            let (api, node, last, seen) = (api.clone(), node.clone(), last.clone(), seen.clone());
            async move {
                let Some(current) = api.get_opt(&node).await? else { return Ok(None) };
                *seen.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some(crate::config_label::allocatable(&current));
                let carried = current.metadata.labels.clone().unwrap_or_default();
                // Drift (someone removed or changed one of ours) shows here and is repaired.
                if last.as_ref() == Some(labels) && labels.iter().all(|(k, v)| carried.get(k) == Some(v)) {
                    return Ok(Some(Step::Skipped));
                }
                // The UID makes the apply a precondition on this very Node: if it was deleted and
                // re-created, or is gone, the API server refuses instead of creating one.
                let body = json!({
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": node, "uid": current.metadata.uid, "labels": labels},
                });
                let params = PatchParams::apply(FIELD_MANAGER).force();
                api.patch(&node, &params, &Patch::Apply(&body)).await?;
                Ok(Some(Step::Applied))
            }
        })
        .await
        .map_err(|source| PublishError::Api { writer: "node", source })?;
        step.ok_or_else(|| PublishError::NodeMissing(self.node.clone()))
    }

    /// Removes every label this field manager applied (`nvlabel prune`).
    pub async fn prune(&mut self) -> Result<(), PublishError> {
        self.apply(&Labels::new(), false).await?;
        self.last = Some(Labels::new());
        Ok(())
    }
}

impl Writer for NodeLabels {
    fn name(&self) -> &'static str {
        "node"
    }

    fn node_allocatable(&self) -> Option<std::collections::BTreeMap<String, String>> {
        self.allocatable.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn prune(&mut self) -> BoxFuture<'_, Result<(), PublishError>> {
        Box::pin(async move {
            NodeLabels::prune(self).await?;
            tracing::info!(node = %self.node, "removed nvlabel's node labels");
            Ok(())
        })
    }

    fn publish<'a>(&'a mut self, labels: &'a Labels) -> BoxFuture<'a, Result<bool, PublishError>> {
        Box::pin(async move {
            let step = self.apply(labels, true).await?;
            self.last = Some(labels.clone());
            if let Step::Applied = step {
                tracing::debug!(node = %self.node, labels = labels.len(), "applied node labels");
            }
            Ok(matches!(step, Step::Applied))
        })
    }
}
