//! When the next pass comes after one that could not do its whole job: the loop's retry
//! schedule, its only state besides the timer.

use crate::kubeapi::backoff::FullJitter;
use crate::publish::FailureReason;
use std::time::Duration;

/// The shortest time between passes.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// Retries while the device source is down or publishing fails: full jitter from 2 s, doubling to 5 minutes.
const RETRY: FullJitter = FullJitter::new(Duration::from_secs(2), Duration::from_secs(300));

/// Retries after the API refused a publish: a uniform wait in `[0, 8 s)`, every time (raised to
/// [`MIN_INTERVAL`] like every wait).
const REFUSED_RETRY: FullJitter = FullJitter::new(Duration::from_secs(8), Duration::from_secs(8));

/// Failed passes in a row, and the wait before the next attempt.
pub struct Retry {
    backoff: FullJitter,
    wait: Option<Duration>,
    /// Whether the last pass found the device source down.(a publish that goes through later does not end
    /// that pass's retry schedule).
    driver_down: bool,
    /// Draws each wait within its window.
    draw: fn() -> f64,
}

impl Retry {
    /// No retry pending; waits drawn with `draw` (a number in `[0, 1)`).
    pub fn new(draw: fn() -> f64) -> Retry {
        Retry { backoff: RETRY, wait: None, driver_down: false, draw }
    }

    /// The wait before the next pass while retrying (`None`: the interval's).
    pub fn wait(&self) -> Option<Duration> {
        self.wait
    }

    /// Whether the last pass found the device source down.
    pub fn driver(&mut self, down: bool) {
        self.driver_down = down;
    }

    /// After a pass that could not do its whole job (the device source down, publish failed), the next one
    /// waits a full-jitter backoff (from 2 s, doubling to 5 minutes, never under the 1 s floor)
    /// instead of the interval; a good pass goes back to the interval.
    pub fn back_off(&mut self, failed: bool) {
        self.wait = if failed {
            Some(self.backoff.next_with((self.draw)()).max(MIN_INTERVAL))
        } else {
            self.backoff.reset();
            None
        };
    }

    /// After a publish the API refused (RBAC, a missing CRD or Node: what an operator fixes by
    /// hand), the next try comes 1 to 8 s later ([`REFUSED_RETRY`], floored at [`MIN_INTERVAL`])
    /// however long the refusal lasts, so the fix is used within seconds (a refusal is cheap for
    /// the server); any other failure backs off as [`RETRY`] says.
    pub fn publish_failed(&mut self, reason: FailureReason) {
        match reason {
            FailureReason::Refused | FailureReason::NodeMissing => {
                let mut window = REFUSED_RETRY;
                self.wait = Some(window.next_with((self.draw)()).max(MIN_INTERVAL));
            }
            _ => self.back_off(true),
        }
    }

    /// A failed publish went through outside a pass (the watched object changed, so it was tried
    /// at once): the pass's retry schedule ends with it, unless the device source failed too. Whether it ended.
    pub fn publish_recovered(&mut self) -> bool {
        if !self.driver_down {
            self.back_off(false);
        }
        !self.driver_down
    }
}
