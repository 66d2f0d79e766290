//! Health's state between readings: each reading and each NVML event goes into the sticky
//! record, out to the Node condition (only when it changes), Events and metrics. The task that
//! drives it (its timer, the event thread, reloads, shutdown) is [`super::task`].

use super::metrics::HealthMetrics;
use super::nvml;
use super::publish::{NodeCondition, NodeEvents};
use super::rules::{Event, Found, Reading, Rules};
use super::sticky::{Entry, Existing, Tracker, Verdict};
use super::taints::DeviceTaints;
use crate::config::Settings;
use crate::kubeapi::backoff::FullJitter;
use crate::kubeapi::slices::SliceWatch;
use crate::probe::{ProbeOptions, Session};
use crate::worker::Worker;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Why health could not start.
#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    /// `--health` without Kubernetes API access.
    #[error("--health publishes a Node condition, which needs API access: use --sink=node or --use-node-feature-api with --node-name")]
    NoApi,
    /// A thread of health's could not be started.
    #[error("cannot start the {0} thread: {1}")]
    Thread(&'static str, #[source] std::io::Error),
}

/// Why the boot id is unknown.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the boot id from {path}: {reason}")]
pub struct BootIdError {
    /// The file.
    pub path: PathBuf,
    /// What went wrong.
    pub reason: String,
}

/// Reads the node's boot id (a UUID line; at most 128 bytes are read).
pub fn boot_id(path: &Path) -> Result<String, BootIdError> {
    let err = |reason: String| BootIdError { path: path.into(), reason };
    let file = std::fs::File::open(path).map_err(|e| err(e.to_string()))?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::Read::take(file, 128), &mut text)
        .map_err(|e| err(e.to_string()))?;
    let id = text.trim();
    if id.is_empty() {
        return Err(err("the file is empty".into()));
    }
    Ok(id.to_string())
}

/// The health state between passes.
pub struct Monitor {
    opts: ProbeOptions,
    session: Session,
    /// Health's own thread for NVML: a hung call here never holds labelling, nor the reverse.
    worker: Worker,
    rules: Rules,
    boot_id_file: PathBuf,
    tracker: Option<Tracker>,
    last: Option<Reading>,
    uuids: BTreeMap<u32, String>,
    condition: NodeCondition,
    events: NodeEvents,
    metrics: Arc<HealthMetrics>,
    published: Option<Verdict>,
    /// Faults from events that came before the Node could be read.
    pending: Vec<Found>,
    /// After a failed API call: no call before this time (growing, jittered backoff).
    backoff: Backoff,
    /// On a DRA node: the faulty GPUs' device taints, and the slices that list the devices.
    taints: Option<(DeviceTaints, SliceWatch)>,
}

/// No API call before a time after a failure: the project's one full-jitter backoff
/// ([`FullJitter`]), from 1 s doubling to 5 minutes.
#[derive(Debug)]
pub struct Backoff {
    jitter: FullJitter,
    until: Option<std::time::Instant>,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff { jitter: FullJitter::new(Duration::from_secs(1), Duration::from_secs(300)), until: None }
    }
}

impl Backoff {
    /// Whether a call may go at `now`.
    pub fn ready(&self, now: std::time::Instant) -> bool {
        self.until.is_none_or(|t| now >= t)
    }

    /// A call failed at `now`: the next waits a random time in a window that doubles. Returns
    /// the wait.
    pub fn failed(&mut self, now: std::time::Instant) -> Duration {
        let wait = self.jitter.next().unwrap_or(Duration::from_secs(300));
        self.until = Some(now + wait);
        wait
    }

    /// A call succeeded.
    pub fn succeeded(&mut self) {
        *self = Backoff::default();
    }
}

impl Monitor {
    /// The monitor for these settings, reading NVML through `session` and publishing through
    /// `client`.
    pub fn new(
        settings: &Settings,
        client: kube::Client,
        session: Session,
        metrics: Arc<HealthMetrics>,
    ) -> Result<Monitor, HealthError> {
        let node = settings.node_name.clone().ok_or(HealthError::NoApi)?;
        let h = &settings.health;
        let instance = settings.pod_name.clone().unwrap_or_else(|| format!("nvlabel-{node}"));
        Ok(Monitor {
            opts: settings.probe_options(),
            session,
            worker: Worker::spawn("nvml-health").map_err(|e| HealthError::Thread("nvml-health", e))?,
            rules: Rules {
                ignored_xids: h.ignored_xids.clone(),
                fatal_xids: h.fatal_xids.clone(),
                ..Rules::default()
            },
            boot_id_file: h.boot_id_file.clone(),
            tracker: None,
            last: None,
            uuids: BTreeMap::new(),
            condition: NodeCondition::new(client.clone(), &node, &h.condition_type),
            events: NodeEvents::new(client, &node, &instance),
            metrics,
            published: None,
            pending: Vec::new(),
            backoff: Backoff::default(),
            taints: None,
        })
    }

    /// Also keeps the faulty GPUs' devices in `slices` tainted through `taints`.
    pub fn taint_devices(&mut self, taints: DeviceTaints, slices: SliceWatch) {
        self.taints = Some((taints, slices));
    }

    /// Brings the device taints in line with the record and the slices (a device that appears
    /// in a slice after its GPU's fault gets its taint here).
    pub async fn sync_taints(&mut self) {
        let (Some(tracker), Some((taints, slices))) = (&self.tracker, &mut self.taints) else { return };
        taints.sync(&slices.state(), &tracker.faulty_uuids()).await;
    }

    /// The record, recovered from the Node the first time (a restart forgets nothing), and
    /// cleared when the boot id changed. `None` while either cannot be read: nothing is
    /// published then, so a recorded fault is never overwritten by a guess.
    async fn tracker(&mut self) -> Option<&mut Tracker> {
        let boot = match boot_id(&self.boot_id_file) {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(error = %e, "GPU health is not published without the boot id");
                return None;
            }
        };
        if self.tracker.is_none() {
            if !self.backoff.ready(std::time::Instant::now()) {
                return None;
            }
            match self.condition.read().await {
                Ok(existing) => {
                    self.backoff.succeeded();
                    let t = match &existing {
                        Some(c) => Tracker::recover(&boot, c),
                        None => Tracker::new(&boot),
                    };
                    if t.faulty() {
                        tracing::info!(faults = %t.verdict().message, "GPU faults recorded earlier in this boot stay");
                    }
                    self.published = existing.as_ref().map(Existing::published);
                    self.tracker = Some(t);
                }
                Err(e) => {
                    let wait = self.backoff.failed(std::time::Instant::now());
                    tracing::warn!(error = %e, retry_in = ?wait, "cannot read the Node's health condition yet");
                    return None;
                }
            }
        }
        let t = self.tracker.as_mut()?;
        if t.boot_id() != boot && t.new_boot(&boot) {
            tracing::info!(boot_id = %boot, "the node rebooted: recorded GPU faults are cleared");
            let note = format!("The node rebooted (boot id {boot}); earlier GPU faults are cleared");
            let uid = self.condition.uid();
            if let Err(e) = self.events.send("Normal", "GpusRecovered", &note, uid.as_deref()).await {
                tracing::warn!(error = %e, "cannot send the recovery Event");
            }
        }
        self.tracker.as_mut()
    }

    /// Takes up reloaded settings: which Xids are ignored and where NVML and sysfs are. The
    /// condition type, `--health` itself and the boot-id file are start-only (a reload that
    /// changes them is rejected before it gets here).
    pub fn reconfigure(&mut self, settings: &Settings) {
        let h = &settings.health;
        if self.rules.ignored_xids != h.ignored_xids || self.rules.fatal_xids != h.fatal_xids {
            tracing::info!(ignored = ?h.ignored_xids, fatal = ?h.fatal_xids, "GPU health: the listed Xids changed");
            self.rules.ignored_xids = h.ignored_xids.clone();
            self.rules.fatal_xids = h.fatal_xids.clone();
        }
        self.opts = settings.probe_options();
    }

    /// The Xids that are not faults, as configured now.
    pub fn ignored_xids(&self) -> &std::collections::BTreeSet<u64> {
        &self.rules.ignored_xids
    }

    /// The probe options in force (the event thread's at start).
    pub fn probe_options(&self) -> &ProbeOptions {
        &self.opts
    }

    /// One health pass: read NVML, record faults, publish what changed.
    pub async fn pass(&mut self) {
        let (session, opts) = (self.session.clone(), self.opts.clone());
        let reading = match self.worker.run(move || nvml::read(&session, &opts)).await {
            Ok(reading) => reading,
            Err(e) => Err(e.into()),
        };
        self.metrics.readings.inc();
        if let Ok(r) = &reading {
            for g in &r.gpus {
                if let Some(u) = &g.uuid {
                    self.uuids.insert(g.index, u.clone());
                }
                self.metrics.observe(g, self.uuids.get(&g.index).map_or("", |u| u.as_str()));
            }
        }
        if self.tracker().await.is_none() {
            return;
        }
        let tracker = self.tracker.as_mut().expect("just made");
        let mut found = std::mem::take(&mut self.pending);
        match &reading {
            Ok(r) => {
                tracker.nvml(Ok(r.gpus.len()));
                found.extend(self.rules.faults(r, self.last.as_ref()));
            }
            Err(e) => tracker.nvml(Err(e.to_string())),
        }
        let new = self.record(&found);
        if let Ok(r) = reading {
            self.last = Some(r);
        }
        self.publish().await;
        self.sync_taints().await;
        self.announce(new).await;
    }

    /// One NVML event.
    pub async fn event(&mut self, event: Event) {
        if let Event::Xid { index, xid, .. } = event {
            self.metrics.xid(index, self.uuids.get(&index).map_or("", |u| u.as_str()), xid);
        }
        let Some(found) = self.rules.event_fault(&event, self.last.as_ref()) else {
            if self.driver_decides(&event) {
                // The driver sets its recovery action with the Xid: read it now, not next pass.
                tracing::info!(?event, "Xid: the driver's recovery action decides; reading it now");
                return self.pass().await;
            }
            tracing::info!(?event, "GPU event that is not a fault (the Xid catalog or --health-ignore-xids)");
            return;
        };
        if self.tracker().await.is_none() {
            // Kept for the next pass, which retries reading the Node.
            tracing::warn!(?event, "GPU fault seen before the Node could be read; kept for the next pass");
            self.pending.push(found);
            return;
        }
        let new = self.record(&[found]);
        self.publish().await;
        self.sync_taints().await;
        self.announce(new).await;
    }

    /// Whether `event` is an Xid on a GPU whose driver answers its recovery action.
    fn driver_decides(&self, event: &Event) -> bool {
        let Event::Xid { index, .. } = event else { return false };
        super::rules::driver_answers(self.last.as_ref(), *index)
    }

    /// Adds faults to the record; returns the new ones.
    fn record(&mut self, found: &[Found]) -> Vec<Entry> {
        let Some(tracker) = self.tracker.as_mut() else { return Vec::new() };
        let mut new = Vec::new();
        for f in found {
            let uuid = f.0.and_then(|i| self.uuids.get(&i)).map(String::as_str);
            if let Some(entry) = tracker.record(f, uuid) {
                tracing::warn!(fault = %entry.text, "GPU fault");
                new.push(entry);
            }
        }
        let faulty = tracker.faulty_gpus();
        for (index, uuid) in &self.uuids {
            self.metrics.healthy(*index, uuid, !faulty.contains(index));
        }
        new
    }

    /// A Warning Event for each new fault (after the condition, so a slow Event API does not
    /// hold the condition back).
    async fn announce(&mut self, new: Vec<Entry>) {
        let uid = self.condition.uid();
        for entry in new {
            let reason = super::rules::REASONS[entry.rank];
            if let Err(e) = self.events.send("Warning", reason, &entry.text, uid.as_deref()).await {
                tracing::warn!(error = %e, "cannot send the fault Event");
            }
        }
    }

    /// Writes the condition if it differs from what the Node has.
    async fn publish(&mut self) {
        let Some(verdict) = self.tracker.as_ref().map(Tracker::verdict) else { return };
        if self.published.as_ref() == Some(&verdict) || !self.backoff.ready(std::time::Instant::now()) {
            return;
        }
        match self.condition.apply(&verdict).await {
            Ok(()) => {
                self.backoff.succeeded();
                tracing::info!(status = verdict.status, reason = %verdict.reason, message = %verdict.message, "GPU health condition");
                self.published = Some(verdict);
            }
            Err(e) => {
                let wait = self.backoff.failed(std::time::Instant::now());
                tracing::error!(error = %e, retry_in = ?wait, "writing the GPU health condition failed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_with_jitter_up_to_a_cap_and_resets() {
        let mut b = Backoff::default();
        let t = std::time::Instant::now();
        assert!(b.ready(t));
        assert_eq!(b.jitter.window(), Duration::from_secs(1));
        let first = b.failed(t);
        assert!(first < Duration::from_secs(1), "{first:?}");
        assert!(!b.ready(t) || first.is_zero());
        assert!(b.ready(t + first));
        b.failed(t);
        assert_eq!(b.jitter.window(), Duration::from_secs(4), "the window doubles per failure");
        for _ in 0..20 {
            b.failed(t);
        }
        assert!(b.failed(t) < Duration::from_secs(300), "capped");
        b.succeeded();
        assert!(b.ready(t));
        assert_eq!(b.jitter.window(), Duration::from_secs(1), "a success starts over");
    }

    #[test]
    fn boot_id_is_read_trimmed_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("boot_id");
        std::fs::write(&p, "6f1e0c0a-1111-2222-3333-444455556666\n").unwrap();
        assert_eq!(boot_id(&p).unwrap(), "6f1e0c0a-1111-2222-3333-444455556666");
        std::fs::write(&p, "").unwrap();
        assert!(boot_id(&p).unwrap_err().to_string().contains("boot_id: the file is empty"));
        let e = boot_id(&dir.path().join("missing")).unwrap_err().to_string();
        assert!(e.contains("missing"), "{e}");
    }
}
