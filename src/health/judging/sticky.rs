//! Faults stay until the node reboots (its boot id changes), a person clears them or they clear
//! in place on evidence (the judge's `Healing` decides which, and when), and survive a restart of nvlabel: the [`Record`] stored on the Node with the condition is read back at
//! start-up (an earlier nvlabel's condition message, once, where there is no record yet).

use crate::health::values::fault::{Fault, Found};
use crate::health::values::old_message::{self, BOOT_MARK};
use crate::health::values::record::{BootId, Record, RecordedFault};
use crate::health::values::verdict::{
    Entry, Existing, Key, Status, Verdict, HEALTHY, UNAVAILABLE, UNRESPONSIVE,
};
use std::collections::BTreeMap;

/// The target of this file's log lines: the module it was before health had rooms, so no
/// line an operator reads or filters on changed with the move.
const LOG: &str = "nvlabel::health::sticky";

/// The most faults one message lists; the rest are counted (a Node object has a size limit).
const MAX_LISTED: usize = 64;

/// The sticky record of this boot's faults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracker {
    /// The boot the faults are of; `None` for a one-shot look, which records nothing for later.
    boot_id: Option<BootId>,
    entries: BTreeMap<Key, Entry>,
    /// NVML's error while it cannot answer.
    unavailable: Option<String>,
    /// What hangs in NVML, while something does.
    unresponsive: Option<String>,
    gpus: usize,
}

impl Tracker {
    /// No faults known, on the boot `boot_id`.
    pub fn new(boot_id: impl Into<BootId>) -> Tracker {
        Tracker::on(Some(boot_id.into()))
    }

    /// No faults known, on no boot: a one-shot look (`nvlabel health`), whose verdict names none
    /// and keeps no record.
    pub fn without_boot() -> Tracker {
        Tracker::on(None)
    }

    fn on(boot_id: Option<BootId>) -> Tracker {
        Tracker { boot_id, entries: BTreeMap::new(), unavailable: None, unresponsive: None, gpus: 0 }
    }

    /// The faults recorded earlier in this boot, from the condition on the Node. Only a `False`
    /// condition keeps faults (a person clears them by setting it `True`); they come from its
    /// record when it has one for `boot_id`, else (an earlier nvlabel's, or a record this version
    /// cannot read) from the message's old form. Anything else starts clean. Also returns the
    /// faults of an earlier boot this clears (the node rebooted while nvlabel was not running),
    /// as the message worded them.
    pub fn recover(boot: impl Into<BootId>, existing: &Existing) -> (Tracker, Vec<String>) {
        let boot = boot.into();
        let boot_id = boot.as_str();
        let mut t = Tracker::new(boot.clone());
        if existing.status != Status::False {
            return (t, Vec::new());
        }
        let faults = match existing.record.as_deref().map(Record::parse) {
            Some(Ok(record)) if record.boot_id == boot_id => record.faults,
            Some(Ok(record)) => {
                return (t, record.faults.into_iter().map(|f| Entry::new(f).text).collect());
            }
            Some(Err(e)) => {
                tracing::warn!(target: LOG, error = %e, "reading the faults from the condition's message instead");
                old_message::faults(boot_id, &existing.message)
            }
            None => old_message::faults(boot_id, &existing.message),
        };
        if faults.is_empty() {
            // An old message of another boot: what it listed is cleared.
            return (t, old_message::earlier_boot(boot_id, &existing.message).into_iter().collect());
        }
        for recorded in faults {
            let entry = Entry::new(recorded);
            t.entries.insert(entry.key(), entry);
        }
        (t, Vec::new())
    }

    /// The boot the record belongs to (`None` for a one-shot look).
    pub fn boot_id(&self) -> Option<&BootId> {
        self.boot_id.as_ref()
    }

    /// A new boot: every fault is forgotten. Returns those that were known, as worded.
    pub fn new_boot(&mut self, boot_id: impl Into<BootId>) -> Vec<String> {
        self.boot_id = Some(boot_id.into());
        std::mem::take(&mut self.entries).into_values().map(|e| e.text).collect()
    }

    /// NVML answered this pass (`gpus` GPUs), or could not (`Err`).
    pub fn nvml(&mut self, answer: Result<usize, String>) {
        match answer {
            Ok(n) => (self.gpus, self.unavailable) = (n, None),
            Err(e) => self.unavailable = Some(e),
        }
    }

    /// An NVML call hangs (what, for how long), or none does (`None`).
    pub fn unresponsive(&mut self, stall: Option<String>) {
        self.unresponsive = stall;
    }

    /// Forgets the recorded faults `which` picks (the expected GPU count changed: the count is
    /// judged again against the new one). Returns whether any was recorded.
    pub fn forget(&mut self, which: impl Fn(&Fault) -> bool) -> bool {
        let before = self.entries.len();
        self.entries.retain(|_, e| !which(&e.recorded.fault));
        self.entries.len() != before
    }

    /// Adds a fault; returns its entry when it is new (an existing one may get a newer value).
    /// `recurrences` says how often the same fault cleared in place lately (by its key): a fault
    /// that is back says so and asks for one step more than it would alone.
    pub fn record(
        &mut self,
        found: &Found,
        uuid: Option<&str>,
        recurrences: impl Fn(&Key) -> u32,
    ) -> Option<Entry> {
        let Found { gpu, fault } = found;
        let mut recorded = RecordedFault {
            gpu: *gpu,
            uuid: uuid.map(String::from),
            fault: fault.clone(),
            action: fault.action(),
            recurrences: None,
        };
        let key = Entry::new(recorded.clone()).key();
        if let Some(known) = self.entries.get(&key) {
            // Known already: a newer value of the same fault, keeping what its return said.
            recorded.recurrences = known.recorded.recurrences;
            recorded.action = known.recorded.action.max(recorded.action);
            // The Xid that started a recovery action stays its own (a pass's reading knows none).
            if let (Fault::Recovery { xid, .. }, Fault::Recovery { xid: first, .. }) =
                (&mut recorded.fault, &known.recorded.fault)
            {
                *xid = *first;
            }
            self.entries.insert(key, Entry::new(recorded));
            return None;
        }
        let back = recurrences(&key);
        if back > 0 {
            recorded.recurrences = Some(back);
            recorded.action = recorded.action.escalate();
        }
        let entry = Entry::new(recorded);
        self.entries.insert(key, entry.clone());
        Some(entry)
    }

    /// The recorded faults, by key.
    pub fn entries(&self) -> impl Iterator<Item = (&Key, &Entry)> {
        self.entries.iter()
    }

    /// Keeps only the faults `kept` lists (a person cleared the others: the faults a clear's
    /// record still lists, none for a clear of the whole node); returns those dropped.
    pub fn keep_only(&mut self, kept: &[RecordedFault]) -> Vec<Entry> {
        let keys: std::collections::BTreeSet<Key> =
            kept.iter().map(|f| Entry::new(f.clone()).key()).collect();
        let (stay, gone) = std::mem::take(&mut self.entries).into_iter().partition(|(k, _)| keys.contains(k));
        self.entries = stay;
        gone.into_values().collect()
    }

    /// Removes the fault `key` (it cleared in place); returns it.
    pub fn remove(&mut self, key: &Key) -> Option<Entry> {
        self.entries.remove(key)
    }

    /// The GPUs with a recorded fault.
    pub fn faulty_gpus(&self) -> std::collections::BTreeSet<u32> {
        self.entries.keys().map(|k| k.gpu).filter(|g| *g != u32::MAX).collect()
    }

    /// Each faulty GPU's UUID with the reason of its worst fault (what its device taints say);
    /// a fault of no known GPU taints nothing.
    pub fn faulty_uuids(&self) -> BTreeMap<String, &'static str> {
        let mut out: BTreeMap<String, &'static str> = BTreeMap::new();
        // Entries sort by GPU, then worst first: the first of each UUID is its worst.
        for e in self.entries.values() {
            if let Some(u) = &e.recorded.uuid {
                out.entry(u.clone()).or_insert(e.recorded.fault.reason());
            }
        }
        out
    }

    /// Whether any fault is recorded.
    pub fn faulty(&self) -> bool {
        !self.entries.is_empty()
    }

    /// The condition as it stands.
    pub fn verdict(&self) -> Verdict {
        if let Some(worst) = self.entries.values().min_by_key(|e| e.rank) {
            let mut listed: Vec<&str> =
                self.entries.values().map(|e| e.text.as_str()).take(MAX_LISTED).collect();
            let more = self.entries.len().saturating_sub(MAX_LISTED);
            let extra = format!("and {more} more faults");
            if more > 0 {
                listed.push(&extra);
            }
            return Verdict {
                status: Status::False,
                reason: worst.recorded.fault.reason().into(),
                message: match &self.boot_id {
                    Some(boot) => format!("{}{BOOT_MARK}{boot}]", listed.join("; ")),
                    None => listed.join("; "),
                },
                record: self.boot_id.as_ref().map(|boot| {
                    Record::new(boot.as_str(), self.entries.values().map(|e| e.recorded.clone()))
                }),
            };
        }
        if let Some(stall) = &self.unresponsive {
            return Verdict {
                status: Status::Unknown,
                reason: UNRESPONSIVE.into(),
                message: format!("NVML does not answer: {stall}"),
                record: None,
            };
        }
        match &self.unavailable {
            Some(e) => Verdict {
                status: Status::Unknown,
                reason: UNAVAILABLE.into(),
                message: format!("NVML cannot report GPU health: {e}"),
                record: None,
            },
            None => Verdict {
                status: Status::True,
                reason: HEALTHY.into(),
                message: format!("{} GPUs healthy", self.gpus),
                record: None,
            },
        }
    }
}

#[cfg(test)]
#[path = "sticky_tests.rs"]
mod tests;
