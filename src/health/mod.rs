//! GPU health as a Node condition (`--health`): Xid and ECC events, row remapping, retired
//! pages, lost and missing GPUs, inactive NVLinks. Readers apart from writers, as in
//! node-problem-detector: the [`judge`] reads NVML ([`reader`]) and judges it ([`rules`] says
//! what a fault is, [`thresholds`] counts the Xids that are one when they repeat, [`sticky`]
//! keeps faults until the node reboots, [`recovery`] sees them end in place or a person clears
//! them by hand, [`admin`], with [`clear`]) into a [`report`]; the
//! [`writers`] write that report (the condition with its [`record`], device taints, Events);
//! the [`monitor`] joins the two, and the [`task`] drives it in the daemon.

pub mod action;
pub mod admin;
mod api_failures;
mod backoff;
pub mod boot;
pub mod clear;
pub mod config;
pub mod events;
pub mod expected;
pub mod instance;
pub mod judge;
pub mod metrics;
pub mod monitor;
pub mod nvml;
mod old_message;
pub mod oneshot;
pub mod outcome;
pub mod prune;
pub mod publish;
mod raw_events;
pub mod reader;
pub mod reading;
pub mod record;
pub mod recovery;
pub mod report;
pub mod rules;
pub mod signals;
pub mod sticky;
pub mod taint_api;
pub mod taint_names;
pub mod taint_spec;
pub mod taints;
pub mod task;
pub mod thresholds;
pub mod watchdog;
pub mod writers;

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
