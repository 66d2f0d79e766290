//! Health's failed API calls in the log as the rest of nvlabel's (`kubeapi::remind`): a failure
//! said when it starts, reminded of at most once a minute while the retries go on, and said
//! resolved when a call works again. The condition and the taints retry on health's backoff
//! from 1 s, and Events with every fault, so without this a refused write would be a line every
//! few seconds.

use crate::kubeapi::remind::{Failures, Say};
use std::fmt::Display;
use std::time::Duration;

/// The target of this file's log lines: the module it was before health had rooms, so no
/// line an operator reads or filters on changed with the move.
const LOG: &str = "nvlabel::health::api_failures";

/// One kind of call: its failures and the words of its lines.
#[derive(Debug)]
pub struct Call {
    /// What failed, as the line says it ("writing the GPU health condition failed").
    failed: &'static str,
    /// What works again, as the resolved line says it.
    works: &'static str,
    failures: Failures,
}

impl Call {
    /// A call whose failure is said as `failed` and whose recovery as `works`.
    pub fn new(failed: &'static str, works: &'static str) -> Call {
        Call { failed, works, failures: Failures::default() }
    }

    /// A try failed with `error`; the next comes after `retry_in`, if it is known.
    pub fn failed(&mut self, error: &dyn Display, retry_in: Option<Duration>) {
        let failing_for_s = match self.failures.failed(error.to_string(), crate::health::now()) {
            Say::Starts => None,
            Say::Still { failing_for } => Some(failing_for.as_secs()),
            Say::Quiet => return,
        };
        let still = if failing_for_s.is_some() { "still: " } else { "" };
        // Fields only where known: no placeholder value in a log line.
        match (failing_for_s, retry_in.map(|d| d.as_millis() as u64)) {
            (None, None) => tracing::warn!(target: LOG, %error, "{still}{}", self.failed),
            (None, Some(retry_in_ms)) => {
                tracing::warn!(target: LOG, %error, retry_in_ms, "{still}{}", self.failed)
            }
            (Some(failing_for_s), None) => {
                tracing::warn!(target: LOG, %error, failing_for_s, "{still}{}", self.failed)
            }
            (Some(failing_for_s), Some(retry_in_ms)) => {
                tracing::warn!(target: LOG, %error, failing_for_s, retry_in_ms, "{still}{}", self.failed)
            }
        }
    }

    /// A try worked: the failure in force, if any, is said resolved.
    pub fn worked(&mut self) {
        if let Some(r) = self.failures.succeeded(crate::health::now()) {
            let failed_for_s = r.failed_for.as_secs();
            tracing::info!(target: LOG, last_error = %r.error, failed_for_s, "resolved: {}", self.works);
        }
    }

    /// A call's `result` said: a failure as [`Call::failed`] (no retry time), a call the API
    /// answered (`Ok(true)`) as [`Call::worked`]; one never sent (`Ok(false)`: a rate limit)
    /// says nothing either way.
    pub fn said<E: Display>(&mut self, result: Result<bool, E>) {
        match result {
            Ok(true) => self.worked(),
            Ok(false) => {}
            Err(e) => self.failed(&e, None),
        }
    }
}
