//! The one backoff: full-jitter exponential. Attempt n waits a uniform random time in
//! `[0, min(cap, base × 2^n))`. With a 10 s base, a fleet whose watches all break at once (an API
//! server restart) comes back spread evenly over 10 s, about a tenth of the fleet per second; a
//! lasting failure is retried less and less often, up to the cap. Used by the object watches, the
//! retries within a publish, the daemon's retries after a failed pass, and health's API calls
//! and NVML event listener.

use rand::Rng;
use std::time::Duration;

/// Full-jitter exponential backoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FullJitter {
    base: Duration,
    cap: Duration,
    attempt: u32,
}

impl Default for FullJitter {
    /// The watches' backoff: 10 s base, 5 minute cap.
    fn default() -> FullJitter {
        FullJitter::new(Duration::from_secs(10), Duration::from_secs(300))
    }
}

impl FullJitter {
    /// A backoff from `base` doubling up to `cap`.
    pub const fn new(base: Duration, cap: Duration) -> FullJitter {
        FullJitter { base, cap, attempt: 0 }
    }

    /// The upper bound of the next wait.
    pub fn window(&self) -> Duration {
        self.base.saturating_mul(1u32 << self.attempt.min(16)).min(self.cap)
    }

    /// Starts again from the base (after a success).
    pub fn reset(&mut self) {
        self.attempt = 0;
    }

    /// The next wait, drawn with `draw` (a number in `[0, 1)`), so tests can choose it.
    pub fn next_with(&mut self, draw: f64) -> Duration {
        let window = self.window();
        self.attempt = self.attempt.saturating_add(1);
        window.mul_f64(draw.clamp(0.0, 1.0))
    }
}

impl Iterator for FullJitter {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Some(self.next_with(rand::rng().random::<f64>()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_jitter_spreads_a_fleet_over_the_first_window_and_grows() {
        // 10,000 watchers fail together: their first retries fall in [0, 10 s), about evenly.
        let mut per_second = [0u32; 10];
        for _ in 0..10_000 {
            let d = FullJitter::default().next().unwrap();
            assert!(d < Duration::from_secs(10));
            per_second[d.as_secs() as usize] += 1;
        }
        // Evenly is 1,000 a second; the bound is loose so chance cannot fail it.
        assert!(per_second.iter().all(|n| (700..1300).contains(n)), "{per_second:?}");
        let mut b = FullJitter::default();
        let windows: Vec<Duration> = (0..8)
            .map(|_| {
                let w = b.window();
                b.next();
                w
            })
            .collect();
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
}
