//! The Node object itself (no NFD): server-side apply of only `metadata.labels` under field
//! manager `nvlabel`. Labels we stop emitting disappear; labels anyone else set are untouched.

use super::{client_for, ApiCalls, Building, FailureReason, Watches, WriterPlan};
use super::{DaemonWriter, PublishError, Writer};
use crate::kubeapi::backoff::FullJitter;
use crate::kubeapi::errors::ApiFailure;
use crate::kubeapi::object_watch::{resource_version, ObjectWatch, Seen};
use crate::kubeapi::retry::retry;
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

/// What the daemon adds: it watches its Node instead of reading it every pass.
pub const WATCH_API_CALLS: &[super::ApiCall] = &[
    super::ApiCall { namespaced: false, group: "", resource: "nodes", verb: "list" },
    super::ApiCall { namespaced: false, group: "", resource: "nodes", verb: "watch" },
];

/// Field manager of our apply requests.
pub use crate::kubeapi::FIELD_MANAGER;

/// Applies labels to one Node.
pub struct NodeLabels {
    api: Api<Node>,
    node: String,
    /// What the last successful apply set.
    last: Option<Labels>,
    /// The Node's allocatable resources at the last read.
    allocatable: std::sync::Arc<std::sync::Mutex<Option<std::collections::BTreeMap<String, String>>>>,
    backoff: FullJitter,
    /// The Node as our last apply returned it.
    applied: std::sync::Arc<std::sync::Mutex<Option<Node>>>,
    /// The Node as its watch last reported it; without one, each publish reads the Node.
    watch: Option<ObjectWatch<Node>>,
    /// Whether each publish says what it did (the one-shot run: no daemon's publisher says it).
    saying: bool,
}

/// What the watch says to do, before any request.
enum Decision {
    /// It knows nothing yet: read the Node.
    Read,
    /// The Node does not exist: nothing to do (it is never created).
    Missing,
    /// The Node carries exactly what we would apply.
    Skip,
    /// Apply, with this UID as the precondition.
    Apply(Option<String>),
}

/// What one attempt did.
enum Step {
    Skipped,
    /// Applied; what it changed where the Node was read first (not from a watch).
    Applied(Option<Changes>),
}

/// What an apply changes of the Node's labels, worded as the daemon's publish lines word them.
#[derive(Debug, Default, PartialEq, Eq)]
struct Changes {
    /// `key=value` of each label the Node did not carry.
    added: Vec<String>,
    /// `key: old -> new` of each label it carried with another value.
    changed: Vec<String>,
    /// Each label nvlabel applied there before and applies no more.
    removed: Vec<String>,
}

impl Changes {
    /// What applying `labels` changes on `node`, as read.
    fn of(node: &Node, labels: &Labels) -> Changes {
        let carried = node.metadata.labels.clone().unwrap_or_default();
        let mut c = Changes::default();
        for (k, v) in labels {
            match carried.get(k) {
                None => c.added.push(format!("{k}={v}")),
                Some(old) if old != v => c.changed.push(format!("{k}: {old} -> {v}")),
                Some(_) => {}
            }
        }
        let owned = owned_labels(node).unwrap_or_default();
        c.removed =
            owned.into_iter().filter(|k| carried.contains_key(k) && !labels.contains_key(k)).collect();
        c
    }
}

impl NodeLabels {
    /// The writer's name in logs and metrics.
    pub const NAME: &'static str = "node";

    /// A writer for `node`.
    pub fn new(client: Client, node: &str) -> NodeLabels {
        NodeLabels {
            api: Api::all(client),
            node: node.into(),
            last: None,
            allocatable: Default::default(),
            backoff: FullJitter::default(),
            applied: Default::default(),
            watch: None,
            saying: false,
        }
    }

    /// Each publish says what it wrote where, in one `INFO` line (the one-shot run, which has no
    /// daemon's publisher to say it).
    pub fn saying(mut self) -> NodeLabels {
        self.saying = true;
        self
    }

    /// Decides from `watch` (this Node's) instead of reading the Node every pass: a publish that
    /// changes nothing sends nothing.
    pub fn with_watch(mut self, watch: ObjectWatch<Node>) -> NodeLabels {
        self.watch = Some(watch);
        self
    }

    /// Whether `node` carries every label of `labels` with its value.
    fn carries(node: &Node, labels: &Labels) -> bool {
        let carried = node.metadata.labels.as_ref();
        labels.iter().all(|(k, v)| carried.and_then(|c| c.get(k)) == Some(v))
    }

    /// Whether applying `labels` would change nothing on `node`: it carries them, and our field
    /// manager owns exactly their keys (so nothing of ours is left to remove). After a restart
    /// with unchanged hardware this is what spares the write.
    fn current(&self, node: &Node, labels: &Labels) -> bool {
        Self::carries(node, labels)
            && (self.last.as_ref() == Some(labels)
                || owned_labels(node).is_some_and(|owned| owned.iter().eq(labels.keys())))
    }

    /// The newer of the watch's view and the Node our last apply returned (by resourceVersion):
    /// a watch that lags or is down never makes an apply look undone.
    fn freshest(&self, watched: Node) -> Node {
        let applied = self.applied.lock().unwrap_or_else(|p| p.into_inner()).clone();
        match applied {
            Some(a)
                if resource_version(&a) > resource_version(&watched)
                    && a.metadata.uid == watched.metadata.uid =>
            {
                a
            }
            _ => watched,
        }
    }

    /// What the watch settles without a request. A view from before a fault (the watch is down or
    /// has not listed since) settles nothing: someone may have changed the Node meanwhile.
    fn decided_by_watch(&self, labels: &Labels, skip_if_current: bool) -> Decision {
        let Some(watch) = self.watch.as_ref() else { return Decision::Read };
        match watch.seen_current() {
            Seen::Unknown => Decision::Read,
            Seen::Absent => Decision::Missing,
            Seen::Present(node) => {
                let node = self.freshest(node);
                *self.allocatable.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some(crate::kubeapi::node_view::allocatable(&node));
                if skip_if_current && self.current(&node, labels) {
                    Decision::Skip
                } else {
                    Decision::Apply(node.metadata.uid.clone())
                }
            }
        }
    }

    /// Sets how hard one publish retries.
    pub fn with_backoff(mut self, backoff: FullJitter) -> NodeLabels {
        self.backoff = backoff;
        self
    }

    /// Reads the Node, then applies `labels` (empty: `nvlabel prune`) unless it already carries
    /// exactly what we last applied.
    async fn apply(&self, labels: &Labels, skip_if_current: bool) -> Result<Step, PublishError> {
        let (api, node) = (self.api.clone(), self.node.clone());
        let seen = self.allocatable.clone();
        let applied = self.applied.clone();
        let known_uid = match self.decided_by_watch(labels, skip_if_current) {
            Decision::Skip => return Ok(Step::Skipped),
            Decision::Missing => return Err(PublishError::NodeMissing(self.node.clone())),
            Decision::Apply(uid) => Some(uid),
            Decision::Read => None,
        };
        // Whether the request that failed was the apply (else the read), for the message.
        let applying = std::sync::atomic::AtomicBool::new(false);
        let applying = &applying;
        let step = retry("Node labels", self.backoff, || {
            let (api, node, seen, applied) = (api.clone(), node.clone(), seen.clone(), applied.clone());
            let known_uid = known_uid.clone();
            async move {
                applying.store(known_uid.is_some(), std::sync::atomic::Ordering::Relaxed);
                // The watch already said what is on the Node: apply right away, no read.
                let (uid, changes) = match known_uid {
                    Some(uid) => (uid, None),
                    None => {
                        let Some(current) = api.get_opt(&node).await? else { return Ok(None) };
                        *seen.lock().unwrap_or_else(|p| p.into_inner()) =
                            Some(crate::kubeapi::node_view::allocatable(&current));
                        // Drift (someone removed or changed one of ours) shows here and is repaired.
                        if skip_if_current && self.current(&current, labels) {
                            return Ok(Some(Step::Skipped));
                        }
                        (current.metadata.uid.clone(), Some(Changes::of(&current, labels)))
                    }
                };
                // The UID makes the apply a precondition on this very Node: if it was deleted and
                // re-created, or is gone, the API server refuses instead of creating one.
                applying.store(true, std::sync::atomic::Ordering::Relaxed);
                let params = PatchParams::apply(FIELD_MANAGER).force();
                let stored =
                    api.patch(&node, &params, &Patch::Apply(&apply_body(&node, uid, labels))).await?;
                *applied.lock().unwrap_or_else(|p| p.into_inner()) = Some(stored);
                Ok(Some(Step::Applied(changes)))
            }
        })
        .await
        .map_err(|source| self.failure(applying.load(std::sync::atomic::Ordering::Relaxed), source))?;
        step.ok_or_else(|| PublishError::NodeMissing(self.node.clone()))
    }

    /// A failed request on this Node as one line.
    fn failure(&self, applying: bool, source: kube::Error) -> PublishError {
        let (action, verb) = if applying { ("apply labels to", "patch") } else { ("read", "get") };
        let object = format!("Node {}", self.node);
        PublishError::Api(ApiFailure { action, object, verb, resource: "nodes", source })
    }

    /// Removes every label this field manager applied (`nvlabel prune`).
    pub async fn prune(&mut self) -> Result<(), PublishError> {
        self.apply(&Labels::new(), false).await?;
        self.last = Some(Labels::new());
        Ok(())
    }
}

/// The Node's labels before their writer is built.
pub struct NodePlan<'a> {
    /// The Node.
    pub node: &'a str,
}

impl WriterPlan for NodePlan<'_> {
    fn name(&self) -> &'static str {
        NodeLabels::NAME
    }

    fn api_calls(&self) -> ApiCalls {
        ApiCalls { each: API_CALLS, watch: WATCH_API_CALLS }
    }

    fn failure_reasons(&self) -> &'static [FailureReason] {
        use FailureReason::*;
        &[Conflict, Throttled, Server, Refused, Connection, NodeMissing, Timeout, Setup]
    }

    fn build_daemon<'a>(
        &'a self,
        client: Option<&'a Client>,
        watches: &'a Watches,
    ) -> Building<'a, dyn DaemonWriter> {
        Box::pin(async move {
            let writer = NodeLabels::new(client_for(client, NodeLabels::NAME)?, self.node);
            let writer: Box<dyn DaemonWriter> = Box::new(match watches {
                Watches::On(Some(w)) => writer.with_watch(w.clone()),
                Watches::On(None) | Watches::Off => writer,
            });
            Ok(writer)
        })
    }

    /// No daemon's publisher says what the one-shot run wrote: the Node writer does.
    fn build<'a>(&'a self, client: Option<&'a Client>) -> Building<'a, dyn Writer> {
        Box::pin(async move {
            let writer = NodeLabels::new(client_for(client, NodeLabels::NAME)?, self.node).saying();
            let writer: Box<dyn Writer> = Box::new(writer);
            Ok(writer)
        })
    }
}

impl DaemonWriter for NodeLabels {
    fn changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.watch.as_ref().map(ObjectWatch::changes)
    }

    fn drifted(&self) -> bool {
        match (self.watch.as_ref().map(ObjectWatch::seen), &self.last) {
            (Some(Seen::Present(node)), Some(last)) => !Self::carries(&self.freshest(node), last),
            _ => false,
        }
    }

    fn node_allocatable(&self) -> Option<std::collections::BTreeMap<String, String>> {
        self.allocatable.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn rival(&self) -> Option<String> {
        let (Some(Seen::Present(node)), Some(last)) =
            (self.watch.as_ref().map(ObjectWatch::seen), &self.last)
        else {
            return None;
        };
        super::rival::field_managers(&node.metadata, FIELD_MANAGER, ["f:metadata", "f:labels"], last.keys())
    }
}

impl Writer for NodeLabels {
    fn name(&self) -> &'static str {
        NodeLabels::NAME
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
            match (&step, self.saying) {
                (Step::Applied(Some(c)), true) => {
                    let (added, changed, removed) =
                        (c.added.join(", "), c.changed.join(", "), c.removed.join(", "));
                    let (writer, node, labels) = (Self::NAME, &self.node, labels.len());
                    tracing::info!(writer, %node, labels, added, changed, removed, "published labels");
                }
                (Step::Skipped, true) => {
                    let (writer, node, labels) = (Self::NAME, &self.node, labels.len());
                    tracing::info!(writer, %node, labels, "labels already published; nothing changed");
                }
                (Step::Applied(_), _) => {
                    tracing::debug!(node = %self.node, labels = labels.len(), "applied node labels")
                }
                (Step::Skipped, false) => {}
            }
            Ok(matches!(step, Step::Applied(_)))
        })
    }
}

/// The label keys `node`'s managedFields say our field manager applied, if it applied any.
fn owned_labels(node: &Node) -> Option<std::collections::BTreeSet<String>> {
    // Health's apply to nodes/status has an entry of its own (`subresource: status`), which owns
    // no labels: it must not be taken for the labels' entry.
    let entry = node.metadata.managed_fields.as_ref()?.iter().find(|m| {
        m.manager.as_deref() == Some(FIELD_MANAGER)
            && m.operation.as_deref() == Some("Apply")
            && m.subresource.is_none()
    })?;
    let labels = entry.fields_v1.as_ref()?.0.get("f:metadata")?.get("f:labels")?.as_object()?;
    Some(labels.keys().filter_map(|k| k.strip_prefix("f:")).map(String::from).collect())
}

/// The server-side apply body for `labels` on Node `name`. The UID makes the apply a precondition
/// on this very Node: if it was deleted and re-created, or is gone, the API server refuses (409)
/// instead of creating a Node or labelling another one of the same name.
pub fn apply_body(name: &str, uid: Option<String>, labels: &Labels) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": uid, "labels": labels},
    })
}

#[cfg(test)]
#[path = "node_tests.rs"]
mod tests;
