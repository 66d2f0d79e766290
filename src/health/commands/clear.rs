//! `nvlabel health clear`: a person's word that a node's GPU faults, or one GPU's, are over
//! (after a GPU reset, say). It reads the Node, and writes the condition and its record under
//! nvlabel's own field manager (the instance's with `--instance`), so that `nvlabel prune` and the
//! chart's uninstall still remove everything. The whole node: the condition `True`, reason
//! [`CLEARED_BY_ADMIN`], no record. Some GPUs: their faults leave the record, and the condition
//! is worded from the faults that stay, reason [`CLEARED_BY_ADMIN`] while it says so (`True`
//! where none stays). The running daemon obeys it ([`crate::health::judging::admin`]): what the Node's record no
//! longer lists is cleared. The write is a precondition on the Node as read (its
//! resourceVersion): a fault the daemon wrote meanwhile makes it read the Node again, so nothing
//! is cleared that was not read, and printed.

use crate::exit::Classify;
use crate::health::config::HealthConfig;
use crate::health::judging::sticky::Tracker;
use crate::health::values::instance::manager_of;
use crate::health::values::record::{Record, RecordError, RecordedFault};
use crate::health::values::verdict::{Entry, Existing, Status, Verdict, CLEARED_BY_ADMIN};
use crate::health::writing::condition::NodeCondition;
use crate::kubeapi::errors::ApiFailure;
use crate::publish::ApiCall;

/// The target of this file's log lines: the module it was before health had rooms, so no
/// line an operator reads or filters on changed with the move.
const LOG: &str = "nvlabel::health::clear";

/// Every API request `nvlabel health clear` makes: one read of the Node, one status apply.
pub const API_CALLS: &[ApiCall] = &[
    ApiCall { namespaced: false, group: "", resource: "nodes", verb: "get" },
    ApiCall { namespaced: false, group: "", resource: "nodes/status", verb: "patch" },
];

/// How often the Node is read again when it changed between the read and the write.
const TRIES: u32 = 5;

/// Why the faults could not be cleared.
#[derive(Debug, thiserror::Error)]
pub enum ClearError {
    /// No `--node-name`.
    #[error("nvlabel health clear needs --node-name (or NODE_NAME): the node whose GPU faults to clear")]
    NoNode,
    /// A `--node-name` no node can have.
    #[error("--node-name {0:?} is not a node name: use a DNS subdomain (lower-case letters, digits, '-' and '.'), such as gpu-node-1")]
    NodeName(String),
    /// A `--gpu` that names no GPU.
    #[error("--gpu {0:?} is not a GPU: use its index (0, 1, ...) or its UUID (GPU-...)")]
    Gpu(String),
    /// No API client.
    #[error(transparent)]
    Client(#[from] crate::kubeapi::ClientError),
    /// The Node does not exist.
    #[error("Node {0} not found")]
    NotFound(String),
    /// The Node has no condition of this type.
    #[error("Node {node} has no {condition} condition: no GPU fault to clear (is --health-condition-type the daemon's?)")]
    NoCondition {
        /// The node.
        node: String,
        /// The condition type.
        condition: String,
    },
    /// A `--gpu` with no fault recorded.
    #[error("no GPU fault recorded on Node {node} for GPU {gpu} (recorded: {recorded})")]
    NoSuchFault {
        /// The node.
        node: String,
        /// The GPU as given.
        gpu: String,
        /// The GPUs with faults.
        recorded: String,
    },
    /// GPUs named where the Node's record cannot say which faults are theirs.
    #[error("cannot clear single GPUs on Node {node}: {why}; clear the whole node (without --gpu)")]
    NoRecord {
        /// The node.
        node: String,
        /// Why the record does not say.
        why: String,
    },
    /// Another instance's field manager wrote the health on the Node: a clear under this one
    /// could not remove its record.
    #[error("Node {node}'s GPU health is written under field manager {other}, not {ours}: {hint}, so that the clear replaces it")]
    OtherManager {
        /// The node.
        node: String,
        /// The field manager that wrote it.
        other: String,
        /// The one the clear would write under.
        ours: String,
        /// Which flags name that one.
        hint: String,
    },
    /// The Node could not be read or written (boxed: the one large variant).
    #[error(transparent)]
    Api(Box<ApiFailure>),
    /// The Node changed between every read and write.
    #[error(
        "Node {0} changed between each read and write ({TRIES} tries); nothing was cleared, run it again"
    )]
    Busy(String),
}

impl Classify for ClearError {
    /// What the command line names wrongly is a bad configuration; what the cluster answers
    /// (the Node missing, no such fault) is not.
    fn is_bad_configuration(&self) -> bool {
        match self {
            ClearError::NoNode | ClearError::NodeName(_) | ClearError::Gpu(_) => true,
            ClearError::OtherManager { .. } => true,
            ClearError::Client(e) => e.is_bad_configuration(),
            ClearError::Api(e) => e.is_bad_configuration(),
            ClearError::NotFound(_)
            | ClearError::NoCondition { .. }
            | ClearError::NoSuchFault { .. }
            | ClearError::NoRecord { .. }
            | ClearError::Busy(_) => false,
        }
    }
}

/// One GPU as `--gpu` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gpu {
    /// Its NVML index.
    Index(u32),
    /// Its UUID.
    Uuid(String),
}

impl std::fmt::Display for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Gpu::Index(i) => write!(f, "{i}"),
            Gpu::Uuid(u) => f.write_str(u),
        }
    }
}

impl Gpu {
    fn names(&self, f: &RecordedFault) -> bool {
        match self {
            Gpu::Index(i) => f.gpu == Some(*i),
            Gpu::Uuid(u) => f.uuid.as_deref() == Some(u.as_str()),
        }
    }
}

/// The GPUs `--gpu` names (repeated, or comma-separated).
pub fn gpus(values: &[String]) -> Result<Vec<Gpu>, ClearError> {
    let words = values.iter().flat_map(|v| v.split(',')).map(str::trim).filter(|w| !w.is_empty());
    words
        .map(|w| match w.parse::<u32>() {
            Ok(i) => Ok(Gpu::Index(i)),
            Err(_) if w.starts_with("GPU-") || w.starts_with("MIG-") => Ok(Gpu::Uuid(w.into())),
            Err(_) => Err(ClearError::Gpu(w.into())),
        })
        .collect()
}

/// Whether `name` can be a Node's name (a DNS subdomain).
fn node_name(name: &str) -> bool {
    let label = |l: &str| {
        (1..=63).contains(&l.len())
            && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    name.len() <= 253 && name.split('.').all(label)
}

/// What a clear does to the condition as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing to clear: why.
    Nothing(String),
    /// Write `verdict`; `cleared` are the faults it clears, as worded.
    Write {
        /// The condition and record to write.
        verdict: Verdict,
        /// The faults cleared.
        cleared: Vec<String>,
    },
}

/// What clearing `gpus` (none: the whole node) of `node`'s condition `kind`, read as `existing`,
/// writes at `at` (an RFC 3339 time).
pub fn decide(
    existing: Option<&Existing>,
    gpus: &[Gpu],
    node: &str,
    kind: &str,
    at: &str,
) -> Result<Decision, ClearError> {
    let existing =
        existing.ok_or_else(|| ClearError::NoCondition { node: node.into(), condition: kind.into() })?;
    let record = existing.record.as_deref().map(Record::parse);
    let cleared_true = |message: String| Verdict {
        status: Status::True,
        reason: CLEARED_BY_ADMIN.into(),
        message,
        record: None,
    };
    if gpus.is_empty() {
        if existing.status != Status::False && record.is_none() {
            let (status, reason) = (existing.status, &existing.reason);
            return Ok(Decision::Nothing(format!(
                "{kind} on Node {node} is {status} ({reason}): no GPU fault to clear"
            )));
        }
        let cleared = match record {
            Some(Ok(r)) => r.faults.into_iter().map(|f| Entry::new(f).text).collect(),
            _ => vec![existing.message.clone()],
        };
        return Ok(Decision::Write { verdict: cleared_true(format!("cleared by hand at {at}")), cleared });
    }
    let no_record = |why: String| ClearError::NoRecord { node: node.into(), why };
    let record = match record {
        Some(Ok(r)) => r,
        Some(Err(e @ (RecordError::Malformed(_) | RecordError::Version(_)))) => {
            return Err(no_record(e.to_string()))
        }
        None if existing.status == Status::False => {
            return Err(no_record(
                "its faults have no record (an nvlabel before the record wrote them)".into(),
            ))
        }
        None => Record::new("", std::iter::empty()),
    };
    let (gone, kept): (Vec<RecordedFault>, Vec<RecordedFault>) =
        record.faults.iter().cloned().partition(|f| gpus.iter().any(|g| g.names(f)));
    if let Some(g) = gpus.iter().find(|g| !record.faults.iter().any(|f| g.names(f))) {
        let mut recorded: Vec<String> =
            record.faults.iter().filter_map(|f| Some(who(f.gpu?, &f.uuid))).collect();
        recorded.dedup();
        let recorded = if recorded.is_empty() { "none".into() } else { recorded.join(", ") };
        return Err(ClearError::NoSuchFault { node: node.into(), gpu: g.to_string(), recorded });
    }
    let mut named: Vec<String> = gone.iter().filter_map(|f| Some(who(f.gpu?, &f.uuid))).collect();
    named.dedup();
    let cleared: Vec<String> = gone.into_iter().map(|f| Entry::new(f).text).collect();
    let by_hand = format!("{} cleared by hand at {at}", named.join(", "));
    if kept.is_empty() {
        return Ok(Decision::Write { verdict: cleared_true(by_hand), cleared });
    }
    // The faults that stay, worded and recorded as the daemon does.
    let stay = Record::new(&record.boot_id, kept.into_iter()).to_annotation();
    let on_node = Existing { record: Some(stay), ..existing.clone() };
    let v = Tracker::recover(record.boot_id.as_str(), &on_node).0.verdict();
    let verdict =
        Verdict { reason: CLEARED_BY_ADMIN.into(), message: format!("{by_hand}; {}", v.message), ..v };
    Ok(Decision::Write { verdict, cleared })
}

/// A GPU as the messages name it.
fn who(index: u32, uuid: &Option<String>) -> String {
    match uuid {
        Some(u) => format!("GPU {index} ({u})"),
        None => format!("GPU {index}"),
    }
}

/// The flags that name the instance whose field manager is `manager`.
fn instance_flags(manager: &str) -> String {
    match manager.strip_prefix("nvlabel/").and_then(|m| m.split_once('/')) {
        Some((namespace, name)) => format!("give --instance {name} --namespace {namespace}"),
        None => "give the release's --instance and --namespace".into(),
    }
}

/// What `nvlabel health clear` did, as it prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing was written: why.
    Nothing(String),
    /// The condition was written.
    Cleared {
        /// The node.
        node: String,
        /// The condition type.
        kind: String,
        /// The faults cleared, as worded.
        cleared: Vec<String>,
        /// The condition as written.
        verdict: Verdict,
    },
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Nothing(why) => writeln!(f, "nothing to clear: {why}"),
            Outcome::Cleared { node, kind, cleared, verdict } => {
                for fault in cleared {
                    writeln!(f, "cleared on Node {node}: {fault}")?;
                }
                let (status, reason, message) = (verdict.status, &verdict.reason, &verdict.message);
                writeln!(f, "{kind} on Node {node} is now {status} ({reason}): {message}")
            }
        }
    }
}

/// Clears the faults of `gpus` (none: every fault) on the node `config` names, through a client
/// `connect` makes (only once the command line is known to make sense).
pub async fn clear<F>(config: &HealthConfig, gpus: &[String], connect: F) -> Result<Outcome, ClearError>
where
    F: std::future::Future<Output = Result<kube::Client, crate::kubeapi::ClientError>>,
{
    let node = config.node.clone().ok_or(ClearError::NoNode)?;
    if !node_name(&node) {
        return Err(ClearError::NodeName(node));
    }
    let gpus = self::gpus(gpus)?;
    let client = connect.await?;
    let kind = &config.settings.condition_type;
    let manager = manager_of(config.instance.as_ref());
    let mut condition = NodeCondition::new(client, &node, kind, &manager, Default::default());
    for _ in 0..TRIES {
        let existing = condition.read().await.map_err(|e| match e.code() {
            Some(404) => ClearError::NotFound(node.clone()),
            _ => ClearError::Api(Box::new(e)),
        })?;
        if let Some(other) = condition.others().into_iter().next() {
            return Err(ClearError::OtherManager {
                node,
                hint: instance_flags(&other),
                other,
                ours: manager,
            });
        }
        let at = crate::health::timestamp();
        let at = k8s_openapi::jiff::Timestamp::from_second(at.as_second()).unwrap_or(at);
        let (verdict, cleared) = match decide(existing.as_ref(), &gpus, &node, kind, &at.to_string())? {
            Decision::Nothing(why) => return Ok(Outcome::Nothing(why)),
            Decision::Write { verdict, cleared } => (verdict, cleared),
        };
        if condition.apply_exact(&verdict).await.map_err(|e| ClearError::Api(Box::new(e)))? {
            tracing::info!(target: LOG, node = %node, manager = %manager, cleared = %cleared.join("; "), "GPU health cleared by hand");
            return Ok(Outcome::Cleared { node, kind: kind.clone(), cleared, verdict });
        }
        tracing::info!(target: LOG, node = %node, "the Node changed while it was cleared: reading it again");
    }
    Err(ClearError::Busy(node))
}

#[cfg(test)]
#[path = "clear_tests.rs"]
mod tests;
