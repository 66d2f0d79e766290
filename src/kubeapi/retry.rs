//! Retrying Kubernetes API calls within one publish: conflicts, throttling, server errors and
//! connection failures are retried with the full-jitter backoff; anything else is returned at once.

use super::backoff::FullJitter;
use std::future::Future;
use std::time::Duration;

/// How hard to try within one pass (the next pass tries again anyway).
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    /// Attempts in total.
    pub attempts: u32,
    /// The first wait's upper bound.
    pub initial: Duration,
    /// The longest wait.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff { attempts: 5, initial: Duration::from_millis(200), max: Duration::from_secs(5) }
    }
}

/// Whether an API error is worth retrying: 409, 429, 5xx, timeouts and transport errors.
pub fn transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(status) => matches!(status.code, 409 | 429 | 500..=599),
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// Runs `op` until it succeeds, fails permanently, or the attempts run out.
pub async fn retry<T, F, Fut>(what: &str, backoff: Backoff, mut op: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut waits = FullJitter::new(backoff.initial, backoff.max);
    for attempt in 1.. {
        match op().await {
            Ok(v) => return Ok(v),
            Err(e) if attempt < backoff.attempts && transient(&e) => {
                let wait = waits.next().unwrap_or(backoff.max);
                // Only the outcome is worth a line (the caller logs a failure once): an outage
                // would otherwise log every attempt of every pass.
                tracing::debug!(what, attempt, error = %super::errors::Short(&e), wait_ms = wait.as_millis() as u64, "retrying");
                tokio::time::sleep(wait).await;
            }
            Err(e) => return Err(e),
        }
    }
    unreachable!("the loop returns")
}
