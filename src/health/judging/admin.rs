//! A person's word on the Node, as the judge hears it: a condition cleared by hand (reason
//! [`CLEARED_BY_ADMIN`], written by `nvlabel health clear` or the status patch docs/health.md
//! shows). The daemon reads it from the Node watch it already holds, on every pass and event,
//! before it records anything new. A clear of the whole node leaves no record; a clear of some
//! GPUs leaves the record of the faults that stay. Either way the faults the Node's record no
//! longer lists are the ones cleared. Each clear is obeyed once: the judge remembers the one it
//! obeyed until the Node shows a condition that is not a clear (its own next write), so a clear
//! still on the Node while a new fault waits to be written never drops that fault. A condition
//! that is absent (nvlabel's own prune, an uninstall) is no clear and changes nothing.

use crate::health::values::record::{Record, RecordedFault, ANNOTATION};
use crate::health::values::verdict::CLEARED_BY_ADMIN;
use crate::kubeapi::object_watch::{ObjectWatch, Seen};
use k8s_openapi::api::core::v1::Node;

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

/// The clears the Node shows, and the one last obeyed.
pub struct AdminClears {
    /// What the Node shows of the condition now.
    look: Box<dyn Fn() -> Shown + Send>,
    /// The marker of the clear obeyed last, until the Node shows a condition that is no clear.
    obeyed: Option<String>,
}

impl AdminClears {
    /// The clears of condition `condition_type` on the Node `node` watches (none without).
    pub fn new(node: Option<ObjectWatch<Node>>, condition_type: &str) -> AdminClears {
        let kind = condition_type.to_string();
        AdminClears::looking(move || match &node {
            Some(watch) => watch.inspect(|seen| shown(seen, &kind)),
            None => Shown::Nothing,
        })
    }

    /// The clears `look` says the Node shows (a test's Node).
    pub fn looking(look: impl Fn() -> Shown + Send + 'static) -> AdminClears {
        AdminClears { look: Box::new(look), obeyed: None }
    }

    /// A clear the Node shows now that is not obeyed yet (it counts as obeyed from here on).
    pub fn unobeyed(&mut self) -> Option<Clear> {
        let shown = (self.look)();
        self.take(shown)
    }

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

/// What `seen` shows of the condition `condition_type`.
pub fn shown(seen: &Seen<Node>, condition_type: &str) -> Shown {
    let Seen::Present(node) = seen else { return Shown::Nothing };
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    let Some(c) = conditions.into_iter().flatten().find(|c| c.type_ == condition_type) else {
        return Shown::Nothing;
    };
    if c.reason.as_deref() != Some(CLEARED_BY_ADMIN) {
        return Shown::Other;
    }
    let record = node.metadata.annotations.as_ref().and_then(|a| a.get(ANNOTATION)).cloned();
    let message = c.message.as_deref().unwrap_or_default();
    let marker = format!("{}\n{message}\n{}", c.status, record.as_deref().unwrap_or_default());
    Shown::Clear { marker, record }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::values::fault::{Action, Fault};
    use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus};

    fn node(reason: &str, message: &str, record: Option<&str>) -> Seen<Node> {
        let mut n = Node::default();
        n.metadata.annotations = record.map(|r| [(ANNOTATION.to_string(), r.to_string())].into());
        let c = NodeCondition {
            type_: "GPUHealthy".into(),
            status: "True".into(),
            reason: Some(reason.into()),
            message: Some(message.into()),
            ..NodeCondition::default()
        };
        n.status = Some(NodeStatus { conditions: Some(vec![c]), ..NodeStatus::default() });
        Seen::Present(n)
    }

    fn fault(gpu: u32) -> RecordedFault {
        RecordedFault {
            gpu: Some(gpu),
            uuid: None,
            fault: Fault::RemappedRowsPending,
            action: Action::ResetGpu,
            recurrences: None,
        }
    }

    #[test]
    fn a_clear_is_obeyed_once_until_the_node_shows_another_condition() {
        let mut a = AdminClears::looking(|| Shown::Nothing);
        let by_hand = shown(&node(CLEARED_BY_ADMIN, "cleared by hand", None), "GPUHealthy");
        assert_eq!(a.take(by_hand.clone()), Some(Clear { kept: Vec::new() }));
        assert_eq!(a.take(by_hand.clone()), None, "obeyed already");
        assert_eq!(a.take(Shown::Nothing), None, "a removed condition is no clear");
        assert_eq!(a.take(by_hand.clone()), None, "and does not make the old clear new");
        assert_eq!(a.take(shown(&node("GpusHealthy", "2 GPUs healthy", None), "GPUHealthy")), None);
        assert_eq!(a.take(by_hand), Some(Clear { kept: Vec::new() }), "the same words again: a new clear");
    }

    #[test]
    fn a_clear_of_some_gpus_keeps_what_its_record_lists() {
        let mut a = AdminClears::looking(|| Shown::Nothing);
        let record = Record::new("b", [fault(1)].into_iter()).to_annotation();
        let seen = node(CLEARED_BY_ADMIN, "GPU 0 cleared by hand", Some(&record));
        assert_eq!(a.take(shown(&seen, "GPUHealthy")), Some(Clear { kept: vec![fault(1)] }));
        // Another type, or a condition not cleared by hand, asks nothing.
        assert_eq!(shown(&seen, "AcceleratedHardwareReady"), Shown::Nothing);
        assert_eq!(shown(&Seen::Unknown, "GPUHealthy"), Shown::Nothing);
        assert_eq!(shown(&Seen::Absent, "GPUHealthy"), Shown::Nothing);
        // A record that cannot be read drops nothing.
        let mut a = AdminClears::looking(|| Shown::Nothing);
        assert_eq!(a.take(shown(&node(CLEARED_BY_ADMIN, "x", Some("garbage")), "GPUHealthy")), None);
    }
}
