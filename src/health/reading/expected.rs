//! How many GPUs the node should have: the Node's `nvidia.com/gpu.expected-count` label where it
//! holds a count (so one chart serves a fleet of different machines), else
//! `--health-expected-gpus`, else no expectation.

use crate::health::config::{gpu_count, EXPECTED_COUNT_LABEL};
use crate::kubeapi::object_watch::{ObjectWatch, Seen};
use k8s_openapi::api::core::v1::Node;

/// The target of this file's log lines: the module it was before health had rooms, so no
/// line an operator reads or filters on changed with the move.
const LOG: &str = "nvlabel::health::expected";

/// The Node label, the expected count's source besides the flag (which stays in the
/// configuration and is handed in at each look).
#[derive(Default)]
pub struct Expected {
    node: Option<ObjectWatch<Node>>,
    /// The label value last warned about (one warning per bad value, not per pass).
    warned: Option<String>,
}

impl Expected {
    /// From the label of the Node `node` watches (if given).
    pub fn new(node: Option<ObjectWatch<Node>>) -> Expected {
        Expected { node, warned: None }
    }

    /// The count in force now, with `flag` (`--health-expected-gpus`) as configured now. A label
    /// that is not a count is warned about once and the flag used; while the Node is not known
    /// yet, the flag too.
    pub fn count(&mut self, flag: Option<u32>) -> Option<u32> {
        let label = self.node.as_ref().and_then(|watch| {
            watch.inspect(|seen| match seen {
                Seen::Present(node) => node.metadata.labels.as_ref()?.get(EXPECTED_COUNT_LABEL).cloned(),
                _ => None,
            })
        });
        self.with_label(label.as_deref(), flag)
    }

    fn with_label(&mut self, label: Option<&str>, flag: Option<u32>) -> Option<u32> {
        let Some(text) = label else { return flag };
        if let Some(n) = gpu_count(text) {
            return Some(n);
        }
        if self.warned.as_deref() != Some(text) {
            tracing::warn!(target: LOG, label = EXPECTED_COUNT_LABEL, value = %text, flag = %flag.map_or_else(|| "none".into(), |n| n.to_string()), "the node's expected GPU count is not a whole number from 1; using --health-expected-gpus");
            self.warned = Some(text.into());
        }
        flag
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_label_wins_where_it_is_a_count_else_the_flag() {
        let mut e = Expected::new(None);
        assert_eq!(e.count(Some(8)), Some(8), "no Node watched: the flag");
        assert_eq!(e.with_label(Some("4"), Some(8)), Some(4));
        assert_eq!(e.with_label(Some(" 2 "), Some(8)), Some(2));
        assert_eq!(e.with_label(Some("four"), Some(8)), Some(8));
        assert_eq!(e.with_label(Some("0"), Some(8)), Some(8), "0 GPUs is no expectation");
        assert_eq!(e.with_label(None, Some(8)), Some(8));
        assert_eq!(e.with_label(None, None), None, "the flag as it is now (a reload)");
        assert_eq!(e.with_label(Some("-1"), None), None);
    }
}
