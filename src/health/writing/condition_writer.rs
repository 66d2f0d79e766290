//! The Node condition and its fault record (one apply, [`crate::health::writing::condition`]): read back
//! once at start (a restart forgets nothing), then written when the verdict changes, when
//! another writer changed what the Node shows ([`super::guard`], at the pace of
//! [`DriftGuard`]), and when a failed write's backoff ends (a timer, [`ConditionWriter::due`],
//! not the next reading); read again after a person cleared it by hand (what the Node shows then
//! is theirs). An instance being uninstalled writes nothing, and takes back a write that crossed
//! its prune (two reads of its ServiceAccount per write, none on a pass that writes nothing).

use super::guard::{overwritten, Overwrite};
use crate::health::config::HealthConfig;
use crate::health::metrics::{HealthMetrics, WriterLabels};
use crate::health::now;
use crate::health::values::instance::manager_of;
use crate::health::values::verdict::{Existing, Verdict};
use crate::health::writing::after_failure::AFTER_FAILURE;
use crate::health::writing::api_failures::Call;
use crate::health::writing::condition::{NodeCondition, FIELD_MANAGER};
use crate::health::writing::retirement::Retirement;
use crate::kubeapi::backoff::FullJitter;
use crate::kubeapi::drift::DriftGuard;
use crate::kubeapi::object_watch::ObjectWatch;
use k8s_openapi::api::core::v1::Node;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The target of this file's log lines: the module it was before health had rooms, so no
/// line an operator reads or filters on changed with the move.
const LOG: &str = "nvlabel::health::writers::condition";

/// An overwriter named once is named again only after this long (or when another writes).
const RETELL: Duration = Duration::from_secs(600);

/// What reading the record back found.
#[derive(Debug)]
pub enum Recall {
    /// The Node could not be read (yet): nothing is judged, so nothing is overwritten by a guess.
    NotYet,
    /// The condition as the Node has it (`None`: health never wrote it).
    Read(Option<Existing>),
}

/// Writes the condition and its record.
pub struct ConditionWriter {
    condition: NodeCondition,
    /// What the Node shows, as last read or written (a verdict equal to it is not written).
    published: Option<Verdict>,
    /// After a failed read or write: no call before this time (growing, jittered backoff).
    backoff: FullJitter,
    /// Failed reads, said once, then at most once a minute, then resolved.
    read: Call,
    /// Failed writes, the same.
    write: Call,
    /// The judge's verdict last handed over: what the Node is to show.
    truth: Option<Verdict>,
    /// This Node's watch, where another writer's change is seen.
    node: Option<ObjectWatch<Node>>,
    /// How often an overwritten condition is written back.
    guard: DriftGuard,
    /// When the verdict is written back over another writer's change.
    repair: Option<Instant>,
    /// When a failed write is tried again.
    retry: Option<Instant>,
    /// The overwriter named last, and when.
    told: Option<(String, Instant)>,
    /// Overwrites counted by who wrote them.
    metrics: Arc<HealthMetrics>,
}

impl ConditionWriter {
    /// The condition `config` names on Node `node`, under the instance's field manager; `watch`
    /// is that Node's watch, where an overwrite is seen.
    pub fn new(
        client: kube::Client,
        node: &str,
        config: &HealthConfig,
        watch: Option<ObjectWatch<Node>>,
        metrics: Arc<HealthMetrics>,
    ) -> ConditionWriter {
        let manager = manager_of(config.instance.as_ref());
        ConditionWriter {
            condition: NodeCondition::new(
                client,
                node,
                &config.settings.condition_type,
                &manager,
                Default::default(),
            ),
            published: None,
            backoff: AFTER_FAILURE,
            read: Call::new(
                "cannot read the Node's health condition yet",
                "the Node's health condition is read",
            ),
            write: Call::new(
                "writing the GPU health condition failed",
                "the GPU health condition is written again",
            ),
            truth: None,
            node: watch,
            guard: DriftGuard::default(),
            repair: None,
            retry: None,
            told: None,
            metrics,
        }
    }

    /// The Node's UID, once read.
    pub fn uid(&self) -> Option<String> {
        self.condition.uid()
    }

    /// Reads the condition and its record as the Node has them (what an earlier nvlabel wrote).
    pub async fn recall(&mut self) -> Recall {
        if !self.backoff.ready(now()) {
            return Recall::NotYet;
        }
        match self.condition.read().await {
            Ok(existing) => {
                self.backoff.reset();
                self.read.worked();
                // Written by an nvlabel without this instance: written again, so it is ours.
                let legacy = self.condition.legacy();
                self.published = existing.as_ref().filter(|_| !legacy).map(Existing::published);
                Recall::Read(existing)
            }
            Err(e) => {
                let wait = self.backoff.failed(now());
                self.read.failed(&e, Some(wait));
                Recall::NotYet
            }
        }
    }

    /// Reads the condition again (a person wrote it): the next verdict is written unless the
    /// Node shows exactly that, with its `lastTransitionTime` kept where its status is. Where the
    /// Node cannot be read now, the next verdict is written whatever it is.
    pub async fn refresh(&mut self) {
        if let Recall::NotYet = self.recall().await {
            self.published = None;
        }
    }

    /// Writes `verdict` if it differs from what the Node has, unless `retirement` says the
    /// instance is being uninstalled (asked before and after the write), or a failed write's
    /// backoff holds writes back (then [`ConditionWriter::due`] says when it is tried).
    pub async fn publish(&mut self, verdict: &Verdict, retirement: &mut Option<Retirement>) {
        // The same verdict waits for its write-back's turn: a fight stays throttled.
        if self.repair.is_some() && self.truth.as_ref() == Some(verdict) {
            return;
        }
        self.truth = Some(verdict.clone());
        if self.write(verdict, retirement).await {
            (self.repair, self.retry) = (None, None);
        }
    }

    /// When a write of the verdict is due: a failed write's retry, or the write-back over
    /// another writer's change; `None` while none waits.
    pub fn due(&self) -> Option<Instant> {
        self.repair.into_iter().chain(self.retry).max()
    }

    /// The write [`ConditionWriter::due`] said is due now.
    pub async fn write_due(&mut self, retirement: &mut Option<Retirement>) {
        let repairing = self.repair.take().is_some();
        self.retry = None;
        let Some(verdict) = self.truth.clone() else { return };
        if !self.write(&verdict, retirement).await || !repairing {
            return;
        }
        if self.guard.repaired(now()) {
            let by = self.told.as_ref().map(|(by, _)| by.clone()).unwrap_or_default();
            tracing::warn!(target: LOG, %by, condition = self.condition.condition_type(), "another writer keeps overwriting the GPU health condition: it is written back once a minute while this lasts");
        }
    }

    /// What the Node watch shows now, held against the verdict: where another writer changed
    /// the condition, the overwrite, once (its write-back is then due).
    pub fn overwritten(&mut self) -> Option<Overwrite> {
        let (Some(watch), Some(truth)) = (&self.node, &self.truth) else { return None };
        if self.published.as_ref() != Some(truth) || self.repair.is_some() {
            // A write is due anyway.
            return None;
        }
        let (kind, manager) = (self.condition.condition_type(), self.condition.manager());
        let over = watch.inspect(|seen| overwritten(seen, kind, manager, FIELD_MANAGER, truth))?;
        let at = now();
        if self.guard.take_ended() {
            tracing::info!(target: LOG, condition = kind, "the fight over the GPU health condition is over");
        }
        self.published = None;
        self.repair = Some(self.guard.drift_seen(at));
        self.metrics.condition_overwrites.get_or_create(&WriterLabels { manager: over.by.clone() }).inc();
        let retold = self.told.as_ref().is_none_or(|(by, when)| *by != over.by || at - *when >= RETELL);
        if !retold {
            return None;
        }
        self.told = Some((over.by.clone(), at));
        tracing::warn!(target: LOG, by = %over.by, condition = kind, shown_status = %over.status, shown_reason = %over.reason, status = truth.status.as_str(), reason = %truth.reason, "another writer overwrote the GPU health condition; writing nvlabel's verdict back");
        Some(over)
    }

    /// One write of `verdict`; whether it reached the Node.
    async fn write(&mut self, verdict: &Verdict, retirement: &mut Option<Retirement>) -> bool {
        if self.published.as_ref() == Some(verdict) || !self.backoff.ready(now()) {
            return false;
        }
        if retiring(retirement).await {
            return false;
        }
        match self.condition.apply(verdict).await {
            Ok(()) if retiring(retirement).await => {
                match self.condition.remove().await {
                    Ok(_) => {
                        tracing::info!(target: LOG, "the GPU health condition written as the prune ran is taken back")
                    }
                    Err(e) => {
                        tracing::error!(target: LOG, error = %e, "taking back the GPU health condition failed")
                    }
                }
                false
            }
            Ok(()) => {
                self.backoff.reset();
                self.write.worked();
                tracing::info!(target: LOG, status = verdict.status.as_str(), reason = %verdict.reason, message = %verdict.message, "GPU health condition");
                self.published = Some(verdict.clone());
                true
            }
            Err(e) => {
                let wait = self.backoff.failed(now());
                self.retry = Some(now() + wait);
                self.write.failed(&e, Some(wait));
                false
            }
        }
    }
}

/// Whether this instance is being uninstalled, asked of the API (never without `--instance`).
async fn retiring(retirement: &mut Option<Retirement>) -> bool {
    match retirement {
        Some(r) => r.retired().await,
        None => false,
    }
}
