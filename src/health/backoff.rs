//! How health waits after a failed API call.

use crate::kubeapi::backoff::FullJitter;
use std::time::Duration;

/// No API call before a time after a failure: the project's one full-jitter backoff
/// ([`FullJitter`]), from 1 s doubling to 5 minutes.
#[derive(Debug)]
pub struct Backoff {
    jitter: FullJitter,
    until: Option<std::time::Instant>,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff { jitter: FullJitter::new(Duration::from_secs(1), Duration::from_secs(300)), until: None }
    }
}

impl Backoff {
    /// Whether a call may go at `now`.
    pub fn ready(&self, now: std::time::Instant) -> bool {
        self.until.is_none_or(|t| now >= t)
    }

    /// A call failed at `now`: the next waits a random time in a window that doubles. Returns
    /// the wait.
    pub fn failed(&mut self, now: std::time::Instant) -> Duration {
        let wait = self.jitter.next().unwrap_or(Duration::from_secs(300));
        self.until = Some(now + wait);
        wait
    }

    /// A call succeeded.
    pub fn succeeded(&mut self) {
        *self = Backoff::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_with_jitter_up_to_a_cap_and_resets() {
        let mut b = Backoff::default();
        let t = std::time::Instant::now();
        assert!(b.ready(t));
        assert_eq!(b.jitter.window(), Duration::from_secs(1));
        let first = b.failed(t);
        assert!(first < Duration::from_secs(1), "{first:?}");
        assert!(!b.ready(t) || first.is_zero());
        assert!(b.ready(t + first));
        b.failed(t);
        assert_eq!(b.jitter.window(), Duration::from_secs(4), "the window doubles per failure");
        for _ in 0..20 {
            b.failed(t);
        }
        assert!(b.failed(t) < Duration::from_secs(300), "capped");
        b.succeeded();
        assert!(b.ready(t));
        assert_eq!(b.jitter.window(), Duration::from_secs(1), "a success starts over");
    }
}
