//! The Node condition and its fault record (one apply, [`crate::health::publish`]): read back
//! once at start (a restart forgets nothing), then written only when the verdict changes, and
//! read again after a person cleared it by hand (what the Node shows then is theirs). An
//! instance being uninstalled writes nothing, and takes back a write that crossed its prune (two
//! reads of its ServiceAccount per write, none on a pass that writes nothing).

use crate::health::api_failures::{now, Call};
use crate::health::backoff::AFTER_FAILURE;
use crate::health::config::HealthConfig;
use crate::health::instance::{manager_of, Retirement};
use crate::health::publish::NodeCondition;
use crate::health::sticky::{Existing, Verdict};
use crate::kubeapi::backoff::FullJitter;

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
}

impl ConditionWriter {
    /// The condition `config` names on Node `node`, under the instance's field manager.
    pub fn new(client: kube::Client, node: &str, config: &HealthConfig) -> ConditionWriter {
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
    /// instance is being uninstalled (asked before and after the write).
    pub async fn publish(&mut self, verdict: &Verdict, retirement: &mut Option<Retirement>) {
        if self.published.as_ref() == Some(verdict) || !self.backoff.ready(now()) {
            return;
        }
        if retiring(retirement).await {
            return;
        }
        match self.condition.apply(verdict).await {
            Ok(()) if retiring(retirement).await => match self.condition.remove().await {
                Ok(_) => tracing::info!("the GPU health condition written as the prune ran is taken back"),
                Err(e) => tracing::error!(error = %e, "taking back the GPU health condition failed"),
            },
            Ok(()) => {
                self.backoff.reset();
                self.write.worked();
                tracing::info!(status = verdict.status.as_str(), reason = %verdict.reason, message = %verdict.message, "GPU health condition");
                self.published = Some(verdict.clone());
            }
            Err(e) => {
                let wait = self.backoff.failed(now());
                self.write.failed(&e, Some(wait));
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
