//! Where health goes in Kubernetes: the Node condition (server-side apply on `nodes/status`,
//! nvlabel's field manager, or the instance's `nvlabel/<namespace>/<name>`, only the one
//! condition and the record annotation beside it; a clear by hand applies it only onto the Node
//! as read, [`NodeCondition::apply_exact`]; Events are [`crate::health::writing::events`]). Every
//! request goes through [`crate::kubeapi`] as the label writers' do: the
//! client's deadline on each request, [`retry`] with the one backoff, and a failure as one
//! [`ApiFailure`] line naming the object, the status and, for a 403, the missing RBAC verb.

use crate::health::values::record::{Record, ANNOTATION};
use crate::health::values::verdict::{Existing, Status, Verdict};
use crate::kubeapi::backoff::FullJitter;
use crate::kubeapi::errors::ApiFailure;
use crate::kubeapi::retry::retry;
use k8s_openapi::api::core::v1::{Node, NodeCondition as KubeCondition, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Patch, PatchParams};
use kube::Api;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Mutex;

/// The field manager of the condition without `--instance` (the same as nvlabel's labels; SSA
/// keeps status apart); an instance's is its own ([`crate::health::writing::retirement`]).
pub use crate::kubeapi::FIELD_MANAGER;
/// Every API request health makes (its RBAC must grant exactly these): one read of the Node,
/// the watch of this Node (its expected GPU count label), the condition's patch of
/// `nodes/status`, and Events (created, and patched to count a repeat), which are namespaced but
/// always in [`crate::health::writing::events::EVENTS_NAMESPACE`], not nvlabel's own namespace.
pub const API_CALLS: &[crate::publish::ApiCall] = &[
    crate::publish::ApiCall { namespaced: false, group: "", resource: "nodes", verb: "get" },
    crate::publish::ApiCall { namespaced: false, group: "", resource: "nodes", verb: "list" },
    crate::publish::ApiCall { namespaced: false, group: "", resource: "nodes", verb: "watch" },
    crate::publish::ApiCall { namespaced: false, group: "", resource: "nodes/status", verb: "patch" },
    crate::publish::ApiCall { namespaced: true, group: "events.k8s.io", resource: "events", verb: "create" },
    crate::publish::ApiCall { namespaced: true, group: "events.k8s.io", resource: "events", verb: "patch" },
];

/// What the last read of the Node said, kept for the applies that follow.
#[derive(Debug, Default)]
struct Seen {
    /// The Node's UID: each apply is a precondition on it. `None`: read the Node first.
    uid: Option<String>,
    /// The status last written and when it became that.
    transition: Option<(Status, Time)>,
    /// Whether nvlabel's own field manager still owns fields of the status while an instance
    /// writes under its own (health written before the instance had one): given up after the
    /// instance's first write, so the instance's prune removes everything.
    legacy: bool,
    /// The Node's resourceVersion as last read: [`NodeCondition::apply_exact`]'s precondition.
    resource_version: Option<String>,
    /// The other field managers of nvlabel's health that own fields of the status as last read
    /// (another instance's; nvlabel's own is `legacy`).
    others: Vec<String>,
}

/// This Node's health condition.
pub struct NodeCondition {
    api: Api<Node>,
    node: String,
    condition_type: String,
    /// The field manager the condition is written under.
    manager: String,
    backoff: FullJitter,
    /// Behind a lock only so that the retried attempts, which borrow `self`, can update it.
    seen: Mutex<Seen>,
}

impl NodeCondition {
    /// The condition `condition_type` of Node `node`, written under the field manager `manager`;
    /// each read or apply retries as hard as `backoff` says.
    pub fn new(
        client: kube::Client,
        node: &str,
        condition_type: &str,
        manager: &str,
        backoff: FullJitter,
    ) -> NodeCondition {
        NodeCondition {
            api: Api::all(client),
            node: node.into(),
            condition_type: condition_type.into(),
            manager: manager.into(),
            backoff,
            seen: Mutex::default(),
        }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The Node's UID, once read.
    pub fn uid(&self) -> Option<String> {
        self.seen().uid.clone()
    }

    /// The condition type it writes.
    pub fn condition_type(&self) -> &str {
        &self.condition_type
    }

    /// The field manager it writes under.
    pub fn manager(&self) -> &str {
        &self.manager
    }

    /// Whether nvlabel's own field manager still holds fields of the status this instance's
    /// manager should own (health written before `--instance`): the next apply hands them over.
    pub fn legacy(&self) -> bool {
        self.seen().legacy
    }

    /// The other instances' field managers that own fields of the status as last read: a write
    /// under this one cannot remove what they wrote.
    pub fn others(&self) -> Vec<String> {
        self.seen().others.clone()
    }

    /// A failed request on the Node as one line; `applying` tells the apply from the read.
    fn failure(&self, applying: bool, source: kube::Error) -> ApiFailure {
        let (action, verb, resource) = match applying {
            true => ("apply the health condition to", "patch", "nodes/status"),
            false => ("read", "get", "nodes"),
        };
        ApiFailure { action, object: format!("Node {}", self.node), verb, resource, source }
    }

    /// One read of the Node: notes its UID and our condition's last transition.
    async fn get(&self) -> Result<Option<Existing>, kube::Error> {
        let node = self.api.get(&self.node).await?;
        let legacy = self.manager != FIELD_MANAGER && owns_status(&node, FIELD_MANAGER);
        let mut others = health_managers(&node);
        others.retain(|m| *m != self.manager && m != FIELD_MANAGER);
        let found = node
            .status
            .and_then(|s| s.conditions)
            .into_iter()
            .flatten()
            .find(|c| c.type_ == self.condition_type);
        let record = node.metadata.annotations.and_then(|mut a| a.remove(ANNOTATION));
        let mut seen = self.seen();
        seen.uid = node.metadata.uid;
        seen.legacy = legacy;
        seen.resource_version = node.metadata.resource_version;
        seen.others = others;
        Ok(found.map(|c| {
            let status = Status::parse(&c.status);
            if let Some(t) = c.last_transition_time {
                seen.transition = Some((status, t));
            }
            Existing {
                status,
                reason: c.reason.unwrap_or_default(),
                message: c.message.unwrap_or_default(),
                record,
            }
        }))
    }

    /// Reads the condition as the Node has it now (what an earlier nvlabel recorded).
    pub async fn read(&mut self) -> Result<Option<Existing>, ApiFailure> {
        retry("reading the health condition", self.backoff, || self.get())
            .await
            .map_err(|source| self.failure(false, source))
    }

    /// Applies the condition (and nothing else of the status) under nvlabel's field manager. A
    /// 409 (the UID precondition failed: the Node was re-created) reads the Node again.
    pub async fn apply(&mut self, v: &Verdict) -> Result<(), ApiFailure> {
        let applying = AtomicBool::new(false);
        let params = PatchParams::apply(&self.manager).force();
        let written = retry("applying the health condition", self.backoff, || async {
            applying.store(false, Relaxed);
            if self.uid().is_none() {
                self.get().await?;
            }
            applying.store(true, Relaxed);
            let (body, since) = self.body(v);
            match self.api.patch_status(&self.node, &params, &Patch::Apply(&body)).await {
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    self.seen().uid = None;
                    Err(kube::Error::Api(s))
                }
                other => other.map(|_| since),
            }
        })
        .await
        .map_err(|source| self.failure(applying.load(Relaxed), source))?;
        self.seen().transition = Some((v.status, written));
        self.hand_over().await
    }

    /// Applies the condition onto the Node exactly as [`NodeCondition::read`] last read it (its
    /// resourceVersion a precondition): `false`, and nothing written, where the Node changed
    /// since (read it again and decide again). What a person's clear writes, so that it clears
    /// only what it read, never a fault written meanwhile.
    pub async fn apply_exact(&mut self, v: &Verdict) -> Result<bool, ApiFailure> {
        let params = PatchParams::apply(&self.manager).force();
        let written = retry("clearing the health condition", self.backoff, || async {
            let (mut body, since) = self.body(v);
            body.metadata.resource_version = self.seen().resource_version.clone();
            match self.api.patch_status(&self.node, &params, &Patch::Apply(&body)).await {
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(None),
                other => other.map(|_| Some(since)),
            }
        })
        .await
        .map_err(|source| self.failure(true, source))?;
        let Some(since) = written else { return Ok(false) };
        self.seen().transition = Some((v.status, since));
        self.hand_over().await?;
        Ok(true)
    }

    /// The apply body of `v` (the condition's `lastTransitionTime` kept while its status is),
    /// and that time.
    fn body(&self, v: &Verdict) -> (Node, Time) {
        let now = Time(crate::health::timestamp());
        let seen = self.seen();
        let since = match &seen.transition {
            Some((status, at)) if *status == v.status => at.clone(),
            _ => now.clone(),
        };
        let condition = condition(&self.condition_type, v, since.clone(), now);
        (apply_body(&self.node, seen.uid.clone(), condition, v.record.as_ref()), since)
    }

    /// After a write under an instance's manager: nvlabel's own manager lets go of what it held
    /// of the condition (what both set stays), so that the instance's prune leaves nothing behind.
    async fn hand_over(&mut self) -> Result<(), ApiFailure> {
        if !std::mem::take(&mut self.seen().legacy) {
            return Ok(());
        }
        let uid = self.uid();
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let patch = Patch::Apply(empty(&self.node, uid));
        retry("handing the health condition to the instance", self.backoff, || {
            self.api.patch_status(&self.node, &params, &patch)
        })
        .await
        .map_err(|source| self.failure(true, source))?;
        Ok(())
    }
}

impl NodeCondition {
    /// Removes what health wrote to the Node's status (the condition and the record annotation)
    /// by applying an empty status under its field manager: fields another writer also set
    /// stay (a person's clearing by hand, say). Returns whether there was anything of nvlabel's;
    /// without, nothing is written (so a node health never ran on needs no grant).
    pub async fn remove(&mut self) -> Result<bool, ApiFailure> {
        let node = match retry("reading the Node", self.backoff, || self.api.get(&self.node)).await {
            Ok(node) => node,
            // Who may not read the Node could not have written health to it either.
            Err(kube::Error::Api(s)) if s.code == 403 => return Ok(false),
            Err(source) => return Err(self.failure(false, source)),
        };
        self.remove_from(&node).await
    }

    /// [`NodeCondition::remove`] with the Node as just read (listed, say).
    pub async fn remove_from(&mut self, node: &Node) -> Result<bool, ApiFailure> {
        if !owns_status(node, &self.manager) {
            return Ok(false);
        }
        let params = PatchParams::apply(&self.manager).force();
        let patch = Patch::Apply(empty(&self.node, node.metadata.uid.clone()));
        retry("removing the health condition", self.backoff, || {
            self.api.patch_status(&self.node, &params, &patch)
        })
        .await
        .map_err(|source| self.failure(true, source))?;
        Ok(true)
    }
}

/// The field managers health wrote `node`'s status under (nvlabel's own and instances'; health's
/// condition and record are written there, and nothing else of nvlabel's is), each once.
pub fn health_managers(node: &Node) -> Vec<String> {
    let mut found: Vec<String> = node
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| m.subresource.as_deref() == Some("status"))
        .filter_map(|m| m.manager.clone())
        .filter(|m| crate::health::values::instance::is_health_manager(m))
        .collect();
    found.sort();
    found.dedup();
    found
}

/// Whether `manager` owns anything of `node`'s status.
pub fn owns_status(node: &Node, manager: &str) -> bool {
    node.metadata
        .managed_fields
        .iter()
        .flatten()
        .any(|m| m.manager.as_deref() == Some(manager) && m.subresource.as_deref() == Some("status"))
}

/// The apply that gives up everything a manager set in `node`'s status: the Node by name (and
/// UID, a precondition) and nothing else.
fn empty(node: &str, uid: Option<String>) -> Node {
    Node { metadata: ObjectMeta { name: Some(node.into()), uid, ..ObjectMeta::default() }, ..Node::default() }
}

/// The condition `condition_type` as the Node gets it: the verdict, the time its status began
/// (`since`) and `now`.
pub fn condition(condition_type: &str, v: &Verdict, since: Time, now: Time) -> KubeCondition {
    KubeCondition {
        type_: condition_type.into(),
        status: v.status.as_str().into(),
        reason: Some(v.reason.clone()),
        message: Some(v.message.clone()),
        last_transition_time: Some(since),
        last_heartbeat_time: Some(now),
    }
}

/// The server-side apply body: the Node by name with only `condition` in its status and, while
/// there are faults, their `record` in the annotation [`ANNOTATION`] (a status write keeps it; see
/// [`crate::health::values::record`]). Without a record the annotation is left out, so the apply removes ours.
/// The UID makes it a precondition on this very Node (not one re-created meanwhile).
pub fn apply_body(
    node: &str,
    uid: Option<String>,
    condition: KubeCondition,
    record: Option<&Record>,
) -> Node {
    let annotations = record.map(|r| [(ANNOTATION.to_string(), r.to_annotation())].into());
    Node {
        metadata: ObjectMeta { name: Some(node.into()), uid, annotations, ..ObjectMeta::default() },
        status: Some(NodeStatus { conditions: Some(vec![condition]), ..NodeStatus::default() }),
        ..Node::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_typed_condition_sends_the_bytes_the_json_form_sent() {
        let at = |t: &str| Time(t.parse().unwrap());
        let (since, now) = (at("2026-01-02T03:04:05Z"), at("2026-01-02T03:09:00Z"));
        let v = Verdict {
            status: crate::health::values::verdict::Status::Unknown,
            reason: "NvmlUnavailable".into(),
            message: "NVML cannot report GPU health: no driver".into(),
            record: None,
        };
        let typed = apply_body(
            "gpu-1",
            Some("uid-1".into()),
            condition("GPUHealthy", &v, since.clone(), now.clone()),
            None,
        );
        // What nvlabel sent before the condition was typed (and before the record, which only a
        // node with faults gets: without one the body is still exactly this).
        let before = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "gpu-1", "uid": "uid-1"},
            "status": {"conditions": [{
                "type": "GPUHealthy",
                "status": v.status.as_str(),
                "reason": v.reason,
                "message": v.message,
                "lastTransitionTime": since,
                "lastHeartbeatTime": now,
            }]},
        });
        assert_eq!(serde_json::to_string(&typed).unwrap(), serde_json::to_string(&before).unwrap());
    }
}
