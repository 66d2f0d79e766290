//! Publishing for the daemon: the writer (rebuilt when a reload changes the target), the labels
//! last published, drift repair with its guard, and the expiry refresh. The daemon's loop asks it
//! when to wake and tells it what happened; it never probes.

use super::metrics::Metrics;
use crate::kubeapi::drift::DriftGuard;
use crate::labels::Labels;
use crate::publish::{DaemonWriter, FailureReason, PublishError, SetupError, Target, Watches};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long one publish (with its retries) may take before it is abandoned.
pub const PUBLISH_DEADLINE: Duration = Duration::from_secs(60);

/// A writer, and the target it was built for.
struct Built {
    target: Target,
    writer: Box<dyn DaemonWriter>,
}

/// The writer and what it last published.
pub struct Publisher {
    client: Option<kube::Client>,
    /// How the API writers decide what to send.
    watching: Watches,
    writer: Option<Built>,
    /// The labels last published, for logging what changed, refreshes and repairs.
    published: Option<Labels>,
    drift: DriftGuard,
    /// When the next drift repair runs, if one is waiting.
    repair_due: Option<Instant>,
    /// The changes of the object the writer publishes into, kept across passes so none is missed.
    changes: Option<tokio::sync::watch::Receiver<u64>>,
    /// The failure in force, logged when it starts (or changes) and when it ends, not every time.
    failing: Option<String>,
    /// The labels of a publish that failed: written as soon as the watched object changes (the
    /// API answers again: a relist after a restart, a CRD installed, RBAC restored), not after
    /// the backoff meant for failing writes.
    wanted: Option<Labels>,
}

impl Publisher {
    /// A publisher whose API writers use `client`, deciding from `watching`.
    pub fn new(client: Option<kube::Client>, watching: Watches) -> Publisher {
        Publisher {
            client,
            watching,
            writer: None,
            published: None,
            drift: DriftGuard::default(),
            repair_due: None,
            changes: None,
            failing: None,
            wanted: None,
        }
    }

    /// The labels last published.
    pub fn published(&self) -> Option<&Labels> {
        self.published.as_ref()
    }

    /// The writer for `target`; rebuilt when a reload changed the target.
    pub async fn writer(&mut self, target: Target) -> Result<&mut Box<dyn DaemonWriter>, SetupError> {
        if self.writer.as_ref().is_none_or(|built| built.target != target) {
            let writer = target.build_daemon(self.client.as_ref(), &self.watching).await?;
            self.changes = writer.changes();
            self.writer = Some(Built { target, writer });
        }
        Ok(&mut self.writer.as_mut().expect("just built").writer)
    }

    /// Publishes `labels` to `target` within [`PUBLISH_DEADLINE`]; logs what changed.
    pub async fn publish(
        &mut self,
        target: Target,
        labels: Labels,
        metrics: &Metrics,
    ) -> Result<(), FailureReason> {
        let writer = match self.writer(target).await {
            Ok(w) => w,
            Err(e) => {
                tracing::error!(error = %e, "cannot set up the label writer; will retry");
                metrics.publish_failed("setup", FailureReason::Setup);
                return Err(FailureReason::Setup);
            }
        };
        let name = writer.name();
        // What someone else did to our output since the last pass (a feature file removed or
        // overwritten): this publish repairs it, and it is counted as drift.
        let drifted = writer.drifted();
        let rival = if drifted { writer.rival() } else { None };
        // In a fight, passes do not repair: the repair timer does, at the rate the log promised.
        if drifted && self.drift.fighting() && self.published.as_ref() == Some(&labels) {
            if self.repair_due.is_none() {
                self.schedule_repair(Instant::now());
            }
            return Ok(());
        }
        match self.attempt(&labels, Attempt::Publish, metrics).await {
            Ok(changed) => {
                self.wanted = None;
                if changed && drifted && self.published.as_ref() == Some(&labels) {
                    self.repaired(name, rival, metrics);
                } else {
                    log_changes(self.published.as_ref(), &labels, name, changed);
                }
                self.published = Some(labels);
                // A write the API accepted shows the cause of a failed watch may be gone: wake it.
                // A pass that wrote nothing proves nothing (it may have sent no request at all),
                // and waking on it would relist a whole fleet in the same second after an API
                // server restart, undoing the watches' jitter (the load bench saw 200 of 200).
                if let (true, Watches::On(Some(node))) = (changed, &self.watching) {
                    node.retry_now();
                }
                Ok(())
            }
            Err(reason) => {
                self.wanted = Some(labels);
                Err(reason)
            }
        }
    }

    /// The one way labels are written: `labels` through the writer in place, within
    /// [`PUBLISH_DEADLINE`]; a success ends the failure in force, a failure is counted and
    /// logged when it starts. Whether the writer changed anything.
    async fn attempt(
        &mut self,
        labels: &Labels,
        why: Attempt,
        metrics: &Metrics,
    ) -> Result<bool, FailureReason> {
        let Some(Built { writer, .. }) = self.writer.as_mut() else { return Ok(false) };
        let name = writer.name();
        match publish_within(writer.as_mut(), labels).await {
            Ok(changed) => {
                self.succeeded(name);
                Ok(changed)
            }
            Err(e) => Err(self.failed(name, why.failure(), &e, metrics)),
        }
    }

    /// Counts and logs a repair; the one that starts a fight is logged once, naming the other
    /// writer.
    fn repaired(&mut self, name: &'static str, rival: Option<String>, metrics: &Metrics) {
        metrics.drift_repairs.inc();
        if self.drift.repaired(Instant::now()) {
            metrics.drift_fights.inc();
            let other = rival.unwrap_or_else(|| "unknown (no managedFields entry names it)".into());
            tracing::warn!(
                writer = name,
                other_writer = %other,
                "another writer keeps changing nvlabel's labels back; repairing at most once a minute until it stops for a minute"
            );
        } else if !self.drift.fighting() {
            tracing::info!(writer = name, "someone changed nvlabel's labels; put them back");
        }
    }

    /// The watched object changed: schedules a repair if it lost our labels.
    pub fn object_changed(&mut self, now: Instant) {
        if self.wanted.is_some() {
            // The watch listed or saw an event: the API answers again, so a failed publish is
            // tried now (this is no fight, the drift guard has no say).
            self.repair_due = Some(now);
            return;
        }
        let drifted = self.writer.as_ref().is_some_and(|b| b.writer.drifted());
        if drifted && self.repair_due.is_none() {
            self.schedule_repair(now);
        }
    }

    /// Sets when the drift seen at `now` is repaired; says once when a fight has ended.
    fn schedule_repair(&mut self, now: Instant) {
        self.repair_due = Some(self.drift.drift_seen(now));
        if self.drift.take_ended() {
            tracing::info!(
                "resolved: the other writer left nvlabel's labels alone for a minute; repairs are immediate again"
            );
        }
    }

    /// Waits for the next change of the watched object (forever without one).
    pub async fn next_change(&mut self) -> Option<()> {
        match self.changes.as_mut() {
            Some(rx) => rx.changed().await.ok(),
            None => futures::future::pending().await,
        }
    }

    /// Whether a failed publish waits to be tried again.
    pub fn retrying(&self) -> bool {
        self.wanted.is_some()
    }

    /// When a repair is due.
    pub fn repair_due(&self) -> Option<Instant> {
        self.repair_due
    }

    /// Publishes the labels of a failed publish, or puts the last published labels back after
    /// someone changed them.
    pub async fn repair(&mut self, metrics: &Metrics) -> Result<(), FailureReason> {
        self.repair_due = None;
        if let Some(labels) = self.wanted.clone() {
            return self.retry_failed(labels, metrics).await;
        }
        let Some(labels) = self.published.clone() else { return Ok(()) };
        let Some(Built { writer, .. }) = self.writer.as_mut() else { return Ok(()) };
        if !writer.drifted() {
            return Ok(());
        }
        let (name, rival) = (writer.name(), writer.rival());
        // A watch behind our own write (at a start, the list from before the first publish)
        // looks like drift; a repair that finds the labels in place wrote nothing and repaired
        // nothing: no line, no count, no step towards a fight.
        if self.attempt(&labels, Attempt::Repair, metrics).await? {
            self.repaired(name, rival, metrics);
        }
        Ok(())
    }

    /// Publishes `labels`, whose publish failed, now that the watched object changed.
    async fn retry_failed(&mut self, labels: Labels, metrics: &Metrics) -> Result<(), FailureReason> {
        let Some(Built { writer, .. }) = self.writer.as_ref() else { return Ok(()) };
        let name = writer.name();
        let changed = self.attempt(&labels, Attempt::Publish, metrics).await?;
        self.wanted = None;
        log_changes(self.published.as_ref(), &labels, name, changed);
        self.published = Some(labels);
        Ok(())
    }

    /// How long until the writer wants its labels written again (the feature file's expiry).
    pub fn refresh_in(&self) -> Option<Duration> {
        self.writer.as_ref().and_then(|b| b.writer.refresh_in())
    }

    /// Writes the last published labels again (an expiry that must move forward).
    pub async fn refresh(&mut self, metrics: &Metrics) -> Result<(), FailureReason> {
        let Some(labels) = self.published.clone() else { return Ok(()) };
        self.attempt(&labels, Attempt::Refresh, metrics).await.map(drop)
    }

    /// Counts a failure; logs it at error when it starts or differs from the one in force.
    fn failed(
        &mut self,
        name: &'static str,
        what: &str,
        e: &PublishError,
        metrics: &Metrics,
    ) -> FailureReason {
        metrics.publish_failed(name, e.reason());
        let text = e.to_string();
        // The API writers' lines name the server, whatever the error's own text says.
        let server = matches!(name, crate::publish::NodeLabels::NAME | crate::publish::NodeFeature::NAME)
            .then(crate::kubeapi::errors::server);
        if self.failing.as_deref() != Some(text.as_str()) {
            tracing::error!(writer = name, server, error = %text, "{what}");
            self.failing = Some(text);
        } else {
            tracing::debug!(writer = name, error = %text, "{what} (again)");
        }
        e.reason()
    }

    /// Logs the end of a failure in force.
    fn succeeded(&mut self, name: &'static str) {
        if let Some(error) = self.failing.take() {
            tracing::info!(writer = name, %error, "resolved: publishing works again");
        }
    }

    /// The Node's allocatable resources as the writer last read them.
    pub fn node_allocatable(&self) -> Option<BTreeMap<String, String>> {
        self.writer.as_ref().and_then(|b| b.writer.node_allocatable())
    }
}

/// Logs what a publish did: one line at info, naming the labels. The first publish of a run
/// names every label it published (or says they were all in place already).
fn log_changes(before: Option<&Labels>, after: &Labels, writer: &str, written: bool) {
    let Some(before) = before else {
        let published = after.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ");
        match written {
            true => tracing::info!(writer, labels = after.len(), published, "published labels"),
            false => tracing::info!(
                writer,
                labels = after.len(),
                published,
                "labels already published; nothing changed"
            ),
        }
        return;
    };
    if !written && before == after {
        return;
    }
    let added: Vec<&String> = after.keys().filter(|k| !before.contains_key(*k)).collect();
    let removed: Vec<&String> = before.keys().filter(|k| !after.contains_key(*k)).collect();
    let changed: Vec<String> = after
        .iter()
        .filter_map(|(k, v)| before.get(k).filter(|old| *old != v).map(|old| format!("{k}: {old} -> {v}")))
        .collect();
    if added.is_empty() && removed.is_empty() && changed.is_empty() {
        return;
    }
    let list = |l: Vec<String>| l.join(", ");
    let (added, removed, changed) = (
        list(added.into_iter().map(|k| format!("{k}={}", after[k])).collect()),
        list(removed.into_iter().cloned().collect()),
        list(changed),
    );
    tracing::info!(writer, labels = after.len(), added, removed, changed, "published labels");
}

/// Why labels are written, for the line that says a write failed.
#[derive(Debug, Clone, Copy)]
enum Attempt {
    /// A pass's labels (or a failed publish's, tried again).
    Publish,
    /// The last published labels, put back after someone changed them.
    Repair,
    /// The last published labels again, so their expiry moves forward.
    Refresh,
}

impl Attempt {
    /// What a failure of this write means.
    fn failure(self) -> &'static str {
        match self {
            Attempt::Publish => "publishing labels failed; the published labels stay, retrying with backoff",
            Attempt::Repair => "repairing the published labels failed; retrying with backoff",
            Attempt::Refresh => "refreshing the published labels failed; retrying with backoff",
        }
    }
}

/// One publish by `writer`, abandoned at [`PUBLISH_DEADLINE`].
async fn publish_within(writer: &mut dyn DaemonWriter, labels: &Labels) -> Result<bool, PublishError> {
    match tokio::time::timeout(PUBLISH_DEADLINE, writer.publish(labels)).await {
        Ok(r) => r,
        Err(_) => Err(PublishError::Timeout(PUBLISH_DEADLINE)),
    }
}
