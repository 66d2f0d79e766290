//! What counts as a GPU fault, how bad it is and what to do about it. Pure functions of what
//! NVML reported; no I/O. Faults and actions serialize as the Node's fault record stores them.

use super::config::Judging;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

pub use super::action::{Action, Rule};
pub use super::reading::{driver_answers, Event, GpuReading, Reading, Remapped};
pub use super::thresholds::Threshold;

/// One fault of one GPU. Serialized with its condition reason as `kind` and its values beside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum Fault {
    /// NVML answers `GPU_IS_LOST` for the GPU, or sent a GPU-unavailable event.
    #[serde(rename = "GpuLost")]
    Lost,
    /// Fewer GPUs through NVML than NVIDIA GPUs on the PCI bus.
    #[serde(rename = "GpuMissing")]
    Missing {
        /// GPUs NVML enumerates.
        nvml: u32,
        /// NVIDIA display-class devices on the PCI bus.
        pci: u32,
    },
    /// Fewer GPUs through NVML than the node should have (`--health-expected-gpus`, or the
    /// node's `nvidia.com/gpu.expected-count` label).
    #[serde(rename = "GpuCountBelowExpected")]
    BelowExpected {
        /// GPUs NVML enumerates.
        nvml: u32,
        /// GPUs the node should have.
        expected: u32,
    },
    /// The GPU ran out of spare rows: remapping failed.
    RemappedRowsFailure,
    /// A double-bit ECC error event.
    #[serde(rename = "DoubleBitEccError")]
    DoubleBitEcc,
    /// The volatile uncorrected ECC count is above zero.
    #[serde(rename = "UncorrectedEccErrors")]
    UncorrectedEcc {
        /// The count.
        count: u64,
    },
    /// A critical Xid event, on the GPU or on one of its MIG devices.
    #[serde(rename = "XidCriticalError")]
    Xid {
        /// The Xid number.
        xid: u64,
        /// GPU-instance and compute-instance id of the MIG device it came from.
        #[serde(default, skip_serializing_if = "Option::is_none", with = "mig_device")]
        mig: Option<(u32, u32)>,
        /// What the catalog (or the operator) says to do; a record from before the catalog has
        /// none and is read with the old rule. Its own key: the recorded fault's `action` is
        /// beside it in the record.
        #[serde(default, skip_serializing_if = "Option::is_none", rename = "xidAction")]
        action: Option<Action>,
        /// The threshold it reached (`--health-xid-thresholds`), where only its repeats made it
        /// a fault. An nvlabel without thresholds reads the fault as the Xid alone.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        repeated: Option<Threshold>,
    },
    /// The driver says the GPU needs a recovery action (NVML field 230).
    #[serde(rename = "GpuRecoveryActionRequired")]
    Recovery {
        /// The driver's action (its own key, as the Xid's).
        #[serde(rename = "driverAction")]
        action: Action,
        /// The Xid after which the driver was asked and first said so, where one was (a pass's
        /// reading alone knows of none). An nvlabel without the key reads the fault without it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        xid: Option<u64>,
    },
    /// The GPU's InfoROM (its configuration and error-record store) fails its checksum.
    #[serde(rename = "InforomCorrupted")]
    Inforom,
    /// A row remapping waits for a GPU reset.
    RemappedRowsPending,
    /// Retired pages wait for a GPU reset or reboot.
    RetiredPagesPending,
    /// An NVLink link that was active is not any more.
    NvlinkInactive {
        /// The link number.
        link: u32,
    },
}

/// A MIG device's ids as the record names them (a pair would be a bare array there).
mod mig_device {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Mig {
        gpu_instance: u32,
        compute_instance: u32,
    }

    pub fn serialize<S: Serializer>(mig: &Option<(u32, u32)>, s: S) -> Result<S::Ok, S::Error> {
        mig.map(|(gpu_instance, compute_instance)| Mig { gpu_instance, compute_instance }).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<(u32, u32)>, D::Error> {
        Ok(Option::<Mig>::deserialize(d)?.map(|m| (m.gpu_instance, m.compute_instance)))
    }
}

impl Fault {
    /// The CamelCase condition reason (the record's `kind` too).
    pub fn reason(&self) -> &'static str {
        match self {
            Fault::Lost => "GpuLost",
            Fault::Missing { .. } => "GpuMissing",
            Fault::BelowExpected { .. } => "GpuCountBelowExpected",
            Fault::Recovery { .. } => "GpuRecoveryActionRequired",
            Fault::Inforom => "InforomCorrupted",
            Fault::RemappedRowsFailure => "RemappedRowsFailure",
            Fault::DoubleBitEcc => "DoubleBitEccError",
            Fault::UncorrectedEcc { .. } => "UncorrectedEccErrors",
            Fault::Xid { .. } => "XidCriticalError",
            Fault::RemappedRowsPending => "RemappedRowsPending",
            Fault::RetiredPagesPending => "RetiredPagesPending",
            Fault::NvlinkInactive { .. } => "NvlinkInactive",
        }
    }

    /// How bad it is when faults are combined: lower is worse (the worst names the condition's
    /// reason).
    pub fn rank(&self) -> usize {
        match self {
            Fault::Lost => 0,
            Fault::Missing { .. } => 1,
            Fault::BelowExpected { .. } => 2,
            Fault::Recovery { .. } => 3,
            Fault::Inforom => 4,
            Fault::RemappedRowsFailure => 5,
            Fault::DoubleBitEcc => 6,
            Fault::UncorrectedEcc { .. } => 7,
            Fault::Xid { .. } => 8,
            Fault::RemappedRowsPending => 9,
            Fault::RetiredPagesPending => 10,
            Fault::NvlinkInactive { .. } => 11,
        }
    }

    /// The recommended action.
    pub fn action(&self) -> Action {
        match self {
            Fault::Lost | Fault::Missing { .. } | Fault::BelowExpected { .. } => Action::Reboot,
            // The store of the GPU's settings and error records is damaged: NVIDIA replaces
            // (or reflashes) it; nothing on the node repairs it.
            Fault::RemappedRowsFailure | Fault::Inforom => Action::Replace,
            Fault::Recovery { action, .. } | Fault::Xid { action: Some(action), .. } => *action,
            // A record from before the catalog: the rule of its time (the device plugin's
            // application Xids were only faults by the operator's choice).
            Fault::Xid { xid: 13 | 31 | 43 | 45 | 68 | 109, .. } => Action::CheckWorkload,
            // 79: fallen off the bus; 95: uncontained ECC error; 119/120: GSP firmware stuck.
            Fault::Xid { xid: 79 | 95 | 119 | 120, .. } => Action::Reboot,
            Fault::Xid { .. }
            | Fault::DoubleBitEcc
            | Fault::UncorrectedEcc { .. }
            | Fault::RemappedRowsPending
            | Fault::RetiredPagesPending
            | Fault::NvlinkInactive { .. } => Action::ResetGpu,
        }
    }

    /// What happened, with its value, as the message says it.
    pub fn describe(&self) -> String {
        match self {
            Fault::Lost => "GPU is lost".into(),
            Fault::Missing { nvml, pci } => {
                format!("NVML sees {nvml} GPUs, the PCI bus has {pci}")
            }
            Fault::BelowExpected { nvml, expected } => {
                format!("NVML sees {nvml} GPUs, the node should have {expected}")
            }
            Fault::RemappedRowsFailure => "row remapping failed".into(),
            Fault::DoubleBitEcc => "double-bit ECC error".into(),
            Fault::UncorrectedEcc { count } => format!("{count} uncorrected ECC errors since reset"),
            Fault::Xid { xid, repeated: Some(t), .. } => format!("Xid {xid} {t}"),
            Fault::Xid { xid, mig: None, .. } => format!("Xid {xid}"),
            Fault::Xid { xid, mig: Some((gi, ci)), .. } => {
                format!("Xid {xid} on MIG device GI {gi} CI {ci}")
            }
            Fault::Recovery { xid: None, .. } => "the driver asks for a recovery action".into(),
            Fault::Recovery { xid: Some(xid), .. } => {
                format!("the driver asks for a recovery action after Xid {xid}")
            }
            Fault::Inforom => "the InfoROM is corrupted".into(),
            Fault::RemappedRowsPending => "row remapping pending".into(),
            Fault::RetiredPagesPending => "page retirement pending".into(),
            Fault::NvlinkInactive { link } => format!("NVLink {link} went inactive"),
        }
    }
}

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

/// A fault of a GPU (by index), or of the node (`None`: GPUs missing).
pub type Found = (Option<u32>, Fault);

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
            let mut add = |f: Fault| out.push((Some(gpu.index), f));
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
            out.push((None, Fault::Missing { nvml, pci }));
        }
        if let Some(expected) = self.expected.filter(|e| nvml < *e) {
            out.push((None, Fault::BelowExpected { nvml, expected }));
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
                let a = super::action::xid_verdict(xid, ignored, fatal)?;
                Ok((Some(index), Fault::Xid { xid, mig, action: Some(a), repeated: None }))
            }
            Event::DoubleBitEcc { index } => Ok((Some(index), Fault::DoubleBitEcc)),
            Event::Lost { index } => Ok((Some(index), Fault::Lost)),
        }
    }
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
