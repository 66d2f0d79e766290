//! What the judge made of one NVML event, as typed values the monitor logs: a fault, or no fault
//! and the rule that decided (NVIDIA's Xid catalog, `--health-ignore-xids`, the count of its
//! `--health-xid-thresholds`, or the driver's recovery action, read at once after the Xid). Every
//! event's judgement is said in one line; nothing here decides, the [`crate::health::judging::rules`], the
//! [`crate::health::judging::action`] catalog and the [`crate::health::judging::thresholds`] counter do.

use crate::health::judging::action::Rule;
use crate::health::judging::thresholds::Tally;
use crate::health::values::fault::Action;
use crate::health::values::fault::Found;
use crate::health::values::reading::ReadError;
use crate::health::values::reading::{Event, Reading};

/// The target of this file's log lines: the module it was before health had rooms, so no
/// line an operator reads or filters on changed with the move.
const LOG: &str = "nvlabel::health::outcome";

/// Why an event is no fault: the rule, and where its threshold's count stands if it has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoFault {
    /// What says it is none alone.
    pub rule: Rule,
    /// Its `--health-xid-thresholds` count, below the threshold; `None` without a threshold.
    pub tally: Option<Tally>,
}

impl NoFault {
    /// The rule that decided, as the log's `rule` field names it: the threshold where the Xid
    /// has one (it would be a fault at its count), else the rule that says it is none alone.
    pub fn name(&self) -> &'static str {
        match (self.tally, self.rule) {
            (Some(_), _) => "--health-xid-thresholds",
            (None, Rule::Catalog { .. }) => "xid-catalog",
            (None, Rule::IgnoreList) => "--health-ignore-xids",
            (None, Rule::Driver) => "driver",
        }
    }

    /// Says it: one `INFO` line naming the event, the rule and why.
    pub fn log(&self, event: &Event) {
        tracing::info!(target: LOG, %event, rule = self.name(), why = %self, "GPU event that is not a fault");
    }
}

impl std::fmt::Display for NoFault {
    /// `NVIDIA's Xid catalog says IGNORE; below its --health-xid-thresholds count: 1 of 3 within 1m`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.rule {
            Rule::Catalog { immediate } => write!(f, "NVIDIA's Xid catalog says {immediate}")?,
            Rule::IgnoreList => f.write_str("--health-ignore-xids lists it")?,
            Rule::Driver => f.write_str("the driver's recovery action reads none")?,
        }
        match self.tally {
            Some(t) => write!(f, "; below its --health-xid-thresholds count: {t}"),
            None => Ok(()),
        }
    }
}

/// What the judge made of an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judged {
    /// A fault: alone, or the repeat that reached its threshold.
    Fault(Found),
    /// No fault, and why.
    NotAFault(NoFault),
    /// An Xid on a GPU whose driver answers its recovery action: the action, read now, decides.
    DriverDecides(AfterXid),
}

/// An Xid after which the driver's recovery action is read at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AfterXid {
    /// The GPU.
    pub index: u32,
    /// The Xid.
    pub xid: u64,
    /// Its `--health-xid-thresholds` count, below the threshold; `None` without one.
    pub tally: Option<Tally>,
}

/// What the driver said of its recovery action in the reading after an Xid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriverSaid {
    /// A recovery action: the fault `GpuRecoveryActionRequired`.
    Asks(Action),
    /// `none`: no fault.
    Nothing,
    /// Nothing could be read: why (the next pass reads it again).
    Unread(String),
}

impl DriverSaid {
    /// What `reading` (`None`: it hangs) says of GPU `index`'s recovery action.
    pub fn of(reading: Option<&Result<Reading, ReadError>>, index: u32) -> DriverSaid {
        let r = match reading {
            None => return DriverSaid::Unread("the reading hangs in NVML".into()),
            Some(Err(e)) => return DriverSaid::Unread(format!("NVML cannot answer: {e}")),
            Some(Ok(r)) => r,
        };
        match r.gpus.iter().find(|g| g.index == index) {
            None => DriverSaid::Unread(format!("NVML no longer lists GPU {index}")),
            Some(g) if g.lost => DriverSaid::Unread("the GPU is lost (GpuLost)".into()),
            Some(g) => match g.recovery_action {
                None => DriverSaid::Unread("the driver did not answer it this time".into()),
                Some(value) => Action::from_driver(value).map_or(DriverSaid::Nothing, DriverSaid::Asks),
            },
        }
    }

    /// Says what was decided after `xid`: a fault (and whether it waits for the Node to be read:
    /// `judged` false), no fault and why, or that nothing could be decided yet.
    pub fn log(&self, event: &Event, xid: &AfterXid, judged: bool) {
        match self {
            DriverSaid::Asks(action) if judged => tracing::info!(target: LOG,
                %event,
                action = action.text(),
                "GPU event that is a fault: the driver asks for a recovery action (GpuRecoveryActionRequired)"
            ),
            DriverSaid::Asks(action) => tracing::warn!(target: LOG,
                %event,
                action = action.text(),
                "GPU event that is a fault: the driver asks for a recovery action; seen before the Node could be read, the next pass reads it again"
            ),
            DriverSaid::Nothing => NoFault { rule: Rule::Driver, tally: xid.tally }.log(event),
            DriverSaid::Unread(why) => tracing::warn!(target: LOG,
                %event,
                why = %why,
                "GPU event not judged yet: the driver's recovery action could not be read; the next pass reads it again"
            ),
        }
    }
}

#[cfg(test)]
#[path = "outcome_tests.rs"]
mod tests;
