//! What counts as a GPU fault, how bad it is and what to do about it. Pure functions of what
//! NVML reported; no I/O. Faults and actions serialize as the Node's fault record stores them.

use crate::health::config::Judging;
use crate::health::judging::action::Rule;
use crate::health::values::fault::{Action, Fault, Found};
use crate::health::values::reading::{driver_answers, Event, Reading};
use std::collections::BTreeSet;

/// What counts as a fault: the operator's lists and count as configured (the very struct the
/// configuration handed over, borrowed, never copied), and the expected count in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules<'a> {
    /// `--health-ignore-xids`, `--health-fatal-xids` and `--health-expected-gpus`.
    pub judging: &'a Judging,
    /// GPUs the node should have now: the node's label where it holds a count, else the flag's.
    pub expected: Option<u32>,
}

/// Nothing listed, no count expected: the catalog alone decides.
static CATALOG_ONLY: Judging = Judging {
    ignored_xids: BTreeSet::new(),
    fatal_xids: BTreeSet::new(),
    expected_gpus: None,
    xid_thresholds: std::collections::BTreeMap::new(),
};

impl Default for Rules<'static> {
    /// The catalog alone decides, and no count is expected.
    fn default() -> Rules<'static> {
        Rules::new(&CATALOG_ONLY)
    }
}

impl<'a> Rules<'a> {
    /// The rules `judging` configures, expecting the flag's count (no node label known).
    pub fn new(judging: &'a Judging) -> Rules<'a> {
        Rules { judging, expected: judging.expected_gpus }
    }

    /// The faults a pass's reading shows. `previous` is the last reading, for links that were
    /// active and are not now.
    pub fn faults(&self, reading: &Reading, previous: Option<&Reading>) -> Vec<Found> {
        let mut out = Vec::new();
        for gpu in &reading.gpus {
            let mut add = |f: Fault| out.push(Found { gpu: Some(gpu.index), fault: f });
            if gpu.lost {
                add(Fault::Lost);
                continue;
            }
            if let Some(count) = gpu.uncorrected_volatile.filter(|c| *c > 0) {
                add(Fault::UncorrectedEcc { count });
            }
            if let Some(r) = gpu.remapped {
                if r.failure {
                    add(Fault::RemappedRowsFailure);
                }
                if r.pending {
                    add(Fault::RemappedRowsPending);
                }
            }
            if let Some(action) = gpu.recovery_action.and_then(Action::from_driver) {
                add(Fault::Recovery { action, xid: None });
            }
            if gpu.inforom_corrupted {
                add(Fault::Inforom);
            }
            if gpu.retired_pages_pending == Some(true) {
                add(Fault::RetiredPagesPending);
            }
            let before = previous
                .and_then(|p| p.gpus.iter().find(|g| g.index == gpu.index))
                .and_then(|g| g.nvlink_active.as_ref());
            if let (Some(now), Some(before)) = (&gpu.nvlink_active, before) {
                for (link, (was, is)) in before.iter().zip(now).enumerate() {
                    if *was && !*is {
                        add(Fault::NvlinkInactive { link: link as u32 });
                    }
                }
            }
        }
        let nvml = reading.gpus.len() as u32;
        if let Some(pci) = reading.pci_gpus.filter(|pci| nvml < *pci) {
            out.push(Found { gpu: None, fault: Fault::Missing { nvml, pci } });
        }
        if let Some(expected) = self.expected.filter(|e| nvml < *e) {
            out.push(Found { gpu: None, fault: Fault::BelowExpected { nvml, expected } });
        }
        out
    }

    /// The fault an event is, if any. `last` is the last reading: where the GPU's driver
    /// answers its recovery action, the driver decides after an Xid (its action is read at once
    /// and is the fault), unless the operator listed the Xid either way.
    pub fn event_fault(&self, event: &Event, last: Option<&Reading>) -> Option<Found> {
        self.event_verdict(event, last).ok()
    }

    /// As [`Rules::event_fault`], with the rule that says an Xid is no fault alone: the catalog,
    /// `--health-ignore-xids`, or the driver (whose recovery action is then read).
    pub fn event_verdict(&self, event: &Event, last: Option<&Reading>) -> Result<Found, Rule> {
        match *event {
            Event::Xid { index, xid, mig } => {
                let (ignored, fatal) = (&self.judging.ignored_xids, &self.judging.fatal_xids);
                let listed = ignored.contains(&xid) || fatal.contains(&xid);
                if driver_answers(last, index) && !listed {
                    return Err(Rule::Driver);
                }
                let a = crate::health::judging::action::xid_verdict(xid, ignored, fatal)?;
                Ok(Found {
                    gpu: Some(index),
                    fault: Fault::Xid { xid, mig, action: Some(a), repeated: None },
                })
            }
            Event::DoubleBitEcc { index } => Ok(Found { gpu: Some(index), fault: Fault::DoubleBitEcc }),
            Event::Lost { index } => Ok(Found { gpu: Some(index), fault: Fault::Lost }),
        }
    }
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
