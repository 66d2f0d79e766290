//! Retrying one Kubernetes API call (a writer's, health's, the device taints'): conflicts, throttling, server errors and
//! connection failures are retried on the one backoff ([`FullJitter`], by default waits under
//! 200 ms doubling, four of them); anything else is returned at once.

use super::backoff::FullJitter;
use std::future::Future;

/// Whether an API error is worth retrying: 409, 429, 5xx, timeouts and transport errors.
pub fn transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(status) => matches!(status.code, 409 | 429 | 500..=599),
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// Runs `op` until it succeeds, fails permanently, or `backoff` gives up (its retries spent).
pub async fn retry<T, F, Fut>(what: &str, mut backoff: FullJitter, mut op: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    for attempt in 1.. {
        let e = match op().await {
            Ok(v) => return Ok(v),
            Err(e) if transient(&e) => e,
            Err(e) => return Err(e),
        };
        let Some(wait) = backoff.next() else { return Err(e) };
        // Only the outcome is worth a line (the caller logs a failure once): an outage would
        // otherwise log every attempt of every pass.
        tracing::debug!(what, attempt, error = %super::errors::Short(&e), wait_ms = wait.as_millis() as u64, "retrying");
        tokio::time::sleep(wait).await;
    }
    unreachable!("the loop returns")
}
