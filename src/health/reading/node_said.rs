//! What the Node says, as health reads it through the Node watch the daemon already holds: the
//! expected GPU count ([`Expected`]: its label, else the flag) and what it shows of health's
//! condition (a clear by hand, [`shown`]). Read at each judging and handed to the judge as a
//! [`NodeSaid`]; the judge decides what a clear asks ([`crate::health::judging::admin`]).

use crate::health::judging::admin::Shown;
use crate::health::judging::judge::NodeSaid;
use crate::health::reading::expected::Expected;
use crate::health::values::record::ANNOTATION;
use crate::health::values::verdict::CLEARED_BY_ADMIN;
use crate::kubeapi::object_watch::{ObjectWatch, Seen};
use k8s_openapi::api::core::v1::Node;

/// This Node's watch, as health reads it.
pub struct NodeReader {
    /// The watch; `None` where health has no Node to read (nothing is said then).
    watch: Option<ObjectWatch<Node>>,
    /// The expected-count label, warned about once per bad value.
    expected: Expected,
    /// Health's condition type (`--health-condition-type`), whose clears count.
    condition_type: String,
}

impl NodeReader {
    /// What the Node `watch` watches says of condition `condition_type` and the expected count.
    pub fn new(watch: Option<ObjectWatch<Node>>, condition_type: &str) -> NodeReader {
        NodeReader { expected: Expected::new(watch.clone()), watch, condition_type: condition_type.into() }
    }

    /// What the Node says now, with `flag` the `--health-expected-gpus` in force.
    pub fn said(&mut self, flag: Option<u32>) -> NodeSaid {
        let expected = self.expected.count(flag);
        NodeSaid { expected, clear: self.clear() }
    }

    /// What the Node shows of the condition now.
    pub fn clear(&self) -> Shown {
        match &self.watch {
            Some(watch) => watch.inspect(|seen| shown(seen, &self.condition_type)),
            None => Shown::Nothing,
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
    use crate::health::judging::admin::{AdminClears, Clear};
    use crate::health::values::fault::{Action, Fault};
    use crate::health::values::record::{Record, RecordedFault};
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
        let mut a = AdminClears::default();
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
        let mut a = AdminClears::default();
        let record = Record::new("b", [fault(1)].into_iter()).to_annotation();
        let seen = node(CLEARED_BY_ADMIN, "GPU 0 cleared by hand", Some(&record));
        assert_eq!(a.take(shown(&seen, "GPUHealthy")), Some(Clear { kept: vec![fault(1)] }));
        // Another type, or a condition not cleared by hand, asks nothing.
        assert_eq!(shown(&seen, "AcceleratedHardwareReady"), Shown::Nothing);
        assert_eq!(shown(&Seen::Unknown, "GPUHealthy"), Shown::Nothing);
        assert_eq!(shown(&Seen::Absent, "GPUHealthy"), Shown::Nothing);
        // A record that cannot be read drops nothing.
        let mut a = AdminClears::default();
        assert_eq!(a.take(shown(&node(CLEARED_BY_ADMIN, "x", Some("garbage")), "GPUHealthy")), None);
    }
}
