//! How often drift is repaired: the labels, and health's condition. A label someone removed is put back within a second, but a fight
//! with another writer (it changes the label back every time) must not become a hot loop: after
//! five repairs within a minute, repairs slow to one a minute, and the fight is logged and counted
//! once, its end logged once. The fight ends only when the other writer leaves the labels alone
//! for a full minute after a repair; the minute nvlabel itself waits before repairing does not
//! count as quiet.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The least time between two repairs.
const MIN_GAP: Duration = Duration::from_secs(1);
/// Repairs within [`WINDOW`] that make a fight.
const FIGHT_REPAIRS: usize = 5;
/// The window repairs are counted in, the gap between repairs during a fight, and the quiet time
/// that ends one.
const WINDOW: Duration = Duration::from_secs(60);

/// Recent repairs.
#[derive(Debug, Default)]
pub struct DriftGuard {
    repairs: VecDeque<Instant>,
    fighting: bool,
    /// A fight ended and nobody was told yet.
    ended: bool,
}

impl DriftGuard {
    /// Drift was seen at `now`: when the repair may run.
    pub fn drift_seen(&mut self, now: Instant) -> Instant {
        let Some(&last) = self.repairs.back() else { return now };
        if self.fighting && now.duration_since(last) >= WINDOW {
            // Left alone for a minute after our last repair: the fight is over.
            self.fighting = false;
            self.ended = true;
            self.repairs.clear();
            return now;
        }
        let gap = if self.fighting { WINDOW } else { MIN_GAP };
        (last + gap).max(now)
    }

    /// Records a repair at `now`; returns true when it starts a fight (log and count it once).
    pub fn repaired(&mut self, now: Instant) -> bool {
        self.repairs.push_back(now);
        while self.repairs.front().is_some_and(|t| now.duration_since(*t) >= WINDOW) {
            self.repairs.pop_front();
        }
        let started = !self.fighting && self.repairs.len() >= FIGHT_REPAIRS;
        self.fighting |= started;
        started
    }

    /// Whether a fight is going on.
    pub fn fighting(&self) -> bool {
        self.fighting
    }

    /// Whether a fight ended since the last call (log it once).
    pub fn take_ended(&mut self) -> bool {
        std::mem::take(&mut self.ended)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The other writer reverts `after` each repair; returns the gaps between repairs and how
    /// many repairs reported a new fight.
    fn fight(g: &mut DriftGuard, start: Instant, repairs: usize, after: Duration) -> (Vec<Duration>, usize) {
        let (mut now, mut gaps, mut started, mut last) = (start, vec![], 0, None::<Instant>);
        for _ in 0..repairs {
            let at = g.drift_seen(now);
            if let Some(l) = last {
                gaps.push(at - l);
            }
            started += usize::from(g.repaired(at));
            last = Some(at);
            now = at + after;
        }
        (gaps, started)
    }

    #[test]
    fn repairs_are_quick_until_a_fight_then_once_a_minute_for_three_cycles_and_logged_once() {
        let t0 = Instant::now();
        let mut g = DriftGuard::default();
        assert_eq!(g.drift_seen(t0), t0, "the first repair runs at once");
        // Five quick repairs start the fight; then three more cycles of the other writer reverting
        // 10 ms after each repair.
        let (gaps, started) = fight(&mut g, t0, 8, Duration::from_millis(10));
        assert_eq!(gaps[..4], [MIN_GAP; 4], "one a second until the fight");
        assert_eq!(gaps[4..], [WINDOW; 3], "one write a minute in the fight, three cycles long");
        assert_eq!(started, 1, "the fight is reported once, not every minute");
        assert!(g.fighting());
    }

    #[test]
    fn only_a_quiet_minute_after_a_repair_ends_the_fight() {
        let t0 = Instant::now();
        let mut g = DriftGuard::default();
        fight(&mut g, t0, 6, Duration::from_millis(10));
        let last = *g.repairs.back().unwrap();
        // Drift 59 s after the last repair: still a fight, the repair waits for the minute.
        let mut probe = DriftGuard { repairs: g.repairs.clone(), fighting: true, ended: false };
        assert_eq!(probe.drift_seen(last + Duration::from_secs(59)), last + WINDOW);
        assert!(probe.fighting());
        assert!(!probe.take_ended());
        // Drift 61 s after: the other writer was quiet for a minute; repaired at once, no fight.
        let at = last + Duration::from_secs(61);
        assert_eq!(g.drift_seen(at), at);
        assert!(!g.fighting());
        assert!(g.take_ended(), "the end is told once");
        assert!(!g.take_ended());
        assert!(!g.repaired(at));
        assert_eq!(g.drift_seen(at) - at, MIN_GAP);
    }
}
