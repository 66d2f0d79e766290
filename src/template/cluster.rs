//! `--from-cluster`: a pool's template learnt from the nodes it already has, so a pool that scaled
//! to zero after its first nodes keeps a true template. Read-only: one list of Nodes. A pool is
//! the nodes that share a value of `--pool-label`; its template holds each `nvidia.com/` label and
//! extended resource every node of it agrees on (less what only a running node knows), and names
//! each key whose value differs between its nodes, with the nodes on each side.

use super::{LeftOut, Template, RUN_TIME};
use crate::kubeapi::backoff::FullJitter;
use crate::kubeapi::retry::retry;
use k8s_openapi::api::core::v1::Node;
use std::collections::BTreeMap;

/// The label prefix of what nvlabel (and the device plugin) publish.
const OURS: &str = "nvidia.com/";
/// Nodes listed per request.
const PAGE: u32 = 500;
/// `nvidia.com/` labels that are another component's progress on one node, never a pool's: the
/// GPU Operator's operand switches (moved off `true` during a driver upgrade or a MIG change),
/// the MIG manager's state and the driver upgrade controller's. A node created with them would
/// start life claiming work done that was never done on it.
const NODE_STATE: &[&str] =
    &["nvidia.com/gpu.deploy.", "nvidia.com/mig.config.state", "nvidia.com/gpu-driver-upgrade"];
/// Why a [`NODE_STATE`] label is left out.
const NODE_STATE_WHY: &str =
    "another component's progress on each node (the GPU Operator's), which a new node has not made";
/// How often a list whose continue token expired starts again before it fails.
const RESTARTS: u32 = 3;

/// One pool as its nodes show it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pool {
    /// The labels every node of the pool has with one value.
    pub labels: BTreeMap<String, String>,
    /// The extended resources every node advertises with one quantity.
    pub capacity: BTreeMap<String, u64>,
    /// The keys (labels, and resources as `capacity/<name>`) whose values differ, left out.
    pub disagreements: Vec<Disagreement>,
    /// The pool's nodes, sorted.
    pub nodes: Vec<String>,
    /// The label keys of another component's per-node progress its nodes carry, left out.
    pub node_state: Vec<String>,
}

impl Pool {
    /// The pool's template: what its nodes agree on, each disagreement said in `left_out`. A pool
    /// whose nodes advertise no `nvidia.com/` resource but are labelled is a DRA pool.
    pub fn template(&self) -> Template {
        let state = self.node_state.iter().map(|k| LeftOut { key: k.clone(), why: NODE_STATE_WHY.into() });
        let left_out = self
            .disagreements
            .iter()
            .map(|d| LeftOut { key: d.key.clone(), why: d.why() })
            .chain(state)
            .collect();
        let dra = self.capacity.is_empty() && self.labels.contains_key("nvidia.com/gpu.count");
        let (labels, capacity) = (self.labels.clone(), self.capacity.clone());
        Template { labels, capacity, dra, left_out, warnings: Vec::new(), node: None }
    }
}

/// A key whose value differs between the nodes of one pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disagreement {
    /// The label key, or `capacity/<resource>`.
    pub key: String,
    /// Each value, `(none)` where a node lacks the key, with the nodes that have it.
    pub values: BTreeMap<String, Vec<String>>,
}

impl Disagreement {
    /// Why the key is left out: each value with its nodes.
    fn why(&self) -> String {
        let sides: Vec<String> =
            self.values.iter().map(|(v, nodes)| format!("{v:?} on {}", nodes.join(", "))).collect();
        format!("the pool's nodes disagree: {}", sides.join("; "))
    }
}

/// Why the nodes could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The list failed.
    #[error("cannot list the nodes with label {label}: {source}")]
    List {
        /// `--pool-label`.
        label: String,
        /// The API's error.
        source: kube::Error,
    },
}

impl crate::exit::Classify for ClusterError {
    /// The API's answer, not the command line: a 403 is a missing RBAC rule of the cluster's.
    fn is_bad_configuration(&self) -> bool {
        false
    }
}

/// Every Node that carries `pool_label`, page by page. Each page is one request under the
/// client's deadline and body limit, retried on the one backoff when the API fails for a while
/// (a 5xx, 429, a dropped connection); a page whose continue token expired (410: etcd compacted
/// the revision the list began at) starts the list again, `RESTARTS` times at most, so the
/// pools are always read from one consistent list.
pub async fn list(client: kube::Client, pool_label: &str) -> Result<Vec<Node>, ClusterError> {
    let api: kube::Api<Node> = kube::Api::all(client);
    let fail = |source| ClusterError::List { label: pool_label.to_string(), source };
    let mut restarts = 0;
    'list: loop {
        let mut params = kube::api::ListParams::default().labels(pool_label).limit(PAGE);
        let mut nodes = Vec::new();
        loop {
            let page = match retry("listing the nodes", FullJitter::default(), || api.list(&params)).await {
                Ok(page) => page,
                Err(kube::Error::Api(s))
                    if s.code == 410 && params.continue_token.is_some() && restarts < RESTARTS =>
                {
                    restarts += 1;
                    tracing::debug!(restarts, "the node list's continue token expired; listing again");
                    continue 'list;
                }
                Err(e) => return Err(fail(e)),
            };
            nodes.extend(page.items);
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => return Ok(nodes),
            }
        }
    }
}

/// The pools of `nodes` by their value of `pool_label`.
pub fn pools(nodes: &[Node], pool_label: &str) -> BTreeMap<String, Pool> {
    let mut members: BTreeMap<String, Vec<&Node>> = BTreeMap::new();
    for node in nodes {
        if let Some(pool) = node.metadata.labels.as_ref().and_then(|l| l.get(pool_label)) {
            members.entry(pool.clone()).or_default().push(node);
        }
    }
    members.into_iter().map(|(name, nodes)| (name, pool(&nodes))).collect()
}

/// What `nodes` agree on.
fn pool(nodes: &[&Node]) -> Pool {
    let name = |n: &Node| n.metadata.name.clone().unwrap_or_default();
    let mut by_key: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    let mut node_state = std::collections::BTreeSet::new();
    for node in nodes {
        for (k, v) in facts(node) {
            if NODE_STATE.iter().any(|p| k.starts_with(p)) {
                node_state.insert(k);
                continue;
            }
            by_key.entry(k).or_default().entry(v).or_default().push(name(node));
        }
    }
    let mut out = Pool {
        nodes: nodes.iter().map(|n| name(n)).collect(),
        node_state: node_state.into_iter().collect(),
        ..Pool::default()
    };
    out.nodes.sort();
    for (key, mut values) in by_key {
        let having: usize = values.values().map(Vec::len).sum();
        if values.len() == 1 && having == nodes.len() {
            let value = values.into_keys().next().expect("one value");
            match key.strip_prefix("capacity/") {
                Some(resource) => {
                    out.capacity.insert(resource.to_string(), value.parse().unwrap_or_default());
                }
                None => {
                    out.labels.insert(key, value);
                }
            }
            continue;
        }
        let lacking: Vec<String> =
            out.nodes.iter().filter(|n| !values.values().flatten().any(|m| m == *n)).cloned().collect();
        if !lacking.is_empty() {
            values.insert("(none)".into(), lacking);
        }
        values.values_mut().for_each(|nodes| nodes.sort());
        out.disagreements.push(Disagreement { key, values });
    }
    out
}

/// A node's `nvidia.com/` labels (less the run-time ones) and extended resources.
fn facts(node: &Node) -> Vec<(String, String)> {
    let labels = node.metadata.labels.iter().flatten();
    let ours = labels
        .filter(|(k, _)| k.starts_with(OURS) && !RUN_TIME.iter().any(|(r, _)| r == k))
        .map(|(k, v)| (k.clone(), v.clone()));
    let capacity = node.status.iter().flat_map(|s| s.capacity.iter().flatten());
    let resources =
        capacity.filter(|(k, _)| k.starts_with(OURS)).map(|(k, q)| (format!("capacity/{k}"), q.0.clone()));
    ours.chain(resources).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeStatus;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn node(name: &str, labels: &[(&str, &str)], gpus: &str) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.metadata.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
        let capacity =
            [("nvidia.com/gpu".to_string(), Quantity(gpus.into())), ("cpu".into(), Quantity("8".into()))];
        n.status = Some(NodeStatus { capacity: Some(capacity.into_iter().collect()), ..Default::default() });
        n
    }

    #[test]
    fn two_pools_and_the_key_their_nodes_disagree_on() {
        let pool = "karpenter.sh/nodepool";
        let nodes = [
            node(
                "a-1",
                &[
                    (pool, "a"),
                    ("nvidia.com/gpu.product", "Tesla-T4"),
                    ("nvidia.com/gfd.timestamp", "1"),
                    ("nvidia.com/mps.capable", "false"),
                ],
                "1",
            ),
            node(
                "a-2",
                &[(pool, "a"), ("nvidia.com/gpu.product", "Tesla-T4"), ("nvidia.com/gfd.timestamp", "2")],
                "1",
            ),
            node(
                "b-1",
                &[
                    (pool, "b"),
                    ("nvidia.com/gpu.product", "NVIDIA-L4"),
                    ("nvidia.com/cuda.driver.major", "550"),
                ],
                "4",
            ),
            node(
                "b-2",
                &[
                    (pool, "b"),
                    ("nvidia.com/gpu.product", "NVIDIA-L4"),
                    ("nvidia.com/cuda.driver.major", "535"),
                ],
                "4",
            ),
            node(
                "b-3",
                &[
                    (pool, "b"),
                    ("nvidia.com/gpu.product", "NVIDIA-L4"),
                    ("nvidia.com/gpu.deploy.driver", "paused-for-driver-upgrade"),
                    ("nvidia.com/mig.config.state", "success"),
                ],
                "4",
            ),
            node("other", &[("nvidia.com/gpu.product", "NVIDIA-H100")], "8"),
        ];
        let pools = pools(&nodes, pool);
        assert_eq!(pools.keys().collect::<Vec<_>>(), ["a", "b"]);
        let a = pools["a"].template();
        assert_eq!(
            a.labels,
            BTreeMap::from([("nvidia.com/gpu.product".to_string(), "Tesla-T4".to_string())])
        );
        assert_eq!(a.capacity, BTreeMap::from([("nvidia.com/gpu".to_string(), 1)]));
        // One value, but on one node of two: left out, never taken for the pool's.
        let keys: Vec<&str> = a.left_out.iter().map(|l| l.key.as_str()).collect();
        assert_eq!(keys, ["nvidia.com/mps.capable"], "the timestamp is a run-time key, never a disagreement");
        assert_eq!(pools["a"].disagreements[0].values["(none)"], ["a-2"]);
        let b = &pools["b"];
        assert_eq!(b.labels.len(), 1, "{:?}", b.labels);
        assert_eq!(b.capacity["nvidia.com/gpu"], 4);
        let d = &b.disagreements[0];
        assert_eq!(d.key, "nvidia.com/cuda.driver.major");
        assert_eq!(d.values["550"], ["b-1"]);
        assert_eq!(d.values["535"], ["b-2"]);
        assert_eq!(d.values["(none)"], ["b-3"]);
        let left_out = b.template().left_out;
        assert!(left_out[0].why.contains("\"535\" on b-2"), "{left_out:?}");
        let state: Vec<&str> = left_out[1..].iter().map(|l| l.key.as_str()).collect();
        assert_eq!(
            state,
            ["nvidia.com/gpu.deploy.driver", "nvidia.com/mig.config.state"],
            "node state, named"
        );
        assert!(left_out[1].why.contains("GPU Operator"), "{left_out:?}");
    }
}
