//! GPU health as DRA device taints (`--health` with `--allocation-mode dra` or `auto`): for each
//! faulty GPU, one DeviceTaintRule per device of this node's `gpu.nvidia.com` ResourceSlices whose
//! `uuid` attribute is the GPU's UUID or whose `parentUUID` is (its MIG devices). Device names are
//! taken from the slices, never derived: they differ between driver versions.
//!
//! The rules are nvlabel's (label `app.kubernetes.io/managed-by=nvlabel`) and this node's (name
//! [`rule_name`], `nvlabel-<device>.<node>`, label [`NODE_LABEL`]), so a restart lists them and
//! writes nothing when they are still right; one named as the released version named them
//! ([`previous_name`]) is replaced. A rule is written only when its typed [`Spec`] changes (what
//! the server adds to a rule is no part of it) and deleted when its GPU is healthy again (a new
//! boot, or its faults cleared in place or by hand). The requests are [`crate::health::writing::taint_api`]'s: where no version serves DeviceTaintRule, one
//! warning says so and discovery is asked again at most every ten minutes; the Node condition
//! works either way. After a failed pass no request goes before health's backoff
//! (`after_failure.rs`' `AFTER_FAILURE`) allows.

use crate::health::config::TaintEffect;
use crate::health::metrics::HealthMetrics;
use crate::health::writing::api_failures::Call;
use crate::health::writing::taint_api::RuleApi;
pub use crate::health::writing::taint_api::{
    prune, prune_all, TaintError, API_CALLS, NODE_LABEL, PRUNE_CALLS,
};
pub use crate::health::writing::taint_names::{owned, previous_name, rule_name};
pub use crate::health::writing::taint_spec::{Spec, KEY};
use crate::kubeapi::backoff::FullJitter;
use crate::kubeapi::slices::{SliceState, DRIVER};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The target of this file's log lines: the module it was before health had rooms, so no
/// line an operator reads or filters on changed with the move.
const LOG: &str = "nvlabel::health::taints";

/// How often discovery is asked again where DeviceTaintRule is not served.
const REDISCOVER: Duration = Duration::from_secs(600);

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
        let spec = Spec::new(DRIVER, &d.pool, &d.device, reason, effect.as_str());
        rules.insert(rule_name(&d.device, &d.pool), spec);
    }
    rules
}

/// `nvlabel prune`'s part: where it talks to the API, this node's rules go too.
pub async fn prune_for(node: Option<&str>, client: Option<&kube::Client>) -> Result<(), TaintError> {
    if let (Some(client), Some(node)) = (client, node) {
        let n = prune(client, node).await?;
        if n > 0 {
            tracing::info!(target: LOG, node = %node, rules = n, "this node's GPU device taints removed");
        }
    }
    Ok(())
}

/// The device taints of this node, kept as the faults and slices say.
pub struct DeviceTaints {
    client: kube::Client,
    node: String,
    effect: TaintEffect,
    /// The API, once discovered; when to ask discovery again while it is not served.
    api: Option<RuleApi>,
    rediscover_at: Option<Instant>,
    /// The rules as last listed or written (`None`: list first).
    existing: Option<BTreeMap<String, Spec>>,
    /// No request before a time after a failed pass.
    backoff: FullJitter,
    /// The failure in force: said once, reminded at most once a minute, said resolved.
    failing: Call,
    metrics: Arc<HealthMetrics>,
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
            backoff: crate::health::writing::after_failure::AFTER_FAILURE,
            failing: Call::new(
                "cannot write the GPU device taints; the Node condition still reports the faults",
                "the GPU device taints are written again",
            ),
            metrics,
        }
    }

    /// The effect the rules are written with.
    pub fn effect(&self) -> TaintEffect {
        self.effect
    }

    /// Writes the rules with `effect` from the next sync on (a reload changed it).
    pub fn set_effect(&mut self, effect: TaintEffect) {
        self.effect = effect;
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
        let now = Instant::from_std(crate::health::now());
        if !self.backoff.ready(now.into_std()) {
            return;
        }
        let Some(api) = self.api(now).await else { return };
        let want = desired(&self.node, slices, faulty, self.effect);
        match self.apply(&api, want).await {
            Ok(()) => {
                self.backoff.reset();
                self.failing.worked();
            }
            Err(e) => {
                self.metrics.device_taint_failures.inc();
                let wait = self.backoff.failed(now.into_std());
                // Listed again after a failure: a write may have gone through before it failed.
                self.existing = None;
                self.failing.failed(&e, Some(wait));
            }
        }
    }

    /// The DeviceTaintRule API, discovered once; `None` (said once) where it is not served.
    async fn api(&mut self, now: Instant) -> Option<RuleApi> {
        if self.api.is_none() && self.rediscover_at.is_none_or(|t| now >= t) {
            match RuleApi::discover(&self.client).await {
                Some(api) => {
                    tracing::info!(target: LOG, version = %api.api_version(), "GPU faults become device taints on this node's DRA devices");
                    self.api = Some(api);
                }
                None => {
                    if self.rediscover_at.is_none() {
                        tracing::warn!(target: LOG, "the API server does not serve DeviceTaintRule (resource.k8s.io v1 or v1beta2; on 1.36 enable the DRADeviceTaintRules gate and resource.k8s.io/v1beta2): GPU faults are reported by the Node condition only");
                    }
                    self.rediscover_at = Some(now + REDISCOVER);
                }
            }
        }
        self.api.clone()
    }

    /// Writes what differs from `want` and deletes what `want` lacks.
    async fn apply(&mut self, api: &RuleApi, want: BTreeMap<String, Spec>) -> Result<(), TaintError> {
        let existing = match self.existing.take() {
            Some(e) => e,
            None => api.list(&self.node).await?,
        };
        let mut now = existing.clone();
        let result = async {
            for (name, spec) in &want {
                if existing.get(name) == Some(spec) {
                    continue;
                }
                api.apply(&self.node, name, spec).await?;
                tracing::info!(target: LOG, rule = %name, taint = %spec.taint, device = %spec.device_selector, "GPU device taint written");
                now.insert(name.clone(), spec.clone());
            }
            for name in existing.keys().filter(|n| !want.contains_key(*n)) {
                api.delete(name).await?;
                tracing::info!(target: LOG, rule = %name, "GPU device taint removed: the GPU is healthy again");
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

#[cfg(test)]
#[path = "taints_tests.rs"]
mod tests;
