//! Health's state between readings: each reading and each NVML event goes into the sticky
//! record, out to the Node condition (only when it changes), Events and metrics. The task that
//! drives it (its timer, the event thread, reloads, shutdown) is [`super::task`].

use super::api_failures::now;
pub use super::boot::{boot_id, BootIdError};
use super::config::{HealthConfig, InForce, Judging};
use super::events::{EventType, NodeEvents};
use super::expected::Expected;
use super::instance::{manager_of, Retirement};
use super::metrics::HealthMetrics;
use super::nvml;
use super::publish::NodeCondition;
use super::rules::Fault;
use super::rules::{Event, Found, Reading, Rules};
use super::signals::Signals;
use super::sticky::{Entry, Existing, Tracker, Verdict};
use super::taints::DeviceTaints;
use super::watchdog::Watchdog;

mod writes;
use super::HealthError;
use crate::kubeapi::object_watch::ObjectWatch;
use crate::kubeapi::slices::SliceWatch;
use crate::probe::{ProbeOptions, Session};
use crate::worker::Answer;
use crate::worker::Worker;
use k8s_openapi::api::core::v1::Node;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

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
    backoff: crate::kubeapi::backoff::FullJitter,
    /// Failed API calls, said once, then at most once a minute, then resolved.
    failures: super::api_failures::ApiFailures,
    /// On a DRA node: the faulty GPUs' device taints, and the slices that list the devices.
    taints: Option<(DeviceTaints, SliceWatch)>,
    /// The GPUs the node should have.
    expected: Expected,
    /// Slowdown and PCIe replay episodes.
    signals: Signals,
    /// Says once which signals NVML does not answer here.
    unreadable: super::reading::Unreadable,
    /// A reading that outlived its deadline, still running on the worker (never queued behind).
    in_flight: Option<Answer<Result<Reading, nvml::ReadError>>>,
    /// How long NVML work may run before health says Unknown, and whether some did.
    watchdog: Watchdog,
    /// With `--instance`: whether it is being uninstalled (then nothing more is written).
    retirement: Option<Retirement>,
}

impl Monitor {
    /// The monitor for `config`, reading NVML through `session` and publishing through
    /// `client`; with `node`, this Node's watch, the expected GPU count comes from its label, and
    /// with `taints`, the faulty GPUs' devices in those slices are tainted.
    pub fn new(
        config: &HealthConfig,
        client: kube::Client,
        session: Session,
        metrics: Arc<HealthMetrics>,
        node: Option<ObjectWatch<Node>>,
        taints: Option<(DeviceTaints, SliceWatch)>,
    ) -> Result<Monitor, HealthError> {
        let name = config.node.clone().ok_or(HealthError::NoApi)?;
        let judging = &config.judging;
        Ok(Monitor {
            opts: config.probe.clone(),
            session,
            worker: Worker::spawn("nvml-health").map_err(|e| HealthError::Thread("nvml-health", e))?,
            rules: Rules::judging(judging),
            boot_id_file: config.boot_id_file.clone(),
            tracker: None,
            last: None,
            uuids: BTreeMap::new(),
            condition: NodeCondition::new(
                client.clone(),
                &name,
                &config.condition_type,
                &manager_of(config.instance.as_ref()),
                Default::default(),
            ),
            retirement: config.instance.clone().map(|i| Retirement::new(client.clone(), i)),
            events: NodeEvents::new(client, &name, &config.event_instance(&name), Default::default()),
            metrics,
            published: None,
            pending: Vec::new(),
            backoff: super::backoff::AFTER_FAILURE,
            failures: Default::default(),
            taints,
            expected: Expected::new(judging.expected_gpus, node),
            signals: Signals::default(),
            unreadable: Default::default(),
            in_flight: None,
            watchdog: Watchdog::new(config.nvml_timeout),
        })
    }

    /// Brings the device taints in line with the record and the slices (a device that appears
    /// in a slice after its GPU's fault gets its taint here).
    pub async fn sync_taints(&mut self) {
        let retired = self.retired();
        let (Some(tracker), Some((taints, slices)), false) = (&self.tracker, &mut self.taints, retired)
        else {
            return;
        };
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
            if !self.backoff.ready(now()) {
                return None;
            }
            match self.condition.read().await {
                Ok(existing) => {
                    self.backoff.reset();
                    self.failures.read.worked();
                    let (t, cleared) = match &existing {
                        Some(c) => Tracker::recover(&boot, c),
                        None => (Tracker::new(&boot), Vec::new()),
                    };
                    if t.faulty() {
                        tracing::info!(faults = %t.verdict().message, "GPU faults recorded earlier in this boot stay");
                    }
                    // Written by an nvlabel without this instance: written again, so it is ours.
                    let legacy = self.condition.legacy();
                    self.published = existing.as_ref().filter(|_| !legacy).map(Existing::published);
                    self.tracker = Some(t);
                    // The node rebooted while nvlabel was not running (a reboot restarts it).
                    self.recovered(&boot, cleared).await;
                }
                Err(e) => {
                    let wait = self.backoff.failed(now());
                    self.failures.read.failed(&e, Some(wait));
                    return None;
                }
            }
        }
        let t = self.tracker.as_mut()?;
        if t.boot_id() != boot {
            let cleared = t.new_boot(&boot);
            self.recovered(&boot, cleared).await;
        }
        self.tracker.as_mut()
    }

    /// Says that the faults `cleared` (of an earlier boot) are gone with the reboot into `boot`:
    /// one log line and one `GpusRecovered` Event, each naming them; nothing when none were.
    async fn recovered(&mut self, boot: &str, cleared: Vec<String>) {
        if cleared.is_empty() || self.retired() {
            return;
        }
        let faults = cleared.join("; ");
        tracing::info!(boot_id = %boot, cleared = %faults, "the node rebooted: recorded GPU faults are cleared");
        let note = format!("The node rebooted (boot id {boot}); earlier GPU faults are cleared: {faults}");
        let uid = self.condition.uid();
        let sent =
            self.events.send_asked(EventType::Normal, "GpusRecovered", boot, &note, uid.as_deref()).await;
        self.failures.events.said(sent);
    }

    /// Takes up a reloaded configuration: which Xids decide, the expected count, the NVML
    /// timeout, where NVML and sysfs are, and the device taints' effect (rewritten at the next
    /// sync). The condition type, `--health` itself and the allocation mode are start-only (a
    /// reload that changes them is rejected before it gets here).
    pub fn reconfigure(&mut self, config: &HealthConfig) {
        let j = &config.judging;
        if self.rules.ignored_xids != j.ignored_xids || self.rules.fatal_xids != j.fatal_xids {
            let list = |xids: &std::collections::BTreeSet<u64>| {
                xids.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
            };
            tracing::info!(ignored = %list(&j.ignored_xids), fatal = %list(&j.fatal_xids), "GPU health: the listed Xids changed");
            self.rules.ignored_xids = j.ignored_xids.clone();
            self.rules.fatal_xids = j.fatal_xids.clone();
        }
        // The count in force (the rules') changes at the next reading, which says so.
        self.expected.set_flag(j.expected_gpus);
        self.watchdog.timeout = config.nvml_timeout;
        self.opts = config.probe.clone();
        if let Some((taints, _)) = &mut self.taints {
            taints.set_effect(config.taint_effect);
        }
    }

    /// What this monitor works by now, read back from the parts that use it (how a test sees
    /// that a reload arrived); `every` is the task's.
    pub fn in_force(&self, every: Duration) -> InForce {
        InForce {
            judging: Judging {
                ignored_xids: self.rules.ignored_xids.clone(),
                fatal_xids: self.rules.fatal_xids.clone(),
                expected_gpus: self.expected.flag(),
            },
            nvml_timeout: self.watchdog.timeout,
            probe: self.opts.clone(),
            taint_effect: self.taints.as_ref().map(|(t, _)| t.effect()),
            every,
        }
    }

    /// The probe options in force (the event thread's at start).
    pub fn probe_options(&self) -> &ProbeOptions {
        &self.opts
    }

    /// One health pass: read NVML, record faults, publish what changed.
    pub async fn pass(&mut self) {
        let reading = self.read().await;
        let mut began = Vec::new();
        if let Some(Ok(r)) = &reading {
            self.metrics.readings.inc();
            for g in &r.gpus {
                if let Some(u) = &g.uuid {
                    self.uuids.insert(g.index, u.clone());
                }
                self.metrics.observe(g, self.uuids.get(&g.index).map_or("", |u| u.as_str()));
            }
            began = self.signals.observe(r, std::time::Instant::now());
            self.unreadable.note(r);
        }
        let stall = self.watchdog.check(&self.session, &self.metrics);
        if self.tracker().await.is_none() {
            return self.warn(began).await;
        }
        let expected = self.expected.count();
        let tracker = self.tracker.as_mut().expect("just made");
        if expected != self.rules.expected_gpus {
            let count = |c: Option<u32>| c.map_or_else(|| "none".to_string(), |c| c.to_string());
            tracing::info!(
                expected = count(expected),
                was = count(self.rules.expected_gpus),
                "GPU health: the expected GPU count changed"
            );
            tracker.forget(|f| matches!(f, Fault::BelowExpected { .. }));
            self.rules.expected_gpus = expected;
        }
        tracker.unresponsive(stall);
        let mut found = std::mem::take(&mut self.pending);
        match &reading {
            Some(Ok(r)) => {
                tracker.nvml(Ok(r.gpus.len()));
                found.extend(self.rules.faults(r, self.last.as_ref()));
            }
            Some(Err(e)) => tracker.nvml(Err(e.to_string())),
            None => {}
        }
        let new = self.record(&found);
        if let Some(Ok(r)) = reading {
            self.last = Some(r);
        }
        self.publish().await;
        self.sync_taints().await;
        self.announce(new).await;
        self.warn(began).await;
    }

    /// This pass's reading, waited for up to `--health-nvml-timeout`; `None` while it hangs (it
    /// is kept, and the next pass looks whether it came, without queueing another behind it).
    async fn read(&mut self) -> Option<Result<Reading, nvml::ReadError>> {
        let (answer, wait) = match self.in_flight.take() {
            Some(answer) => (answer, Duration::ZERO),
            None => {
                let (session, opts) = (self.session.clone(), self.opts.clone());
                let job = move || {
                    let _busy = session.enter("health reading");
                    nvml::read(&session, &opts)
                };
                match self.worker.submit(job) {
                    Ok(answer) => (answer, self.watchdog.timeout),
                    Err(e) => return Some(Err(e.into())),
                }
            }
        };
        match answer.within(wait).await {
            Ok(answer) => Some(answer.unwrap_or_else(|e| Err(e.into()))),
            Err(still) => {
                self.in_flight = Some(still);
                None
            }
        }
    }

    /// One NVML event.
    pub async fn event(&mut self, event: Event) {
        if let Event::Xid { index, xid, .. } = event {
            self.metrics.xid(index, self.uuids.get(&index).map_or("", |u| u.as_str()), xid);
        }
        let Some(found) = self.rules.event_fault(&event, self.last.as_ref()) else {
            if self.driver_decides(&event) {
                // The driver sets its recovery action with the Xid: read it now, not next pass.
                tracing::info!(%event, "Xid: the driver's recovery action decides; reading it now");
                return self.pass().await;
            }
            tracing::info!(%event, "GPU event that is not a fault (the Xid catalog or --health-ignore-xids)");
            return;
        };
        if self.tracker().await.is_none() {
            // Kept for the next pass, which retries reading the Node.
            tracing::warn!(%event, "GPU fault seen before the Node could be read; kept for the next pass");
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
}
