//! What the judge hands the writers: a plain value, as node-problem-detector's problem monitors
//! hand its exporters a status. The [`crate::health::judging::judge`] makes it from NVML's readings and events,
//! the rules and the sticky record; the [`crate::health::writing`] each write their part of it (the
//! condition and its record, device taints, Events) and never read NVML.

use crate::health::values::verdict::{Entry, Verdict};
use std::collections::BTreeMap;

/// One pass's, one event's or one reboot's findings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The faults of an earlier boot that a reboot cleared.
    pub cleared: Option<Cleared>,
    /// The condition (and its record) the Node should show; `None` where none is to be written
    /// now (the record is not known yet, or only the devices changed).
    pub verdict: Option<Verdict>,
    /// Each faulty GPU's UUID with its worst fault's reason, what its device taints say; `None`
    /// while the record is not known (a taint is then neither written nor removed).
    pub faulty: Option<BTreeMap<String, &'static str>>,
    /// The faults recorded for the first time.
    pub new_faults: Vec<Entry>,
    /// The faults that cleared in place, with their evidence.
    pub recovered: Vec<Recovered>,
    /// A clear by hand on the Node, obeyed now (the Node then shows what a person wrote, not
    /// what was last written); `None` where there was none.
    pub admin: Option<AdminCleared>,
    /// The warning episodes that began.
    pub warnings: Vec<Warning>,
    /// Another writer's change of the condition, written back over now.
    pub overwritten: Option<Overwrite>,
}

/// A reboot cleared the faults recorded in the boot before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cleared {
    /// The boot the node is in now.
    pub boot_id: crate::health::values::record::BootId,
    /// The faults cleared, as they were worded.
    pub faults: Vec<String>,
}

/// A person cleared faults by hand on the Node, and the judge obeyed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdminCleared {
    /// The faults dropped (none where the judge held none of those cleared).
    pub faults: Vec<Entry>,
}

/// A warning episode (a slowdown, PCIe replays) that began on a GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The GPU's index.
    pub index: u32,
    /// Its UUID, where NVML has told it.
    pub uuid: Option<String>,
    /// What began.
    pub signal: Signal,
    /// What happened and what to check.
    pub detail: String,
}

impl Warning {
    /// The GPU as the Event names it.
    pub fn gpu(&self) -> String {
        match &self.uuid {
            Some(uuid) => format!("GPU {} ({uuid})", self.index),
            None => format!("GPU {}", self.index),
        }
    }

    /// The Event's message: the GPU, the reason and the detail.
    pub fn text(&self) -> String {
        format!("{}: {}, {}", self.gpu(), self.signal.reason(), self.detail)
    }
}

/// The condition as another writer left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overwrite {
    /// The field managers that wrote its status or reason, comma-separated.
    pub by: String,
    /// The status the Node shows.
    pub status: String,
    /// The reason the Node shows.
    pub reason: String,
}

/// A fault cleared in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// The fault as it was recorded.
    pub entry: Entry,
    /// What showed it gone.
    pub evidence: String,
}

impl Recovered {
    /// The Event's and the log's words: the GPU, the fault and the evidence.
    pub fn text(&self) -> String {
        format!("{} cleared: {}", self.entry.text, self.evidence)
    }
}

/// A warning signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Signal {
    /// The hardware slows the clocks to cool the GPU.
    ThermalSlowdown,
    /// The system's power brake (an external signal) slows the clocks.
    PowerBrakeSlowdown,
    /// PCIe replays grow by more than [`crate::health::judging::signals::REPLAYS_PER_MINUTE`] a minute.
    PcieReplays,
}

impl Signal {
    /// The Event's reason.
    pub fn reason(self) -> &'static str {
        match self {
            Signal::ThermalSlowdown => "GpuThermalSlowdown",
            Signal::PowerBrakeSlowdown => "GpuPowerBrakeSlowdown",
            Signal::PcieReplays => "GpuPcieReplays",
        }
    }

    /// What an operator checks.
    pub fn advice(self) -> &'static str {
        match self {
            Signal::ThermalSlowdown => {
                "the GPU cuts its clocks to cool down; check the node's cooling (fans, airflow, inlet temperature)"
            }
            Signal::PowerBrakeSlowdown => {
                "the system's power brake cuts the GPU's clocks; check the node's power supplies and power capping"
            }
            Signal::PcieReplays => {
                "the PCIe link retries transfers; check the GPU's seating, riser and cabling, and watch for Xids"
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_names_its_gpu_by_uuid_where_known() {
        let w = Warning {
            index: 1,
            uuid: None,
            signal: Signal::ThermalSlowdown,
            detail: "the clocks are held down".into(),
        };
        assert_eq!(w.text(), "GPU 1: GpuThermalSlowdown, the clocks are held down");
        let w = Warning { uuid: Some("GPU-b".into()), ..w };
        assert_eq!(w.text(), "GPU 1 (GPU-b): GpuThermalSlowdown, the clocks are held down");
    }
}
