//! What the monitor writes besides its state: the condition (when it changes), the Warning
//! Events, and nothing of either once its instance is being uninstalled.

use super::Monitor;
use crate::health::api_failures::now;
use crate::health::events::EventType;
use crate::health::instance::Retirement;
use crate::health::signals::Began;
use crate::health::sticky::{Entry, Tracker};

impl Monitor {
    /// A Warning Event and a count for each warning episode that began.
    pub(super) async fn warn(&mut self, began: Vec<Began>) {
        let uid = self.condition.uid();
        for b in began {
            let uuid = self.uuids.get(&b.index).map_or("", |u| u.as_str()).to_string();
            self.metrics.warning(b.index, &uuid, b.signal.reason());
            let who = if uuid.is_empty() {
                format!("GPU {}", b.index)
            } else {
                format!("GPU {} ({uuid})", b.index)
            };
            let text = format!("{who}: {}, {}", b.signal.reason(), b.text);
            tracing::warn!(reason = b.signal.reason(), message = %text, "GPU warning");
            if self.retired() {
                continue;
            }
            let sent = self
                .events
                .send_asked(EventType::Warning, b.signal.reason(), &who, &text, uid.as_deref())
                .await;
            self.failures.events.said(sent);
        }
    }

    /// A Warning Event for each new fault (after the condition, so a slow Event API does not
    /// hold the condition back).
    pub(super) async fn announce(&mut self, new: Vec<Entry>) {
        if self.retired() {
            return;
        }
        let uid = self.condition.uid();
        for entry in new {
            let reason = entry.recorded.fault.reason();
            let sent = self
                .events
                .send_asked(EventType::Warning, reason, &entry.text, &entry.text, uid.as_deref())
                .await;
            self.failures.events.said(sent);
        }
    }

    /// Writes the condition if it differs from what the Node has. An instance being uninstalled
    /// writes nothing, and takes back a write that crossed its prune (two reads of its
    /// ServiceAccount per write, none on a pass that writes nothing).
    pub(super) async fn publish(&mut self) {
        let Some(verdict) = self.tracker.as_ref().map(Tracker::verdict) else { return };
        if self.published.as_ref() == Some(&verdict) || !self.backoff.ready(now()) {
            return;
        }
        if self.retiring().await {
            return;
        }
        match self.condition.apply(&verdict).await {
            Ok(()) if self.retiring().await => match self.condition.remove().await {
                Ok(_) => tracing::info!("the GPU health condition written as the prune ran is taken back"),
                Err(e) => tracing::error!(error = %e, "taking back the GPU health condition failed"),
            },
            Ok(()) => {
                self.backoff.reset();
                self.failures.write.worked();
                tracing::info!(status = verdict.status.as_str(), reason = %verdict.reason, message = %verdict.message, "GPU health condition");
                self.published = Some(verdict);
            }
            Err(e) => {
                let wait = self.backoff.failed(now());
                self.failures.write.failed(&e, Some(wait));
            }
        }
    }

    /// Whether this instance is being uninstalled, asked of the API (never without `--instance`).
    async fn retiring(&mut self) -> bool {
        match &mut self.retirement {
            Some(r) => r.retired().await,
            None => false,
        }
    }

    /// Whether this instance was found being uninstalled (asks nothing).
    pub(super) fn retired(&self) -> bool {
        self.retirement.as_ref().is_some_and(Retirement::known)
    }
}
