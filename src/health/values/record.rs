//! The record of this boot's GPU faults on the Node: what a restarted nvlabel recovers, so that
//! it forgets no fault. Versioned JSON (a [`Record`]) in the Node annotation [`ANNOTATION`],
//! written by the same server-side apply on `nodes/status` as the condition.
//!
//! Why an annotation beside the condition, and not a part of the condition: a Node condition has
//! no field for data, only a `reason` and a `message`, and the message is for people (it is what
//! `kubectl describe node` shows). Reading faults back out of that prose made every change of
//! its wording a way to forget them; JSON inside it would make it unreadable. A second condition
//! would show up in every tool that lists conditions as if it were a health signal. An
//! annotation written in the condition's own request is never out of step with it; a status write
//! keeps metadata changes, so it needs no grant beyond the condition's, and the chart's admission
//! policy lets exactly this one key change through `nodes/status`. The record is present while
//! a fault is (nvlabel's apply drops it when the GPUs are healthy again or the node rebooted).

use crate::health::values::fault::{Action, Fault};
use serde::{Deserialize, Serialize};

/// One boot of the node, by the kernel's boot id (`--boot-id-file`): faults are kept per boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootId(String);

impl BootId {
    /// The id as the kernel wrote it (and the record and the message name it).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for BootId {
    fn from(id: &str) -> BootId {
        BootId(id.to_string())
    }
}

impl std::fmt::Display for BootId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The Node annotation that holds the record.
pub const ANNOTATION: &str = "nvidia.com/gpu-health-record";
/// The record's schema version; a reader refuses any it does not know (a new schema gets a new
/// number). Version 2 gave the Xid's and the driver's own actions keys of their own
/// (`xidAction`, `driverAction`): version 1 wrote `action` twice for those faults.
pub const VERSION: u64 = 2;
/// The most faults one record keeps; the rest are counted in [`Record::omitted`] (an annotation
/// counts towards the Node's 256 KiB of annotations; a fault takes about 120 bytes).
pub const MAX_RECORDED: usize = 256;

/// The faults recorded in one boot of the node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// The schema version, [`VERSION`].
    pub version: u64,
    /// The boot the faults belong to (a new boot clears them).
    pub boot_id: String,
    /// Each fault, in the order the condition's message lists them.
    pub faults: Vec<RecordedFault>,
    /// Faults beyond [`MAX_RECORDED`], counted, not kept.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// One fault: where, what with its values (`kind` is the condition reason), and the action
/// recommended when it was recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedFault {
    /// The GPU's NVML index; absent for a fault of the node (GPUs missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<u32>,
    /// The GPU's UUID, when it was known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// The fault and its values.
    #[serde(flatten)]
    pub fault: Fault,
    /// What to do about it.
    pub action: Action,
    /// How often this fault cleared in place within the hour before it came back; absent for
    /// a fault that is not back (and in records of an nvlabel before recovery in place).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recurrences: Option<u32>,
}

/// Why an annotation is not a record this nvlabel can read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Not JSON, or not a record's shape.
    #[error("annotation {ANNOTATION} is not a GPU health record: {0}")]
    Malformed(#[source] serde_json::Error),
    /// Another schema version (a newer nvlabel's, after a downgrade).
    #[error("annotation {ANNOTATION} has record version {0}; this nvlabel reads versions 1 and {VERSION}")]
    Version(String),
}

impl Record {
    /// The record of `faults` (at most [`MAX_RECORDED`] kept) in boot `boot_id`.
    pub fn new(boot_id: &str, faults: impl ExactSizeIterator<Item = RecordedFault>) -> Record {
        let omitted = faults.len().saturating_sub(MAX_RECORDED);
        Record {
            version: VERSION,
            boot_id: boot_id.into(),
            faults: faults.take(MAX_RECORDED).collect(),
            omitted,
        }
    }

    /// The annotation's value.
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).expect("a record always serializes")
    }

    /// Reads an annotation's value; the version is checked before anything else is. Of a key
    /// written twice the last counts (as a JSON object's duplicate keys are commonly read).
    pub fn parse(text: &str) -> Result<Record, RecordError> {
        let mut value: serde_json::Value = serde_json::from_str(text).map_err(RecordError::Malformed)?;
        match value.get("version") {
            Some(v) if v.as_u64() == Some(VERSION) => {}
            Some(v) if v.as_u64() == Some(1) => upgrade_v1(&mut value),
            Some(v) => return Err(RecordError::Version(v.to_string())),
            None => return Err(RecordError::Version("(none)".into())),
        }
        serde_json::from_value(value).map_err(RecordError::Malformed)
    }
}

/// A version 1 record as version 2: an Xid's and a recovery action's fault wrote its own action
/// and the recorded one under the one key `action` (the same value, the recorded one last), so
/// that value is the fault's own action too.
fn upgrade_v1(value: &mut serde_json::Value) {
    let faults = value.get_mut("faults").and_then(serde_json::Value::as_array_mut);
    for fault in faults.into_iter().flatten() {
        let own = match fault.get("kind").and_then(serde_json::Value::as_str) {
            Some("XidCriticalError") => "xidAction",
            Some("GpuRecoveryActionRequired") => "driverAction",
            _ => continue,
        };
        if let Some(action) = fault.get("action").cloned() {
            fault[own] = action;
        }
    }
    value["version"] = VERSION.into();
}

/// Test samples: every fault kind and every action.
#[cfg(test)]
pub(crate) mod samples {
    use crate::health::values::fault::{Action, Fault};

    /// Every fault kind, with an action of its own where it has one.
    pub(crate) fn every_fault() -> Vec<Fault> {
        let mut faults = vec![
            Fault::Lost,
            Fault::Missing { nvml: 1, pci: 2 },
            Fault::BelowExpected { nvml: 2, expected: 8 },
            Fault::RemappedRowsFailure,
            Fault::DoubleBitEcc,
            Fault::UncorrectedEcc { count: 3 },
            Fault::Xid { xid: 79, mig: None, action: None, repeated: None },
            Fault::Xid { xid: 31, mig: Some((1, 2)), action: None, repeated: None },
            Fault::Inforom,
            Fault::RemappedRowsPending,
            Fault::RetiredPagesPending,
            Fault::NvlinkInactive { link: 1 },
            Fault::Recovery { action: Action::DrainAndReset, xid: Some(109) },
            Fault::Xid {
                xid: 43,
                mig: None,
                action: Some(Action::ResetGpu),
                repeated: Some(three_in_a_minute()),
            },
        ];
        for action in ALL_ACTIONS {
            faults.push(Fault::Recovery { action, xid: None });
            faults.push(Fault::Xid { xid: 48, mig: None, action: Some(action), repeated: None });
        }
        faults
    }

    /// `43:3/1m`'s threshold.
    pub(crate) fn three_in_a_minute() -> crate::health::values::fault::Threshold {
        crate::health::values::fault::Threshold { count: 3, window: std::time::Duration::from_secs(60) }
    }

    pub(crate) const ALL_ACTIONS: [Action; 8] = [
        Action::CheckWorkload,
        Action::Investigate,
        Action::DrainP2p,
        Action::ResetGpu,
        Action::DrainAndReset,
        Action::RecoverImexDomain,
        Action::Reboot,
        Action::Replace,
    ];
}

#[cfg(test)]
#[path = "record_tests.rs"]
mod tests;
