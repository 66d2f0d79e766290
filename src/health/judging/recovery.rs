//! Faults that clear in place, on evidence, and faults that come back. A recorded fault clears
//! without a reboot only when what raised it reads as gone, and has read so in every reading for
//! `--health-recovery-hold` (so a value that flickers never clears it); a fault nothing can show
//! the end of (an Xid where the driver gives no recovery action, a corrupted InfoROM, a failed
//! row remapping) stays until the node reboots. A fault that comes back within
//! [`RECURRENCE_WINDOW`] of clearing says so, with how often, and asks for more than before.
//! Pure state of the judging side: the writers only see what it decided.

use crate::health::values::fault::Fault;

use crate::health::judging::sticky::Tracker;
use crate::health::values::reading::Reading;
use crate::health::values::report::Recovered;
use crate::health::values::verdict::Key;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long after a fault cleared its return counts as the same fault coming back.
pub const RECURRENCE_WINDOW: Duration = Duration::from_secs(3600);

/// What a reading says about a recorded fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Evidence {
    /// What raised it is still read (or the GPU cannot be read: nothing is known).
    Present,
    /// What raised it is gone: the words of what shows it.
    Gone(String),
    /// Nothing the GPU reports can show this fault ended: it stays until reboot.
    Never,
}

/// What the reading `r` says about `fault` of GPU `gpu` (`None`: of the node), with `expected`
/// the GPU count in force.
pub fn evidence(gpu: Option<u32>, fault: &Fault, r: &Reading, expected: Option<u32>) -> Evidence {
    let nvml = r.gpus.len() as u32;
    let gone = |yes: bool, words: String| if yes { Evidence::Gone(words) } else { Evidence::Present };
    let Some(index) = gpu else {
        return match fault {
            Fault::Missing { .. } => match r.pci_gpus {
                Some(pci) => gone(nvml >= pci, format!("NVML sees {nvml} GPUs, as many as the PCI bus")),
                None => Evidence::Present,
            },
            Fault::BelowExpected { .. } => {
                let met = expected.is_none_or(|e| nvml >= e);
                gone(met, format!("NVML sees {nvml} GPUs, as many as the node should have"))
            }
            _ => Evidence::Present,
        };
    };
    let g = match r.gpus.iter().find(|g| g.index == index) {
        Some(g) if !g.lost => g,
        _ => return Evidence::Present,
    };
    let driver_none = "the driver's recovery action is none and the GPU answers".to_string();
    match fault {
        Fault::Lost => Evidence::Gone("the GPU answers NVML again".into()),
        Fault::Recovery { .. } | Fault::Xid { .. } => match g.recovery_action {
            Some(action) => gone(action == 0, driver_none),
            // No driver answer for field 230: an Xid's end cannot be seen.
            None if matches!(fault, Fault::Xid { .. }) => Evidence::Never,
            None => Evidence::Present,
        },
        Fault::DoubleBitEcc | Fault::UncorrectedEcc { .. } => match g.uncorrected_volatile {
            Some(count) => gone(count == 0, "the volatile uncorrected ECC count is 0".into()),
            None if matches!(fault, Fault::DoubleBitEcc) => Evidence::Never,
            None => Evidence::Present,
        },
        Fault::RemappedRowsPending => match g.remapped {
            Some(r) => gone(!r.pending, "no row remapping is pending".into()),
            None => Evidence::Present,
        },
        Fault::RetiredPagesPending => {
            gone(g.retired_pages_pending == Some(false), "no retired page is pending".into())
        }
        Fault::NvlinkInactive { link } => {
            let active = g.nvlink_active.as_ref().and_then(|l| l.get(*link as usize)).copied();
            gone(active == Some(true), format!("NVLink {link} is active again"))
        }
        Fault::Inforom | Fault::RemappedRowsFailure | Fault::Missing { .. } | Fault::BelowExpected { .. } => {
            Evidence::Never
        }
    }
}

/// Whether anything a GPU reports can ever show `fault` ended (docs/health.md lists which).
pub fn can_clear(fault: &Fault) -> bool {
    !matches!(fault, Fault::Inforom | Fault::RemappedRowsFailure)
}

/// The judge's memory of faults going away and coming back.
#[derive(Debug, Default)]
pub struct Healing {
    /// Since when each recorded fault has read as gone, in every reading since.
    gone_since: BTreeMap<Key, Instant>,
    /// When each fault last cleared in place, and how often it has within the window.
    cleared: BTreeMap<Key, (Instant, u32)>,
}

impl Healing {
    /// Clears the faults of `tracker` that the reading `r` has shown gone for `hold`, as of
    /// `now`; returns them.
    pub fn observe(
        &mut self,
        tracker: &mut Tracker,
        r: &Reading,
        expected: Option<u32>,
        hold: Duration,
        now: Instant,
    ) -> Vec<Recovered> {
        let mut ready = Vec::new();
        let mut seen = BTreeMap::new();
        for (key, entry) in tracker.entries() {
            let recorded = &entry.recorded;
            match evidence(recorded.gpu, &recorded.fault, r, expected) {
                Evidence::Gone(words) => {
                    let since = *self.gone_since.get(key).unwrap_or(&now);
                    seen.insert(key.clone(), since);
                    if now.saturating_duration_since(since) >= hold {
                        ready.push((key.clone(), words));
                    }
                }
                Evidence::Present | Evidence::Never => {}
            }
        }
        // A fault read present again starts its hold over.
        self.gone_since = seen;
        let mut out = Vec::new();
        for (key, evidence) in ready {
            self.gone_since.remove(&key);
            let Some(entry) = tracker.remove(&key) else { continue };
            let count = match self.cleared.get(&key) {
                Some((at, n)) if now.saturating_duration_since(*at) < RECURRENCE_WINDOW => *n,
                _ => 0,
            };
            self.cleared.insert(key, (now, count + 1));
            out.push(Recovered { entry, evidence });
        }
        self.cleared.retain(|_, (at, _)| now.saturating_duration_since(*at) < RECURRENCE_WINDOW);
        out
    }

    /// How often the fault `key` cleared in place within the window before `now`: more than
    /// zero means a new fault of this key is one coming back.
    pub fn recurrences(&self, key: &Key, now: Instant) -> u32 {
        match self.cleared.get(key) {
            Some((at, n)) if now.saturating_duration_since(*at) < RECURRENCE_WINDOW => *n,
            _ => 0,
        }
    }
}

#[cfg(test)]
#[path = "recovery_tests.rs"]
mod tests;
