//! A person's word on the Node, as the judge hears it: a condition cleared by hand (reason
//! [`crate::health::values::verdict::CLEARED_BY_ADMIN`], written by `nvlabel health clear` or the
//! status patch docs/health.md shows). The reading side reads it from the Node watch the daemon
//! already holds ([`crate::health::reading::node_said`]) and hands it in as a [`Shown`] on every
//! pass and event, before the judge records anything new. A clear of the whole node leaves no record; a clear of some
//! GPUs leaves the record of the faults that stay. Either way the faults the Node's record no
//! longer lists are the ones cleared. Each clear is obeyed once: the judge remembers the one it
//! obeyed until the Node shows a condition that is not a clear (its own next write), so a clear
//! still on the Node while a new fault waits to be written never drops that fault. A condition
//! that is absent (nvlabel's own prune, an uninstall) is no clear and changes nothing.

use crate::health::values::record::{Record, RecordedFault};

/// The target of this file's log lines: the module it was before health had rooms, so no
/// line an operator reads or filters on changed with the move.
const LOG: &str = "nvlabel::health::admin";

/// A clear on the Node not obeyed yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clear {
    /// The faults it leaves (those the Node's record still lists); none for the whole node.
    pub kept: Vec<RecordedFault>,
}

/// What the Node shows of the condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shown {
    /// Nothing to go by: the Node not known yet, or no such condition (removed by a prune).
    Nothing,
    /// A condition that is no clear (the daemon's own).
    Other,
    /// A clear: what tells it from another (its status, message and record), and its record.
    Clear {
        /// Status, message and record as one text: a new clear differs from the last.
        marker: String,
        /// The record annotation beside it, if any.
        record: Option<String>,
    },
}

/// The clear last obeyed, so that each clear the Node shows is obeyed once.
#[derive(Debug, Default)]
pub struct AdminClears {
    /// The marker of the clear obeyed last, until the Node shows a condition that is no clear.
    obeyed: Option<String>,
}

impl AdminClears {
    /// What `shown` asks of the judge, minding the clear obeyed last.
    pub fn take(&mut self, shown: Shown) -> Option<Clear> {
        let (marker, record) = match shown {
            Shown::Nothing => return None,
            Shown::Other => {
                self.obeyed = None;
                return None;
            }
            Shown::Clear { marker, record } => (marker, record),
        };
        if self.obeyed.as_ref() == Some(&marker) {
            return None;
        }
        self.obeyed = Some(marker);
        match record.as_deref().map(Record::parse) {
            None => Some(Clear { kept: Vec::new() }),
            Some(Ok(r)) => Some(Clear { kept: r.faults }),
            Some(Err(e)) => {
                // Which faults it leaves cannot be known: none is dropped on a guess.
                tracing::warn!(target: LOG, error = %e, "a GPU health clear by hand is not obeyed: its record cannot be read");
                None
            }
        }
    }
}
