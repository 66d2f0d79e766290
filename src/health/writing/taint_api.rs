//! The device taints' requests: which version serves DeviceTaintRule (asked of discovery: `v1`,
//! else `v1beta2`), a node's rules listed, one rule applied or deleted, and their prune. Each
//! request goes through [`crate::kubeapi`] as the label writers' do: [`retry`] with the one
//! backoff, and a failure as one [`ApiFailure`] line naming the rule, the status and, for a 403,
//! the missing RBAC verb. The API version is only known at run time, so the requests are
//! dynamic ([`DynamicObject`]) and the body a typed [`Object`] of [`Spec`].

use crate::health::writing::taint_names::{owned, rule_name};
use crate::health::writing::taint_spec::Spec;
use crate::kubeapi::backoff::FullJitter;
use crate::kubeapi::errors::ApiFailure;
use crate::kubeapi::retry::retry;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{NotUsed, Object};
use std::collections::BTreeMap;

/// Every API request the device taints make (their RBAC must grant exactly these): a list at
/// start, server-side apply (a create where the rule is new, else a patch) and deletes. Discovery
/// needs no grant.
pub const API_CALLS: &[crate::publish::ApiCall] =
    &[call("list"), call("create"), call("patch"), call("delete")];

/// The requests of [`prune_all`]: every rule nvlabel wrote listed, and deleted.
pub const PRUNE_CALLS: &[crate::publish::ApiCall] = &[call("list"), call("delete")];

/// One call on DeviceTaintRules (cluster-scoped).
const fn call(verb: &'static str) -> crate::publish::ApiCall {
    crate::publish::ApiCall { namespaced: false, group: GROUP, resource: "devicetaintrules", verb }
}

/// The API group of DeviceTaintRule.
const GROUP: &str = "resource.k8s.io";
/// The resource, as an RBAC hint names it.
const RESOURCE: &str = "devicetaintrules.resource.k8s.io";
/// The label naming the node a rule belongs to.
pub const NODE_LABEL: &str = "nvidia.com/gpu-health-node";
/// The label marking nvlabel's rules.
const MANAGED: (&str, &str) = ("app.kubernetes.io/managed-by", "nvlabel");
/// Versions that serve DeviceTaintRule, preferred first.
const VERSIONS: [&str; 2] = ["v1", "v1beta2"];

/// Why the rules could not be listed, written or deleted.
#[derive(Debug, thiserror::Error)]
pub enum TaintError {
    /// An API request failed (after its retries).
    #[error(transparent)]
    Api(#[from] ApiFailure),
}

/// A rule as nvlabel sends it: typed metadata and spec, the version discovery found.
pub type Rule = Object<Spec, NotUsed>;

/// The DeviceTaintRule API as discovery found it.
#[derive(Clone)]
pub struct RuleApi {
    api: Api<DynamicObject>,
    resource: ApiResource,
}

impl RuleApi {
    /// The API in the version discovery prefers; `None` where neither serves DeviceTaintRule.
    pub async fn discover(client: &kube::Client) -> Option<RuleApi> {
        for version in VERSIONS {
            let gv = format!("{GROUP}/{version}");
            if let Ok(list) = client.list_api_group_resources(&gv).await {
                if list.resources.iter().any(|r| r.name == "devicetaintrules") {
                    let resource = ApiResource {
                        group: GROUP.into(),
                        version: version.into(),
                        api_version: gv,
                        kind: "DeviceTaintRule".into(),
                        plural: "devicetaintrules".into(),
                    };
                    return Some(RuleApi { api: Api::all_with(client.clone(), &resource), resource });
                }
            }
        }
        None
    }

    /// The API version in use (`resource.k8s.io/v1`, say).
    pub fn api_version(&self) -> &str {
        &self.resource.api_version
    }

    /// Lists nvlabel's rules matching `selector`, through the retry.
    async fn list_by(&self, selector: &str, limit: Option<u32>) -> Result<Vec<DynamicObject>, kube::Error> {
        let mut params = ListParams::default().labels(selector);
        params.limit = limit;
        let list =
            retry("listing the GPU device taints", FullJitter::default(), || self.api.list(&params)).await?;
        Ok(list.items)
    }

    /// This node's rules as the API has them, by name: those [`owned`] among nvlabel's, listed
    /// by the node label where the node name fits a label value.
    pub async fn list(&self, node: &str) -> Result<BTreeMap<String, Spec>, TaintError> {
        let selector = match node_label(node) {
            Some(value) => format!("{}={},{NODE_LABEL}={value}", MANAGED.0, MANAGED.1),
            None => format!("{}={}", MANAGED.0, MANAGED.1),
        };
        let items = self.list_by(&selector, None).await.map_err(|source| ApiFailure {
            action: "list",
            object: format!("DeviceTaintRules {}", rule_name("*", node)),
            verb: "list",
            resource: RESOURCE,
            source,
        })?;
        let mine = items.into_iter().filter_map(|o| {
            let name = o.metadata.name?;
            // A spec that does not read as one (none at all, say) selects no device of ours.
            let spec: Spec = serde_json::from_value(o.data.get("spec")?.clone()).ok()?;
            owned(node, &name, &spec.device_selector).then_some((name, spec))
        });
        Ok(mine.collect())
    }

    /// Every rule nvlabel wrote, of every node, by name; `None` where nvlabel may not list them
    /// (then it could not have written any either) or the server has none to list.
    async fn list_all(&self, limit: Option<u32>) -> Result<Option<Vec<String>>, TaintError> {
        match self.list_by(&format!("{}={}", MANAGED.0, MANAGED.1), limit).await {
            Ok(items) => Ok(Some(items.into_iter().filter_map(|o| o.metadata.name).collect())),
            Err(kube::Error::Api(s)) if s.code == 403 || s.code == 404 => Ok(None),
            Err(source) => Err(ApiFailure {
                action: "list",
                object: "DeviceTaintRules nvlabel-*".into(),
                verb: "list",
                resource: RESOURCE,
                source,
            }
            .into()),
        }
    }

    /// Creates or updates rule `name` of `node` by server-side apply.
    pub async fn apply(&self, node: &str, name: &str, spec: &Spec) -> Result<(), TaintError> {
        let rule = rule(&self.resource, node, name, spec);
        let params = PatchParams::apply(crate::kubeapi::FIELD_MANAGER).force();
        let patch = Patch::Apply(&rule);
        retry("applying a GPU device taint", FullJitter::default(), || self.api.patch(name, &params, &patch))
            .await
            .map(|_| ())
            .map_err(|source| failure("apply", "patch", name, source))
    }

    /// Deletes rule `name` (gone already is done).
    pub async fn delete(&self, name: &str) -> Result<(), TaintError> {
        let params = DeleteParams::default();
        match retry("deleting a GPU device taint", FullJitter::default(), || self.api.delete(name, &params))
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(source) => Err(failure("delete", "delete", name, source)),
        }
    }
}

/// Rule `name` of `node` as it is applied: nvlabel's, labelled with its node where the name fits
/// a label value.
pub fn rule(resource: &ApiResource, node: &str, name: &str, spec: &Spec) -> Rule {
    let mut rule = Rule::new(name, resource, spec.clone());
    let mut labels = BTreeMap::from([(MANAGED.0.to_string(), MANAGED.1.to_string())]);
    if let Some(value) = node_label(node) {
        labels.insert(NODE_LABEL.into(), value.into());
    }
    rule.metadata.labels = Some(labels);
    rule
}

/// A failed request on rule `name`.
fn failure(action: &'static str, verb: &'static str, name: &str, source: kube::Error) -> TaintError {
    let object = format!("DeviceTaintRule {name}");
    ApiFailure { action, object, verb, resource: RESOURCE, source }.into()
}

/// The node label's value, where the node name fits a label value (at most 63 characters).
fn node_label(node: &str) -> Option<&str> {
    (node.len() <= 63).then_some(node)
}

/// Deletes every rule of `node` (`nvlabel prune`); returns how many. Nothing to do where the API
/// does not serve DeviceTaintRule, or where nvlabel may not list them (then it could not have
/// written any either).
pub async fn prune(client: &kube::Client, node: &str) -> Result<usize, TaintError> {
    let Some(api) = RuleApi::discover(client).await else { return Ok(0) };
    // Whether nvlabel may list rules at all: one item is enough to know (any other failure is
    // the node's list's to report).
    if let Ok(None) = api.list_all(Some(1)).await {
        return Ok(0);
    }
    let mine = api.list(node).await?;
    for name in mine.keys() {
        api.delete(name).await?;
    }
    Ok(mine.len())
}

/// Deletes every rule nvlabel wrote, of every node (`nvlabel prune --health-only --all-nodes`);
/// returns how many. Nothing to do where DeviceTaintRule is not served or may not be listed.
pub async fn prune_all(client: &kube::Client) -> Result<usize, TaintError> {
    let Some(api) = RuleApi::discover(client).await else { return Ok(0) };
    let Some(names) = api.list_all(None).await? else { return Ok(0) };
    for name in &names {
        api.delete(name).await?;
    }
    Ok(names.len())
}
