//! GPU health as a Node condition (`--health`): Xid and ECC events, row remapping, retired
//! pages, lost and missing GPUs, inactive NVLinks. In rooms, as node-problem-detector keeps its
//! problem monitors apart from its exporters: what comes in ([`reading`]: NVML's readings and
//! events, the hung-call watch, the boot id, what the Node says), the judging ([`judging`]: pure
//! decisions, readings and events in, a report out), the values both read and what health leaves
//! on the Node ([`values`]: the fault, the verdict, the record, the report), every API write
//! ([`writing`]: the condition and its record, device taints, Events) and the one-shot commands
//! ([`commands`]: `nvlabel health`, `clear`, `prune`). The [`monitor`] holds a reader, a judge
//! and the writers side by side, and the [`task`] drives it in the daemon. The judging room uses
//! neither the reading nor the writing room; the writing room uses neither the reading nor the
//! judging room (`tests/local/architecture.rs` holds both).

pub mod commands;
pub mod config;
pub mod judging;
pub mod metrics;
pub mod monitor;
pub mod reading;
pub mod task;
pub mod values;
pub mod writing;

/// Now on health's one clock: tokio's (the virtual one under test), as a std instant. Every wait,
/// window and hold of health is measured on it, so a test that moves tokio's time moves them all.
pub fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}

/// Now on the wall clock, to the second's fraction, for what health writes with a time on it
/// (the condition's transition, an Event, a retirement mark): the one place health reads it.
pub fn timestamp() -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::now()
}

/// Why health could not start.
#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    /// `--health` without Kubernetes API access.
    #[error("--health publishes a Node condition, which needs API access: use --sink=node or --use-node-feature-api with --node-name")]
    NoApi,
    /// A thread of health's could not be started.
    #[error("cannot start the {0} thread: {1}")]
    Thread(&'static str, #[source] std::io::Error),
}

impl crate::exit::Classify for HealthError {
    /// `--health` where labels do not go to the API has nowhere to write its condition.
    fn is_bad_configuration(&self) -> bool {
        match self {
            HealthError::NoApi => true,
            HealthError::Thread(..) => false,
        }
    }
}
