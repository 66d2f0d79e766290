//! The one backoff: full-jitter exponential. Wait n is a uniform random time in
//! `[0, min(cap, base × 2^n))`, so many nodes that fail together (an API server restart) come
//! back spread over the first window, and a lasting failure is tried less and less often, up to
//! the cap. Each user gives its own base and cap: the watches' relists `[0, 8 s)` every time (a
//! window that never grows, `list_watch.rs`), the retries within one API call (the
//! [`Default`], given up after four), the daemon's passes after a failure and its retries after
//! a refused publish, a slice list the API refuses, health's API calls and its NVML event
//! listener. A backoff may also hold calls back until its wait is over
//! ([`FullJitter::failed`], [`FullJitter::ready`]), for a caller that is asked again before then.

use rand::Rng;
use std::time::{Duration, Instant};

/// Full-jitter exponential backoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FullJitter {
    base: Duration,
    cap: Duration,
    attempt: u32,
    /// The waits [`Iterator::next`] gives before it ends (`None`: it never ends).
    retries: Option<u32>,
    /// No call before this time (the wait [`FullJitter::failed`] drew).
    hold: Option<Instant>,
}

impl Default for FullJitter {
    /// The retries within one API call ([`super::retry::retry`]): waits under 200 ms, 400 ms,
    /// 800 ms and 1.6 s (3 s at most together), then it gives up: five attempts in all.
    fn default() -> FullJitter {
        FullJitter::new(Duration::from_millis(200), Duration::from_secs(5)).retries(4)
    }
}

impl FullJitter {
    /// A backoff from `base` doubling up to `cap`, never giving up.
    pub const fn new(base: Duration, cap: Duration) -> FullJitter {
        FullJitter { base, cap, attempt: 0, retries: None, hold: None }
    }

    /// This backoff giving up after `n` waits (`n + 1` attempts): [`Iterator::next`] ends there.
    pub const fn retries(mut self, n: u32) -> FullJitter {
        self.retries = Some(n);
        self
    }

    /// The upper bound of the next wait.
    pub fn window(&self) -> Duration {
        self.base.saturating_mul(1u32 << self.attempt.min(16)).min(self.cap)
    }

    /// Starts again from the base, holding nothing back (after a success).
    pub fn reset(&mut self) {
        self.attempt = 0;
        self.hold = None;
    }

    /// The next wait, drawn with `draw` (a number in `[0, 1)`), so tests can choose it; never
    /// gives up (a watch or a loop that must go on).
    pub fn next_with(&mut self, draw: f64) -> Duration {
        let window = self.window();
        self.attempt = self.attempt.saturating_add(1);
        window.mul_f64(draw.clamp(0.0, 1.0))
    }

    /// Whether a call may go at `now`: the wait drawn by the last [`FullJitter::failed`] is over.
    pub fn ready(&self, now: Instant) -> bool {
        self.hold.is_none_or(|t| now >= t)
    }

    /// A call failed at `now`: holds calls back for the next wait, drawn at random; returns it.
    pub fn failed(&mut self, now: Instant) -> Duration {
        self.failed_with(now, rand::rng().random::<f64>())
    }

    /// [`FullJitter::failed`] with the wait drawn with `draw` (a number in `[0, 1)`); a caller on
    /// tokio's clock passes its `Instant::into_std()`.
    pub fn failed_with(&mut self, now: Instant, draw: f64) -> Duration {
        let wait = self.next_with(draw);
        self.hold = Some(now + wait);
        wait
    }
}

impl Iterator for FullJitter {
    type Item = Duration;

    /// The next wait, drawn at random; `None` once the retries given are spent.
    fn next(&mut self) -> Option<Duration> {
        if self.retries.is_some_and(|n| self.attempt >= n) {
            return None;
        }
        Some(self.next_with(rand::rng().random::<f64>()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_doubles_up_to_the_cap_and_starts_over() {
        let mut b = FullJitter::new(Duration::from_secs(10), Duration::from_secs(300));
        let windows: Vec<Duration> = (0..8)
            .map(|_| {
                let w = b.window();
                let wait = b.next().unwrap();
                assert!(wait < w, "{wait:?} within {w:?}");
                w
            })
            .collect();
        assert_eq!(windows[0], Duration::from_secs(10));
        assert_eq!(windows[1], Duration::from_secs(20));
        assert_eq!(windows[7], Duration::from_secs(300), "capped at 5 minutes");
        b.reset();
        assert_eq!(b.window(), Duration::from_secs(10));
    }

    #[test]
    fn the_largest_draw_reaches_the_cap_and_never_passes_it() {
        let mut b = FullJitter::new(Duration::from_secs(1), Duration::from_secs(120));
        let waits: Vec<u64> = (0..10).map(|_| b.next_with(1.0).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 120, 120, 120]);
    }

    #[test]
    fn the_default_retries_four_times_within_three_seconds_then_gives_up() {
        let mut b = FullJitter::default();
        let windows: Vec<Duration> = std::iter::from_fn(|| {
            let w = b.window();
            b.next().map(|_| w)
        })
        .collect();
        let ms: Vec<u128> = windows.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, [200, 400, 800, 1600], "four waits, then none");
        assert!(b.next().is_none(), "spent stays spent");
        b.reset();
        assert!(b.next().is_some(), "a success gives the retries back");
        let mut never = FullJitter::new(Duration::ZERO, Duration::ZERO).retries(0);
        assert_eq!(never.next(), None, "one attempt, no retry");
    }

    #[test]
    fn a_failure_holds_calls_back_for_a_wait_that_grows_until_a_success() {
        let mut b = FullJitter::new(Duration::from_secs(1), Duration::from_secs(300));
        let t = Instant::now();
        assert!(b.ready(t));
        let first = b.failed(t);
        assert!(first < Duration::from_secs(1), "{first:?}");
        assert!(!b.ready(t) || first.is_zero());
        assert!(b.ready(t + first));
        b.failed(t);
        assert_eq!(b.window(), Duration::from_secs(4), "the window doubles per failure");
        for _ in 0..20 {
            b.failed(t);
        }
        assert!(b.failed(t) < Duration::from_secs(300), "capped");
        assert_eq!(b.failed_with(t, 1.0), Duration::from_secs(300));
        assert!(!b.ready(t + Duration::from_secs(299)) && b.ready(t + Duration::from_secs(300)));
        b.reset();
        assert!(b.ready(t), "a success holds nothing back");
        assert_eq!(b.window(), Duration::from_secs(1), "and starts over");
    }
}
