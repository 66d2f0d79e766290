//! GPU health as DRA device taints (`--health` with `--allocation-mode dra` or `auto`): for each
//! faulty GPU, one DeviceTaintRule per device of this node's `gpu.nvidia.com` ResourceSlices whose
//! `uuid` attribute is the GPU's UUID or whose `parentUUID` is (its MIG devices). Device names are
//! taken from the slices, never derived: they differ between driver versions.
//!
//! The rules are nvlabel's (label `app.kubernetes.io/managed-by=nvlabel`) and this node's (name
//! [`rule_name`], `nvlabel-<device>.<node>`, label [`NODE_LABEL`]), so a restart lists them and
//! writes nothing when they are still right; one named as the released version named them
//! ([`previous_name`]) is replaced. A rule is written only when it changes and deleted when its
//! GPU is healthy again (a new boot). The API version is asked of discovery (`v1`, else `v1beta2`);
//! where neither serves DeviceTaintRule, one warning says so and discovery is asked again at most
//! every ten minutes; the Node condition works either way.

use super::metrics::HealthMetrics;
pub use super::taint_names::{owned, previous_name, rule_name};
use crate::config::health::TaintEffect;
use crate::kubeapi::backoff::FullJitter;
use crate::kubeapi::errors::Short;
use crate::kubeapi::slices::{SliceState, DRIVER};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Every API request the device taints make (their RBAC must grant exactly these): a list at
/// start, server-side apply (a create where the rule is new, else a patch) and deletes. Discovery
/// needs no grant.
pub const API_CALLS: &[crate::publish::ApiCall] =
    &[call("list"), call("create"), call("patch"), call("delete")];

/// One call on DeviceTaintRules (cluster-scoped).
const fn call(verb: &'static str) -> crate::publish::ApiCall {
    crate::publish::ApiCall {
        namespaced: false,
        group: "resource.k8s.io",
        resource: "devicetaintrules",
        verb,
    }
}

/// The requests of [`prune_all`]: every rule nvlabel wrote listed, and deleted.
pub const PRUNE_CALLS: &[crate::publish::ApiCall] = &[call("list"), call("delete")];

/// The taint key nvlabel writes (never the DRA driver's own `gpu.nvidia.com/...` keys).
pub const KEY: &str = "nvidia.com/gpu-health";
/// The label naming the node a rule belongs to.
pub const NODE_LABEL: &str = "nvidia.com/gpu-health-node";
/// The label marking nvlabel's rules.
const MANAGED: (&str, &str) = ("app.kubernetes.io/managed-by", "nvlabel");
/// The field manager of the writes.
const MANAGER: &str = "nvlabel";
/// How often discovery is asked again where DeviceTaintRule is not served.
const REDISCOVER: Duration = Duration::from_secs(600);
/// Versions that serve DeviceTaintRule, preferred first.
const VERSIONS: [&str; 2] = ["v1", "v1beta2"];

/// A taint rule's spec: the device it selects and the taint.
pub type Spec = Value;

/// Why the rules could not be listed or written.
#[derive(Debug, thiserror::Error)]
pub enum TaintError {
    /// An API call failed.
    #[error("{what} DeviceTaintRule {name}: {error}")]
    Api {
        /// The call.
        what: &'static str,
        /// The rule (or the node's rules).
        name: String,
        /// The error, one line.
        error: String,
    },
}

impl crate::exit::Classify for TaintError {
    fn is_bad_configuration(&self) -> bool {
        match self {
            TaintError::Api { .. } => false,
        }
    }
}

/// The rules `faulty` (GPU UUID → reason) asks for on the devices of `slices`, by name. Only
/// devices of the pool named after `node` (as NVIDIA's driver names it): the admission policy
/// admits no other, and a restart could not tell another pool's rules for this node's.
pub fn desired(
    node: &str,
    slices: &SliceState,
    faulty: &BTreeMap<String, &str>,
    effect: TaintEffect,
) -> BTreeMap<String, Spec> {
    let mut rules = BTreeMap::new();
    for d in slices.devices().into_iter().filter(|d| d.pool == node) {
        let gpu = [&d.uuid, &d.parent_uuid].into_iter().flatten().find(|u| faulty.contains_key(*u));
        let Some(reason) = gpu.and_then(|u| faulty.get(u)) else { continue };
        let spec = json!({
            "deviceSelector": {"driver": DRIVER, "pool": d.pool, "device": d.device},
            "taint": {"key": KEY, "value": reason, "effect": effect.as_str()},
        });
        rules.insert(rule_name(&d.device, &d.pool), spec);
    }
    rules
}

/// The fields nvlabel sets, compared one by one: the API server adds others (`timeAdded`).
const COMPARED: [&str; 6] = [
    "/deviceSelector/driver",
    "/deviceSelector/pool",
    "/deviceSelector/device",
    "/taint/key",
    "/taint/value",
    "/taint/effect",
];

/// Whether a rule's spec on the server says what `want` says.
pub fn same(existing: &Spec, want: &Spec) -> bool {
    COMPARED.iter().all(|p| existing.pointer(p) == want.pointer(p))
}

/// The DeviceTaintRule API as discovery finds it.
async fn discover(client: &kube::Client) -> Option<ApiResource> {
    for version in VERSIONS {
        let gv = format!("resource.k8s.io/{version}");
        if let Ok(list) = client.list_api_group_resources(&gv).await {
            if list.resources.iter().any(|r| r.name == "devicetaintrules") {
                return Some(ApiResource {
                    group: "resource.k8s.io".into(),
                    version: version.into(),
                    api_version: gv,
                    kind: "DeviceTaintRule".into(),
                    plural: "devicetaintrules".into(),
                });
            }
        }
    }
    None
}

/// This node's rules as the API has them, by name: those [`owned`] among nvlabel's, listed by
/// the node label where the node name fits a label value.
async fn list(api: &Api<DynamicObject>, node: &str) -> Result<BTreeMap<String, Spec>, TaintError> {
    let selector = match node_label(node) {
        Some(value) => format!("{}={},{NODE_LABEL}={value}", MANAGED.0, MANAGED.1),
        None => format!("{}={}", MANAGED.0, MANAGED.1),
    };
    let list = api.list(&ListParams::default().labels(&selector)).await.map_err(|e| TaintError::Api {
        what: "list",
        name: rule_name("*", node),
        error: Short(&e).to_string(),
    })?;
    let mine = list.items.into_iter().filter_map(|o| {
        let name = o.metadata.name.clone()?;
        let spec = o.data.get("spec").cloned().unwrap_or(Value::Null);
        owned(node, &name, &spec).then_some((name, spec))
    });
    Ok(mine.collect())
}

/// The node label's value, where the node name fits a label value (at most 63 characters).
fn node_label(node: &str) -> Option<&str> {
    (node.len() <= 63).then_some(node)
}

/// Deletes every rule of `node` (`nvlabel prune`); returns how many. Nothing to do where the API
/// does not serve DeviceTaintRule, or where nvlabel may not list them (then it could not have
/// written any either).
pub async fn prune(client: &kube::Client, node: &str) -> Result<usize, TaintError> {
    let Some(resource) = discover(client).await else { return Ok(0) };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let selector = format!("{}={}", MANAGED.0, MANAGED.1);
    match api.list(&ListParams::default().labels(&selector).limit(1)).await {
        Err(kube::Error::Api(s)) if s.code == 403 || s.code == 404 => return Ok(0),
        _ => {}
    }
    let rules = list(&api, node).await?;
    for name in rules.keys() {
        delete(&api, name).await?;
    }
    Ok(rules.len())
}

/// Deletes every rule nvlabel wrote, of every node (`nvlabel prune --health-only --all-nodes`);
/// returns how many. Nothing to do where DeviceTaintRule is not served or may not be listed.
pub async fn prune_all(client: &kube::Client) -> Result<usize, TaintError> {
    let Some(resource) = discover(client).await else { return Ok(0) };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let selector = format!("{}={}", MANAGED.0, MANAGED.1);
    let list = match api.list(&ListParams::default().labels(&selector)).await {
        Ok(list) => list,
        Err(kube::Error::Api(s)) if s.code == 403 || s.code == 404 => return Ok(0),
        Err(e) => {
            return Err(TaintError::Api {
                what: "list",
                name: "nvlabel-*".into(),
                error: Short(&e).to_string(),
            })
        }
    };
    let names: Vec<String> = list.items.into_iter().filter_map(|o| o.metadata.name).collect();
    for name in &names {
        delete(&api, name).await?;
    }
    Ok(names.len())
}

/// `nvlabel prune`'s part: where it talks to the API, this node's rules go too.
pub async fn prune_for(
    settings: &crate::config::Settings,
    client: Option<&kube::Client>,
) -> Result<(), TaintError> {
    if let (Some(client), Some(node)) = (client, &settings.node_name) {
        let n = prune(client, node).await?;
        if n > 0 {
            tracing::info!(node = %node, rules = n, "this node's GPU device taints removed");
        }
    }
    Ok(())
}

async fn delete(api: &Api<DynamicObject>, name: &str) -> Result<(), TaintError> {
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(TaintError::Api { what: "delete", name: name.into(), error: Short(&e).to_string() }),
    }
}

/// The device taints of this node, kept as the faults and slices say.
pub struct DeviceTaints {
    client: kube::Client,
    node: String,
    effect: TaintEffect,
    /// The API, once discovered; when to ask discovery again while it is not served.
    api: Option<(Api<DynamicObject>, String)>,
    rediscover_at: Option<Instant>,
    /// The rules as last listed or written (`None`: list first).
    existing: Option<BTreeMap<String, Spec>>,
    jitter: FullJitter,
    not_before: Option<Instant>,
    /// The failure in force, logged once.
    failing: Option<String>,
    metrics: Arc<HealthMetrics>,
    /// Draws the backoff's jitter (a test seam).
    draw: fn() -> f64,
}

impl DeviceTaints {
    /// The taints of `node` with `effect`, counted in `metrics`.
    pub fn new(
        client: kube::Client,
        node: &str,
        effect: TaintEffect,
        metrics: Arc<HealthMetrics>,
    ) -> DeviceTaints {
        DeviceTaints {
            client,
            node: node.into(),
            effect,
            api: None,
            rediscover_at: None,
            existing: None,
            jitter: FullJitter::new(Duration::from_secs(1), Duration::from_secs(300)),
            not_before: None,
            failing: None,
            metrics,
            draw: rand::random::<f64>,
        }
    }

    /// Draws the backoff's waits with `draw` (a number in `[0, 1)`) instead of at random.
    pub fn with_jitter(mut self, draw: fn() -> f64) -> DeviceTaints {
        self.draw = draw;
        self
    }

    /// Brings the rules in line with `faulty` (GPU UUID → reason) on the devices of `slices`.
    /// Nothing is written or deleted until the slices are listed, so a view the API cannot give
    /// never removes a taint.
    pub async fn sync(&mut self, slices: &SliceState, faulty: &BTreeMap<String, &str>) {
        if !matches!(slices, SliceState::Listed(_)) {
            return;
        }
        // A node without DRA devices (`auto` on a device-plugin node) never asks for the API.
        if self.api.is_none() && slices.devices().is_empty() {
            return;
        }
        let now = Instant::now();
        if self.not_before.is_some_and(|t| now < t) {
            return;
        }
        let Some((api, api_version)) = self.api(now).await else { return };
        let want = desired(&self.node, slices, faulty, self.effect);
        match self.apply(&api, &api_version, want).await {
            Ok(()) => {
                self.jitter.reset();
                self.not_before = None;
                if let Some(error) = self.failing.take() {
                    tracing::info!(%error, "resolved: the GPU device taints are written again");
                }
            }
            Err(e) => {
                self.metrics.device_taint_failures.inc();
                let wait = self.jitter.next_with((self.draw)());
                self.not_before = Some(now + wait);
                // Listed again after a failure: a write may have gone through before it failed.
                self.existing = None;
                if self.failing.is_none() {
                    tracing::warn!(error = %e, retry_in_ms = wait.as_millis() as u64, "cannot write the GPU device taints; the Node condition still reports the faults");
                }
                self.failing = Some(e.to_string());
            }
        }
    }

    /// The DeviceTaintRule API, discovered once; `None` (said once) where it is not served.
    async fn api(&mut self, now: Instant) -> Option<(Api<DynamicObject>, String)> {
        if self.api.is_none() && self.rediscover_at.is_none_or(|t| now >= t) {
            match discover(&self.client).await {
                Some(r) => {
                    tracing::info!(version = %r.api_version, "GPU faults become device taints on this node's DRA devices");
                    self.api = Some((Api::all_with(self.client.clone(), &r), r.api_version));
                }
                None => {
                    if self.rediscover_at.is_none() {
                        tracing::warn!("the API server does not serve DeviceTaintRule (resource.k8s.io v1 or v1beta2; on 1.36 enable the DRADeviceTaintRules gate and resource.k8s.io/v1beta2): GPU faults are reported by the Node condition only");
                    }
                    self.rediscover_at = Some(now + REDISCOVER);
                }
            }
        }
        self.api.clone()
    }

    /// Writes what differs from `want` and deletes what `want` lacks.
    async fn apply(
        &mut self,
        api: &Api<DynamicObject>,
        api_version: &str,
        want: BTreeMap<String, Spec>,
    ) -> Result<(), TaintError> {
        let existing = match self.existing.take() {
            Some(e) => e,
            None => list(api, &self.node).await?,
        };
        let mut now = existing.clone();
        let result = async {
            for (name, spec) in &want {
                if existing.get(name).is_some_and(|e| same(e, spec)) {
                    continue;
                }
                write(api, api_version, &self.node, name, spec).await?;
                tracing::info!(rule = %name, taint = %spec["taint"], device = %spec["deviceSelector"], "GPU device taint written");
                now.insert(name.clone(), spec.clone());
            }
            for name in existing.keys().filter(|n| !want.contains_key(*n)) {
                delete(api, name).await?;
                tracing::info!(rule = %name, "GPU device taint removed: the GPU is healthy again");
                now.remove(name);
            }
            Ok(())
        }
        .await;
        self.metrics.device_taints.set(i64::try_from(now.len()).unwrap_or(i64::MAX));
        self.existing = Some(now);
        result
    }
}

/// Creates or updates one rule by server-side apply.
async fn write(
    api: &Api<DynamicObject>,
    api_version: &str,
    node: &str,
    name: &str,
    spec: &Spec,
) -> Result<(), TaintError> {
    let mut labels = json!({MANAGED.0: MANAGED.1});
    if let Some(value) = node_label(node) {
        labels[NODE_LABEL] = json!(value);
    }
    let body = json!({
        "apiVersion": api_version,
        "kind": "DeviceTaintRule",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    });
    let params = PatchParams::apply(MANAGER).force();
    api.patch(name, &params, &Patch::Apply(&body)).await.map(|_| ()).map_err(|e| TaintError::Api {
        what: "write",
        name: name.into(),
        error: Short(&e).to_string(),
    })
}

#[cfg(test)]
#[path = "taints_tests.rs"]
mod tests;
