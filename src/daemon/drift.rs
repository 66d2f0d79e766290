//! How often drift is repaired. A label someone removed is put back within a second, but a fight
//! with another writer (it changes the label back every time) must not become a hot loop: after
//! five repairs within a minute, repairs slow to one a minute until a quiet minute has passed,
//! and the fight is logged once and counted.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The least time between two repairs.
const MIN_GAP: Duration = Duration::from_secs(1);
/// Repairs within [`WINDOW`] that make a fight.
const FIGHT_REPAIRS: usize = 5;
/// The window repairs are counted in, and the gap between repairs during a fight.
const WINDOW: Duration = Duration::from_secs(60);

/// Recent repairs.
#[derive(Debug, Default)]
pub struct DriftGuard {
    repairs: VecDeque<Instant>,
    fighting: bool,
}

impl DriftGuard {
    /// When the next repair may run.
    pub fn allowed_at(&self, now: Instant) -> Instant {
        let Some(&last) = self.repairs.back() else { return now };
        let recent = self.repairs.iter().filter(|t| now.duration_since(**t) < WINDOW).count();
        let gap = if recent >= FIGHT_REPAIRS { WINDOW } else { MIN_GAP };
        (last + gap).max(now)
    }

    /// Records a repair at `now`; returns true when it starts a fight (log and count it once).
    pub fn repaired(&mut self, now: Instant) -> bool {
        self.repairs.push_back(now);
        while self.repairs.front().is_some_and(|t| now.duration_since(*t) >= WINDOW) {
            self.repairs.pop_front();
        }
        let fight = self.repairs.len() >= FIGHT_REPAIRS;
        let started = fight && !self.fighting;
        self.fighting = fight;
        started
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repairs_are_quick_until_they_become_a_fight() {
        let t0 = Instant::now();
        let mut g = DriftGuard::default();
        assert_eq!(g.allowed_at(t0), t0, "the first repair runs at once");
        let mut now = t0;
        for i in 0..4 {
            assert!(!g.repaired(now), "repair {i} is no fight");
            now = g.allowed_at(now);
            assert_eq!(now - t0, MIN_GAP * (i + 1), "one a second");
        }
        assert!(g.repaired(now), "the fifth within a minute starts a fight");
        let next = g.allowed_at(now);
        assert_eq!(next - now, WINDOW, "then one a minute");
        assert!(!g.repaired(next), "the fight is reported once");
        // A quiet minute ends it.
        let later = next + WINDOW * 2;
        assert_eq!(g.allowed_at(later), later);
        assert!(!g.repaired(later));
        assert_eq!(g.allowed_at(later) - later, MIN_GAP);
    }
}
