//! Where health goes in Kubernetes: the Node condition (server-side apply on `nodes/status`,
//! nvlabel's field manager, only the one condition) and Events on the Node (deduplicated and
//! rate-limited).

use super::sticky::Verdict;
use k8s_openapi::api::core::v1::{Node, ObjectReference};
use k8s_openapi::api::events::v1::Event as KubeEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::json;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// The field manager of the condition (the same as nvlabel's labels; SSA keeps status apart).
pub const FIELD_MANAGER: &str = "nvlabel";
/// How long one API call may take.
const CALL_DEADLINE: Duration = Duration::from_secs(15);
/// An identical Event is not sent again within this time.
const DEDUP_WINDOW: Duration = Duration::from_secs(600);
/// At most this many Events per [`RATE_WINDOW`].
const RATE_LIMIT: usize = 10;
/// The window of [`RATE_LIMIT`].
const RATE_WINDOW: Duration = Duration::from_secs(60);
/// An Event note's limit in the API.
const NOTE_LIMIT: usize = 1024;
/// Where Node Events go (where the kubelet puts them).
pub const EVENTS_NAMESPACE: &str = "default";

/// Every API request health makes (its RBAC must grant exactly these): one read of the Node,
/// the condition's patch of `nodes/status`, and Events, which are namespaced but always in
/// [`EVENTS_NAMESPACE`], not nvlabel's own namespace.
pub const API_CALLS: &[crate::publish::ApiCall] = &[
    crate::publish::ApiCall { namespaced: false, group: "", resource: "nodes", verb: "get" },
    crate::publish::ApiCall { namespaced: false, group: "", resource: "nodes/status", verb: "patch" },
    crate::publish::ApiCall { namespaced: true, group: "events.k8s.io", resource: "events", verb: "create" },
];

/// Why a health write failed.
#[derive(Debug, thiserror::Error)]
pub enum HealthPublishError {
    /// The API server refused or failed.
    #[error("{what} of Node {node}: {source}")]
    Api {
        /// What was attempted.
        what: &'static str,
        /// The Node.
        node: String,
        /// The API error.
        source: kube::Error,
    },
    /// The API server did not answer in time.
    #[error("{what} of Node {node}: no answer within {CALL_DEADLINE:?}")]
    Timeout {
        /// What was attempted.
        what: &'static str,
        /// The Node.
        node: String,
    },
    /// The Node does not exist.
    #[error("Node {0} not found")]
    NodeMissing(String),
}

/// The condition as it is on the Node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Existing {
    /// Status.
    pub status: String,
    /// Reason.
    pub reason: String,
    /// Message.
    pub message: String,
}

/// This Node's health condition.
pub struct NodeCondition {
    api: Api<Node>,
    node: String,
    condition_type: String,
    uid: Option<String>,
    /// The status last written and when it became that.
    transition: Option<(String, Time)>,
}

async fn call<T>(
    what: &'static str,
    node: &str,
    f: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, HealthPublishError> {
    match tokio::time::timeout(CALL_DEADLINE, f).await {
        Ok(r) => r.map_err(|source| HealthPublishError::Api { what, node: node.into(), source }),
        Err(_) => Err(HealthPublishError::Timeout { what, node: node.into() }),
    }
}

impl NodeCondition {
    /// The condition `condition_type` of Node `node`.
    pub fn new(client: kube::Client, node: &str, condition_type: &str) -> NodeCondition {
        NodeCondition {
            api: Api::all(client),
            node: node.into(),
            condition_type: condition_type.into(),
            uid: None,
            transition: None,
        }
    }

    /// The Node's UID, once read.
    pub fn uid(&self) -> Option<&str> {
        self.uid.as_deref()
    }

    /// Reads the condition as the Node has it now (what an earlier nvlabel recorded).
    pub async fn read(&mut self) -> Result<Option<Existing>, HealthPublishError> {
        let node = call("reading the health condition", &self.node, self.api.get_opt(&self.node))
            .await?
            .ok_or_else(|| HealthPublishError::NodeMissing(self.node.clone()))?;
        self.uid = node.metadata.uid.clone();
        let found = node
            .status
            .and_then(|s| s.conditions)
            .into_iter()
            .flatten()
            .find(|c| c.type_ == self.condition_type);
        Ok(found.map(|c| {
            if let Some(t) = c.last_transition_time {
                self.transition = Some((c.status.clone(), t));
            }
            Existing {
                status: c.status,
                reason: c.reason.unwrap_or_default(),
                message: c.message.unwrap_or_default(),
            }
        }))
    }

    /// Applies the condition (and nothing else of the status) under nvlabel's field manager.
    pub async fn apply(&mut self, v: &Verdict) -> Result<(), HealthPublishError> {
        if self.uid.is_none() {
            self.read().await?;
        }
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let since = match &self.transition {
            Some((status, at)) if status == v.status => at.clone(),
            _ => now.clone(),
        };
        // The UID makes this a precondition on this very Node (not one re-created meanwhile).
        let body = json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.node, "uid": self.uid},
            "status": {"conditions": [{
                "type": self.condition_type,
                "status": v.status,
                "reason": v.reason,
                "message": v.message,
                "lastTransitionTime": since,
                "lastHeartbeatTime": now,
            }]},
        });
        let params = PatchParams::apply(FIELD_MANAGER).force();
        call(
            "applying the health condition",
            &self.node,
            self.api.patch_status(&self.node, &params, &Patch::Apply(&body)),
        )
        .await?;
        self.transition = Some((v.status.into(), since));
        Ok(())
    }
}

/// Which Events may go: no repeat of the same Event within ten minutes, at most ten a minute.
#[derive(Debug, Default)]
pub struct Limiter {
    sent: HashMap<String, Instant>,
    window: VecDeque<Instant>,
}

impl Limiter {
    /// Whether an Event may go now (not a repeat, within the rate); records it if so.
    pub fn admit(&mut self, key: &str, now: Instant) -> bool {
        self.sent.retain(|_, at| now.duration_since(*at) < DEDUP_WINDOW);
        while self.window.front().is_some_and(|at| now.duration_since(*at) >= RATE_WINDOW) {
            self.window.pop_front();
        }
        if self.sent.contains_key(key) || self.window.len() >= RATE_LIMIT {
            return false;
        }
        self.sent.insert(key.into(), now);
        self.window.push_back(now);
        true
    }
}

/// Events on the Node, deduplicated and rate-limited.
pub struct NodeEvents {
    api: Api<KubeEvent>,
    node: String,
    instance: String,
    limiter: Limiter,
}

impl NodeEvents {
    /// Events about Node `node`, in [`EVENTS_NAMESPACE`].
    pub fn new(client: kube::Client, node: &str, instance: &str) -> NodeEvents {
        NodeEvents {
            api: Api::namespaced(client, EVENTS_NAMESPACE),
            node: node.into(),
            instance: instance.into(),
            limiter: Limiter::default(),
        }
    }

    /// Sends one Event (`Warning` or `Normal`) about the Node; a repeat or one over the rate is
    /// dropped (and logged at debug).
    pub async fn send(
        &mut self,
        kind: &str,
        reason: &str,
        note: &str,
        uid: Option<&str>,
    ) -> Result<(), HealthPublishError> {
        if !self.limiter.admit(&format!("{kind}/{reason}/{note}"), Instant::now()) {
            tracing::debug!(reason, note, "health event suppressed (repeat or rate limit)");
            return Ok(());
        }
        let mut note = note.to_string();
        if note.len() > NOTE_LIMIT {
            let mut cut = NOTE_LIMIT - 3;
            while !note.is_char_boundary(cut) {
                cut -= 1;
            }
            note.truncate(cut);
            note.push_str("...");
        }
        let event = KubeEvent {
            metadata: ObjectMeta {
                // A trailing dash: the server appends a random suffix to a valid prefix.
                generate_name: Some(format!("{}.gpu-health-", self.node.get(..200).unwrap_or(&self.node))),
                namespace: Some(EVENTS_NAMESPACE.into()),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
            type_: Some(kind.into()),
            reason: Some(reason.into()),
            action: Some("GpuHealthCheck".into()),
            note: Some(note),
            reporting_controller: Some("nvidia.com/nvlabel".into()),
            reporting_instance: Some(self.instance.clone()),
            regarding: Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Node".into()),
                name: Some(self.node.clone()),
                uid: uid.map(String::from),
                ..ObjectReference::default()
            }),
            ..KubeEvent::default()
        };
        call("creating a health Event", &self.node, self.api.create(&PostParams::default(), &event)).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_deduplicated_and_rate_limited() {
        let mut l = Limiter::default();
        let t0 = Instant::now();
        assert!(l.admit("Warning/Xid/GPU 0", t0));
        assert!(!l.admit("Warning/Xid/GPU 0", t0 + Duration::from_secs(5)), "a repeat is dropped");
        assert!(l.admit("Warning/Xid/GPU 0", t0 + DEDUP_WINDOW), "after the window it may go again");
        for i in 0..RATE_LIMIT - 1 {
            assert!(l.admit(&format!("k{i}"), t0 + DEDUP_WINDOW));
        }
        assert!(!l.admit("one too many", t0 + DEDUP_WINDOW), "over the rate");
        assert!(l.admit("one too many", t0 + DEDUP_WINDOW + RATE_WINDOW));
    }
}
