//! The judge: readings and events in, a [`Report`] out, with no I/O of its own. A pass's reading
//! (or an NVML event) goes through the [`Rules`] into the sticky [`Tracker`], a reading's evidence
//! clears faults in place ([`Healing`]), a person's clear the Node shows (read by the reading side
//! and handed in, [`NodeSaid`]) drops the faults it cleared ([`AdminClears`], first, so what is
//! new comes alone), an Xid that is no fault alone is counted against its
//! `--health-xid-thresholds` ([`Counter`]); the metrics of what was read are kept here too. The
//! time of each look and event is handed in (health's one clock, [`crate::health::now`]). The
//! [`crate::health::writing`] take the report, and the record they read back from the Node is
//! handed in ([`Judge::recover`]).

use crate::health::config::HealthConfig;
use crate::health::judging::action::Rule;
use crate::health::judging::admin::{AdminClears, Shown};
use crate::health::judging::outcome::{AfterXid, DriverSaid, Judged, NoFault};
use crate::health::judging::recovery::Healing;
use crate::health::judging::rules::Rules;
use crate::health::judging::signals::{Began, Signals};
use crate::health::judging::sticky::Tracker;
use crate::health::judging::thresholds::Counter;
use crate::health::metrics::HealthMetrics;
use crate::health::values::fault::{Action, Fault, Found};
use crate::health::values::reading::{Event, ReadError, Reading, Unreadable};
use crate::health::values::record::BootId;
use crate::health::values::report::{AdminCleared, Report, Warning};
use crate::health::values::verdict::{Entry, Existing};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// The target of this file's log lines: the module it was before health had rooms, so no
/// line an operator reads or filters on changed with the move.
const LOG: &str = "nvlabel::health::judge";

/// Health's readings and what it made of them, between passes.
pub struct Judge {
    metrics: Arc<HealthMetrics>,
    /// Each GPU's UUID by index, as NVML last told it.
    uuids: BTreeMap<u32, String>,
    /// This boot's faults; `None` until the record is read back from the Node.
    tracker: Option<Tracker>,
    /// The last reading, for links that go down and for the driver's recovery action.
    last: Option<Reading>,
    /// Faults from events that came before the record could be read.
    pending: Vec<Found>,
    /// The expected count in force at the last judging (the label's, else the flag's).
    expected_now: Option<u32>,
    /// Slowdown and PCIe replay episodes.
    signals: Signals,
    /// Says once which signals NVML does not answer here.
    unreadable: Unreadable,
    /// Faults going away (cleared after the hold) and coming back.
    healing: Healing,
    /// The recent Xids that `--health-xid-thresholds` counts.
    repeats: Counter,
    /// The clear by hand obeyed last.
    admin: AdminClears,
}

/// What the Node said when a look is judged, as the reading side read it from the Node watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSaid {
    /// The expected GPU count in force: the Node's label where it holds a count, else the flag's.
    pub expected: Option<u32>,
    /// What the Node shows of the condition (a clear by hand, or not).
    pub clear: Shown,
}

/// What one look at the GPUs saw, before it is judged.
pub struct Look {
    /// The reading; `None` while it hangs.
    reading: Option<Result<Reading, ReadError>>,
    /// What NVML call hangs, while one does.
    stall: Option<String>,
    /// The warning episodes that began (reported whether or not the record is known).
    warnings: Vec<Warning>,
    /// The Xid this look was taken after, for the driver's recovery action.
    after: Option<XidSeen>,
    /// When it was taken, on health's one clock.
    at: Instant,
}

/// An Xid on one GPU, after which a look was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XidSeen {
    /// The GPU's index.
    pub index: u32,
    /// The Xid.
    pub xid: u64,
}

impl Look {
    /// The report of a look that cannot be judged (the record is not known): its warnings only.
    pub fn unjudged(self) -> Report {
        Report { warnings: self.warnings, ..Report::default() }
    }

    /// This look as taken after `xid`: a recovery action its GPU's driver asks for names it.
    pub fn after(self, xid: &AfterXid) -> Look {
        Look { after: Some(XidSeen { index: xid.index, xid: xid.xid }), ..self }
    }

    /// What the driver said of GPU `index`'s recovery action in this look.
    pub fn driver_said(&self, index: u32) -> DriverSaid {
        DriverSaid::of(self.reading.as_ref(), index)
    }
}

impl Judge {
    /// A judge by what `config` says (the expected count of the flag until the Node is read),
    /// counting in `metrics`.
    pub fn new(config: &HealthConfig, metrics: Arc<HealthMetrics>) -> Judge {
        Judge {
            metrics,
            uuids: BTreeMap::new(),
            tracker: None,
            last: None,
            pending: Vec::new(),
            admin: AdminClears::default(),
            expected_now: config.settings.judging.expected_gpus,
            signals: Signals::default(),
            unreadable: Unreadable::default(),
            healing: Healing::default(),
            repeats: Counter::default(),
        }
    }

    /// Takes in one reading (`None` while it hangs) taken `at`, with what hangs in NVML
    /// (`stall`): the reading's metrics, the warnings that began, and the look to judge.
    pub fn look(
        &mut self,
        reading: Option<Result<Reading, ReadError>>,
        stall: Option<String>,
        at: Instant,
    ) -> Look {
        let mut warnings = Vec::new();
        if let Some(Ok(r)) = &reading {
            self.metrics.readings.inc();
            for g in &r.gpus {
                if let Some(u) = &g.uuid {
                    self.uuids.insert(g.index, u.clone());
                }
                self.metrics.observe(g, self.uuid(g.index));
            }
            let began = self.signals.observe(r, at);
            warnings = began.into_iter().map(|b| self.warning(b)).collect();
            self.unreadable.note(r);
        }
        Look { reading, stall, warnings, after: None, at }
    }

    /// An NVML call started (`stall` names it) or stopped hanging, between readings: the report
    /// of the condition then (`Unknown` when the timeout passes, not at the next reading), or
    /// `None` while the record is not known yet.
    pub fn stall_changed(&mut self, stall: Option<String>) -> Option<Report> {
        self.tracker.as_mut()?.unresponsive(stall);
        Some(self.report(Vec::new(), Vec::new()))
    }

    /// GPU `index`'s UUID, where NVML has told it.
    fn uuid(&self, index: u32) -> Option<&str> {
        self.uuids.get(&index).map(String::as_str)
    }

    /// A warning episode that began, counted and logged (whatever the writers then do).
    fn warning(&self, began: Began) -> Warning {
        let uuid = self.uuid(began.index).map(String::from);
        let w = Warning { index: began.index, uuid, signal: began.signal, detail: began.text };
        self.metrics.warning(w.index, w.uuid.as_deref(), w.signal.reason());
        tracing::warn!(target: LOG, reason = w.signal.reason(), message = %w.text(), "GPU warning");
        w
    }

    /// Whether the record has been read back from the Node.
    pub fn knows_record(&self) -> bool {
        self.tracker.is_some()
    }

    /// Takes up the record as the Node had it (`None`: no condition yet) in the boot `boot`;
    /// returns the faults of an earlier boot this clears.
    pub fn recover(&mut self, boot: &BootId, existing: Option<&Existing>) -> Vec<String> {
        let (t, cleared) = match existing {
            Some(c) => Tracker::recover(boot.clone(), c),
            None => (Tracker::new(boot.clone()), Vec::new()),
        };
        if t.faulty() {
            tracing::info!(target: LOG, faults = %t.verdict().message, "GPU faults recorded earlier in this boot stay");
        }
        self.tracker = Some(t);
        cleared
    }

    /// Clears the record where the node is in a new boot `boot`; returns the faults it cleared.
    pub fn rebooted(&mut self, boot: &BootId) -> Vec<String> {
        match &mut self.tracker {
            Some(t) if t.boot_id() != Some(boot) => t.new_boot(boot.clone()),
            _ => Vec::new(),
        }
    }

    /// Judges a look by the rules `config` sets, with what the Node `said`, into the record: the
    /// report of where it stands.
    pub fn judge(&mut self, look: Look, said: NodeSaid, config: &HealthConfig) -> Report {
        let NodeSaid { expected, clear } = said;
        let admin = self.obey(clear);
        let Some(tracker) = self.tracker.as_mut() else { return look.unjudged() };
        if expected != self.expected_now {
            let count = |c: Option<u32>| c.map_or_else(|| "none".to_string(), |c| c.to_string());
            tracing::info!(target: LOG,
                expected = count(expected),
                was = count(self.expected_now),
                "GPU health: the expected GPU count changed"
            );
            tracker.forget(|f| matches!(f, Fault::BelowExpected { .. }));
            self.expected_now = expected;
        }
        tracker.unresponsive(look.stall);
        let mut found = std::mem::take(&mut self.pending);
        let rules = Rules { judging: &config.settings.judging, expected: self.expected_now };
        match &look.reading {
            Some(Ok(r)) => {
                tracker.nvml(Ok(r.gpus.len()));
                found.extend(rules.faults(r, self.last.as_ref()).into_iter().map(|mut f| {
                    // The Xid after which the driver asks: its recovery action names it.
                    if let (Fault::Recovery { xid, .. }, Some(after)) = (&mut f.fault, look.after) {
                        *xid = (f.gpu == Some(after.index)).then_some(after.xid);
                    }
                    f
                }));
            }
            Some(Err(e)) => tracker.nvml(Err(e.to_string())),
            None => {}
        }
        let new_faults = self.record(&found, look.at);
        let mut recovered = Vec::new();
        if let (Some(Ok(r)), Some(tracker)) = (&look.reading, self.tracker.as_mut()) {
            let hold = config.settings.recovery_hold;
            recovered = self.healing.observe(tracker, r, self.expected_now, hold, look.at);
            for gone in &recovered {
                let f = &gone.entry.recorded;
                self.metrics.fault_turn(false, f.gpu, f.uuid.as_deref(), f.fault.reason());
                tracing::info!(target: LOG, fault = %gone.entry.text, evidence = %gone.evidence, "GPU fault cleared in place");
            }
            self.healthy_metrics();
        }
        if let Some(Ok(r)) = look.reading {
            self.last = Some(r);
        }
        Report { recovered, admin, ..self.report(new_faults, look.warnings) }
    }

    /// What an NVML event is by the rules `config` sets (an Xid counted either way): a fault
    /// alone or as the repeat that reaches its `--health-xid-thresholds`; no fault, with the rule
    /// that says so and its threshold's count; or an Xid its GPU's driver decides. `at` is when
    /// it came, on health's one clock.
    pub fn event_fault(&mut self, event: &Event, config: &HealthConfig, at: Instant) -> Judged {
        if let Event::Xid { index, xid, .. } = *event {
            self.metrics.xid(index, self.uuid(index), xid);
        }
        let rules = Rules { judging: &config.settings.judging, expected: self.expected_now };
        let rule = match rules.event_verdict(event, self.last.as_ref()) {
            Ok(found) => return Judged::Fault(found),
            Err(rule) => rule,
        };
        // Only an Xid is ever no fault alone.
        let Event::Xid { index, xid, .. } = *event else {
            return Judged::NotAFault(NoFault { rule, tally: None });
        };
        let tally = self.repeats.tally(&config.settings.judging.xid_thresholds, index, xid, at);
        if let Some(t) = tally.filter(|t| t.reached()) {
            // An Xid that keeps coming back on one GPU is past one workload's bug: a reset is the
            // least that tells whether the GPU is the cause (and what recovery in place clears).
            let action = Some(Action::ResetGpu);
            let fault = Fault::Xid { xid, mig: None, action, repeated: Some(t.threshold) };
            return Judged::Fault(Found { gpu: Some(index), fault });
        }
        match rule {
            Rule::Driver => Judged::DriverDecides(AfterXid { index, xid, tally }),
            rule => Judged::NotAFault(NoFault { rule, tally }),
        }
    }

    /// Keeps an event's fault for the next pass (the record is not known yet).
    pub fn keep(&mut self, found: Found) {
        self.pending.push(found);
    }

    /// An event's fault, come `at`, into the record, with what the Node shows of the condition
    /// (`clear`): the report of where it stands.
    pub fn found(&mut self, found: Found, clear: Shown, at: Instant) -> Report {
        let admin = self.obey(clear);
        let new_faults = self.record(&[found], at);
        Report { admin, ..self.report(new_faults, Vec::new()) }
    }

    /// Obeys a clear by hand the Node shows and the judge has not obeyed yet: drops the faults
    /// it cleared. Done before anything new is recorded, so that a new fault is reported alone
    /// and a fault whose cause is still read comes back with this reading, as a new one.
    fn obey(&mut self, shown: Shown) -> Option<AdminCleared> {
        let tracker = self.tracker.as_mut()?;
        let clear = self.admin.take(shown)?;
        let faults = tracker.keep_only(&clear.kept);
        for f in &faults {
            tracing::info!(target: LOG, fault = %f.text, "GPU fault cleared by hand");
        }
        self.healthy_metrics();
        Some(AdminCleared { faults })
    }

    /// Each faulty GPU's UUID with its worst fault's reason; `None` while the record is unknown.
    pub fn faulty(&self) -> Option<BTreeMap<String, &'static str>> {
        self.tracker.as_ref().map(Tracker::faulty_uuids)
    }

    /// Adds faults found `now` to the record; returns the new ones.
    fn record(&mut self, found: &[Found], now: Instant) -> Vec<Entry> {
        let Some(tracker) = self.tracker.as_mut() else { return Vec::new() };
        let mut new = Vec::new();
        for f in found {
            let uuid = f.gpu.and_then(|i| self.uuids.get(&i)).map(String::as_str);
            if let Some(entry) = tracker.record(f, uuid, |key| self.healing.recurrences(key, now)) {
                let r = &entry.recorded;
                if r.recurrences.is_some() {
                    self.metrics.fault_turn(true, r.gpu, r.uuid.as_deref(), r.fault.reason());
                }
                tracing::warn!(target: LOG, fault = %entry.text, "GPU fault");
                new.push(entry);
            }
        }
        self.healthy_metrics();
        new
    }

    /// Each GPU's health gauge as the record stands.
    fn healthy_metrics(&self) {
        let Some(tracker) = &self.tracker else { return };
        let faulty = tracker.faulty_gpus();
        for (index, uuid) in &self.uuids {
            self.metrics.healthy(*index, uuid, !faulty.contains(index));
        }
    }

    /// The report of the record as it stands, with what is new.
    fn report(&self, new_faults: Vec<Entry>, warnings: Vec<Warning>) -> Report {
        Report {
            cleared: None,
            recovered: Vec::new(),
            admin: None,
            verdict: self.tracker.as_ref().map(Tracker::verdict),
            faulty: self.faulty(),
            new_faults,
            warnings,
            overwritten: None,
        }
    }
}

#[cfg(test)]
#[path = "judge_tests.rs"]
mod tests;
