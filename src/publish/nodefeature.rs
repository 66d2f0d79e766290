//! NFD's `NodeFeature` object (`nfd.k8s-sigs.io/v1alpha1`), GFD's `--use-node-feature-api`:
//! `nvidia-features-for-<node>` in `--namespace`, owned by the DaemonSet that owns our pod
//! (never by the pod, so a pod restart does not garbage-collect it), created or updated only
//! when it differs.

use super::nodefeature_object::NodeFeatureObject;
use super::{client_for, ApiCalls, Building, FailureReason, Watches, WriterPlan};
use super::{DaemonWriter, PublishError, Writer};
use crate::kubeapi::backoff::FullJitter;
use crate::kubeapi::errors::ApiFailure;
use crate::kubeapi::object_watch::{ObjectWatch, Seen};
use crate::kubeapi::retry::retry;
use crate::labels::Labels;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kube::Client;
use std::collections::BTreeMap;

/// The label nfd-master selects a node's NodeFeature objects by.
pub const NODE_NAME_LABEL: &str = "nfd.node.kubernetes.io/node-name";
/// Field manager recorded for our writes.
pub use crate::kubeapi::FIELD_MANAGER;

/// The requests this writer makes: the owner lookup (`pods` get) and get/create/update of the
/// object (`publish`). Keep in step with the calls below. `delete` is never sent by the daemon,
/// but an update that changes the object's owner (taking over an object GFD or an earlier
/// DaemonSet owned) needs it where the `OwnerReferencesPermissionEnforcement` admission plugin
/// runs (OpenShift's default): only who may delete an object may change its owner.
pub const API_CALLS: &[super::ApiCall] = &[
    super::ApiCall { namespaced: true, group: "", resource: "pods", verb: "get" },
    super::ApiCall { namespaced: true, group: "nfd.k8s-sigs.io", resource: "nodefeatures", verb: "get" },
    super::ApiCall { namespaced: true, group: "nfd.k8s-sigs.io", resource: "nodefeatures", verb: "create" },
    super::ApiCall { namespaced: true, group: "nfd.k8s-sigs.io", resource: "nodefeatures", verb: "update" },
    super::ApiCall { namespaced: true, group: "nfd.k8s-sigs.io", resource: "nodefeatures", verb: "delete" },
];

/// What the daemon adds: it watches its object instead of reading it every pass.
pub const WATCH_API_CALLS: &[super::ApiCall] = &[
    super::ApiCall { namespaced: true, group: "nfd.k8s-sigs.io", resource: "nodefeatures", verb: "list" },
    super::ApiCall { namespaced: true, group: "nfd.k8s-sigs.io", resource: "nodefeatures", verb: "watch" },
];

/// What `nvlabel prune` adds in NodeFeature mode (run by an administrator): deleting the object
/// (which [`API_CALLS`] holds already, for the owner's sake).
pub const PRUNE_API_CALLS: &[super::ApiCall] = &[super::ApiCall {
    namespaced: true,
    group: "nfd.k8s-sigs.io",
    resource: "nodefeatures",
    verb: "delete",
}];

/// `nvidia-features-for-<node>`, shortened with a hash of the node name if it would exceed the
/// 253 characters an object name may have.
pub fn object_name(node: &str) -> String {
    let name = format!("nvidia-features-for-{node}");
    if name.len() <= 253 {
        return name;
    }
    // FNV-1a: stable across builds and platforms, unlike std's hasher.
    let hash =
        node.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let keep = name[..253 - 17].trim_end_matches(['-', '.']);
    format!("{keep}-{hash:016x}")
}

/// The owner reference of the DaemonSet that owns `pod`, if any.
pub async fn daemonset_owner(client: Client, namespace: &str, pod: &str) -> Option<OwnerReference> {
    let pods: Api<Pod> = Api::namespaced(client, namespace);
    match pods.get(pod).await {
        Ok(p) => {
            let owner =
                p.metadata.owner_references.unwrap_or_default().into_iter().find(|o| o.kind == "DaemonSet");
            if owner.is_none() {
                tracing::info!(%namespace, %pod, "pod is not owned by a DaemonSet; NodeFeature gets no owner");
            }
            owner.map(|o| OwnerReference { controller: Some(true), block_owner_deletion: None, ..o })
        }
        Err(e) => {
            tracing::warn!(%namespace, %pod, error = %crate::kubeapi::errors::Short(&e), "cannot read our pod; NodeFeature gets no owner");
            None
        }
    }
}

/// Writes one node's NodeFeature object.
pub struct NodeFeature {
    api: Api<NodeFeatureObject>,
    namespace: String,
    node: String,
    name: String,
    owner: Option<OwnerReference>,
    backoff: FullJitter,
    /// The object as its watch last reported it; without one, each publish reads it.
    watch: Option<ObjectWatch<NodeFeatureObject>>,
    /// What the last successful publish wrote, for drift detection.
    last: Option<Labels>,
}

impl NodeFeature {
    /// The writer's name in logs and metrics.
    pub const NAME: &'static str = "nodefeature";

    /// A writer for `node` in `namespace`, owned by `owner`.
    pub fn new(client: Client, namespace: &str, node: &str, owner: Option<OwnerReference>) -> NodeFeature {
        NodeFeature {
            api: Api::namespaced(client, namespace),
            namespace: namespace.into(),
            node: node.into(),
            name: object_name(node),
            owner,
            backoff: FullJitter::default(),
            watch: None,
            last: None,
        }
    }

    /// Decides from `watch` (this object's) instead of reading it every pass: a publish that
    /// changes nothing sends nothing.
    pub fn with_watch(mut self, watch: ObjectWatch<NodeFeatureObject>) -> NodeFeature {
        self.watch = Some(watch);
        self
    }

    /// Watches this node's object through `client` (list and watch of NodeFeatures by name).
    pub fn watch(client: Client, namespace: &str, node: &str) -> ObjectWatch<NodeFeatureObject> {
        ObjectWatch::spawn(Api::namespaced(client, namespace), &object_name(node))
    }

    /// Sets how hard one publish retries (tests make it quick).
    pub fn with_backoff(mut self, backoff: FullJitter) -> NodeFeature {
        self.backoff = backoff;
        self
    }

    /// The object we want, with `base`'s metadata (other labels, resourceVersion) kept.
    fn desired(&self, labels: &Labels, base: Option<ObjectMeta>) -> NodeFeatureObject {
        let mut meta =
            base.unwrap_or_else(|| ObjectMeta { name: Some(self.name.clone()), ..ObjectMeta::default() });
        meta.labels.get_or_insert_with(BTreeMap::new).insert(NODE_NAME_LABEL.into(), self.node.clone());
        meta.owner_references = self.owner.clone().map(|o| vec![o]);
        meta.managed_fields = None;
        NodeFeatureObject::new(meta, labels.clone())
    }

    fn up_to_date(&self, existing: &NodeFeatureObject, labels: &Labels) -> bool {
        let labels_ok = existing.spec.labels == *labels;
        let node_ok =
            existing.metadata.labels.as_ref().and_then(|l| l.get(NODE_NAME_LABEL)) == Some(&self.node);
        let owners = existing.metadata.owner_references.clone().unwrap_or_default();
        labels_ok && node_ok && owners == self.owner.clone().into_iter().collect::<Vec<_>>()
    }

    /// A failed request on this object as one line.
    fn failure(&self, action: &'static str, verb: &'static str, source: kube::Error) -> PublishError {
        let object = format!("NodeFeature {}/{}", self.namespace, self.name);
        let resource = "nodefeatures.nfd.k8s-sigs.io";
        PublishError::Api(ApiFailure { action, object, verb, resource, source })
    }

    /// Deletes the object (`nvlabel prune`); absent is fine.
    pub async fn delete(&self) -> Result<bool, PublishError> {
        let api = self.api.clone();
        let name = self.name.clone();
        let result = retry("delete NodeFeature", self.backoff, || {
            let (api, name) = (api.clone(), name.clone());
            async move { api.delete(&name, &DeleteParams::default()).await.map(|_| true) }
        })
        .await;
        match result {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
            Err(source) => Err(self.failure("delete", "delete", source)),
        }
    }
}

/// A NodeFeature object before it is built.
pub struct NodeFeaturePlan<'a> {
    /// Its namespace.
    pub namespace: &'a str,
    /// The node.
    pub node: &'a str,
    /// Our pod, for the owner lookup.
    pub pod: Option<&'a str>,
}

impl WriterPlan for NodeFeaturePlan<'_> {
    fn name(&self) -> &'static str {
        NodeFeature::NAME
    }

    fn api_calls(&self) -> ApiCalls {
        ApiCalls { each: API_CALLS, watch: WATCH_API_CALLS }
    }

    fn failure_reasons(&self) -> &'static [FailureReason] {
        use FailureReason::*;
        &[Conflict, Throttled, Server, Refused, Connection, Timeout, Setup]
    }

    fn build_daemon<'a>(
        &'a self,
        client: Option<&'a kube::Client>,
        watches: &'a Watches,
    ) -> Building<'a, dyn DaemonWriter> {
        Box::pin(async move {
            let client = || client_for(client, NodeFeature::NAME);
            let (namespace, node) = (self.namespace, self.node);
            let owner = match self.pod {
                Some(pod) => daemonset_owner(client()?, namespace, pod).await,
                None => {
                    tracing::info!("no pod name (POD_NAME); NodeFeature gets no owner");
                    None
                }
            };
            let writer = NodeFeature::new(client()?, namespace, node, owner);
            let writer: Box<dyn DaemonWriter> = Box::new(match watches {
                Watches::On(_) => writer.with_watch(NodeFeature::watch(client()?, namespace, node)),
                Watches::Off => writer,
            });
            Ok(writer)
        })
    }

    /// The object is only deleted: its owner is not looked up or spoken of.
    fn build_to_prune<'a>(&'a self, client: Option<&'a kube::Client>) -> Building<'a, dyn Writer> {
        Box::pin(async move {
            let client = client_for(client, NodeFeature::NAME)?;
            let writer: Box<dyn Writer> = Box::new(NodeFeature::new(client, self.namespace, self.node, None));
            Ok(writer)
        })
    }
}

impl DaemonWriter for NodeFeature {
    fn changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.watch.as_ref().map(ObjectWatch::changes)
    }

    fn drifted(&self) -> bool {
        match (self.watch.as_ref().map(ObjectWatch::seen), &self.last) {
            (Some(Seen::Present(obj)), Some(last)) => !self.up_to_date(&obj, last),
            (Some(Seen::Absent), Some(_)) => true,
            _ => false,
        }
    }

    fn rival(&self) -> Option<String> {
        let (Some(Seen::Present(obj)), Some(last)) = (self.watch.as_ref().map(ObjectWatch::seen), &self.last)
        else {
            return None;
        };
        super::rival::field_managers(&obj.metadata, FIELD_MANAGER, ["f:spec", "f:labels"], last.keys())
    }
}

impl Writer for NodeFeature {
    fn name(&self) -> &'static str {
        NodeFeature::NAME
    }

    fn prune(&mut self) -> BoxFuture<'_, Result<(), PublishError>> {
        Box::pin(async move {
            if self.delete().await? {
                tracing::info!(name = %self.name, "deleted NodeFeature object");
            }
            Ok(())
        })
    }

    fn publish<'a>(&'a mut self, labels: &'a Labels) -> BoxFuture<'a, Result<bool, PublishError>> {
        Box::pin(async move {
            let this = &*self;
            // The watch, where its view is current, says what the object is; a conflict (it
            // changed under us) and a view from before a fault are settled by a fresh read.
            let mut cached = match self.watch.as_ref().map(ObjectWatch::seen_current) {
                Some(Seen::Present(obj)) => Some(Some(obj)),
                Some(Seen::Absent) => Some(None),
                Some(Seen::Unknown) | None => None,
            };
            // Which request failed, for the message: 0 the read, 1 the create, 2 the update.
            let step = std::sync::atomic::AtomicU8::new(0);
            let step = &step;
            let written = retry("NodeFeature", self.backoff, || {
                let known = cached.take();
                async move {
                    use std::sync::atomic::Ordering::Relaxed;
                    step.store(0, Relaxed);
                    let post =
                        PostParams { field_manager: Some(FIELD_MANAGER.into()), ..PostParams::default() };
                    let current = match known {
                        Some(known) => known,
                        None => this.api.get_opt(&this.name).await?,
                    };
                    match current {
                        None => {
                            tracing::info!(name = %this.name, "creating NodeFeature object");
                            step.store(1, Relaxed);
                            this.api.create(&post, &this.desired(labels, None)).await.map(|_| true)
                        }
                        Some(existing) if this.up_to_date(&existing, labels) => Ok(false),
                        Some(existing) => {
                            tracing::info!(name = %this.name, "updating NodeFeature object");
                            // Replace carries the resourceVersion we read: a concurrent change is a
                            // 409, retried from a fresh read.
                            step.store(2, Relaxed);
                            this.api
                                .replace(&this.name, &post, &this.desired(labels, Some(existing.metadata)))
                                .await
                                .map(|_| true)
                        }
                    }
                }
            })
            .await
            .map_err(|source| {
                let (action, verb) = match step.load(std::sync::atomic::Ordering::Relaxed) {
                    0 => ("read", "get"),
                    1 => ("create", "create"),
                    _ => ("update", "update"),
                };
                this.failure(action, verb, source)
            })?;
            self.last = Some(labels.clone());
            Ok(written)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_node_names_give_valid_object_names() {
        assert_eq!(object_name("gpu-1"), "nvidia-features-for-gpu-1");
        let long = "n".repeat(253);
        let name = object_name(&long);
        assert_eq!(name.len(), 253);
        assert_ne!(object_name(&long), object_name(&"m".repeat(253)));
        assert_eq!(object_name(&long), name, "stable");
    }
}
