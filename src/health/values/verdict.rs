//! The condition as health says it and as the Node shows it: its status, reason and message,
//! the reasons it can give, and each fault as the message lists it. Read by both sides.

use super::fault::Fault;
use crate::health::values::record::{Record, RecordedFault};

/// The condition nvlabel publishes, without the Kubernetes wrapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The condition's status.
    pub status: Status,
    /// CamelCase reason.
    pub reason: String,
    /// Human-readable detail.
    pub message: String,
    /// The faults for a restart to recover; `None` while there is none.
    pub record: Option<Record>,
}

/// A condition's status, as Kubernetes spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Healthy.
    True,
    /// A fault is known.
    False,
    /// Nothing can be said (NVML cannot answer, or a call hangs).
    Unknown,
}

impl Status {
    /// Kubernetes' spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::True => "True",
            Status::False => "False",
            Status::Unknown => "Unknown",
        }
    }

    /// A status as a Node reports it: anything but `True` or `False` is `Unknown`.
    pub fn parse(s: &str) -> Status {
        match s {
            "True" => Status::True,
            "False" => Status::False,
            _ => Status::Unknown,
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The condition as it is on the Node, with the record stored beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Existing {
    /// Status (anything but `True` or `False` read as `Unknown`).
    pub status: Status,
    /// Reason.
    pub reason: String,
    /// Message.
    pub message: String,
    /// The record annotation's value, if the Node has one.
    pub record: Option<String>,
}

impl Existing {
    /// What this says was published, compared with the next verdict so that only a change is
    /// written (a record that cannot be read, or is not spelled as this version writes it,
    /// counts as none, so it is rewritten).
    pub fn published(&self) -> Verdict {
        Verdict {
            status: self.status,
            reason: self.reason.clone(),
            message: self.message.clone(),
            // Only the very text nvlabel writes counts: a version 1 record (or any other
            // spelling) is rewritten at once, not at the next change.
            record: self
                .record
                .as_deref()
                .and_then(|r| Record::parse(r).ok().filter(|p| p.to_annotation() == r)),
        }
    }
}

/// Reason while every GPU is healthy.
pub const HEALTHY: &str = "GpusHealthy";
/// Reason while NVML cannot answer and no fault is known.
pub const UNAVAILABLE: &str = "NvmlUnavailable";
/// Reason while an NVML call hangs (past `--health-nvml-timeout`) and no fault is known.
pub const UNRESPONSIVE: &str = "NvmlUnresponsive";
/// Reason of a condition a person cleared (`nvlabel health clear`, or the status patch the docs
/// show): the faults its record still lists stay, every other one of the daemon's is dropped.
/// nvlabel's daemon never writes it.
pub const CLEARED_BY_ADMIN: &str = "ClearedByAdmin";

/// Orders entries by GPU, then worst fault first, and tells two faults of one kind apart (the
/// fields in that order: the derived order is the record's).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    /// The GPU's index; the node's own faults (`u32::MAX`) last.
    pub gpu: u32,
    /// The fault's rank ([`Fault::rank`]: lower is worse).
    pub rank: usize,
    /// What tells two Xids (or two links) of one GPU apart; empty for the other kinds.
    pub disc: String,
}

/// One fault: as the record keeps it, and as the message lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its fault's rank ([`Fault::rank`]: lower is worse), which orders the entries.
    pub rank: usize,
    /// The text: GPU, reason, value, action.
    pub text: String,
    /// The fault as the record keeps it.
    pub recorded: RecordedFault,
}

impl Entry {
    /// The entry of a recorded fault; its text is worded now, whatever worded it before.
    pub fn new(recorded: RecordedFault) -> Entry {
        let who = match (recorded.gpu, &recorded.uuid) {
            (Some(i), Some(u)) => format!("GPU {i} ({u})"),
            (Some(i), None) => format!("GPU {i}"),
            (None, _) => "node".into(),
        };
        let f = &recorded.fault;
        let back = match recorded.recurrences {
            Some(1) => ", back after clearing once within the hour".to_string(),
            Some(n) => format!(", back after clearing {n} times within the hour"),
            None => String::new(),
        };
        let text =
            format!("{who}: {}, {}{back}, action: {}", f.reason(), f.describe(), recorded.action.text());
        Entry { rank: f.rank(), text, recorded }
    }

    /// Where it sorts, and what makes two faults the same one.
    pub fn key(&self) -> Key {
        let fault = &self.recorded.fault;
        let disc = match fault {
            Fault::Xid { .. } | Fault::NvlinkInactive { .. } => fault.describe(),
            _ => String::new(),
        };
        Key { gpu: self.recorded.gpu.unwrap_or(u32::MAX), rank: self.rank, disc }
    }
}
