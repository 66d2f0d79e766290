//! The NVML work in flight through one session, and since when: how a hung driver call is seen
//! from outside the thread it hangs on (health's watchdog reads it, whichever side is stuck).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// One piece of work: its name, and when it started (monotonic, and by the wall clock).
type Started = (&'static str, Instant, SystemTime);

/// The work in flight; clones share it.
#[derive(Debug, Clone, Default)]
pub struct Calls {
    started: Arc<Mutex<BTreeMap<u64, Started>>>,
    next: Arc<AtomicU64>,
}

/// One piece of work in flight; it ends when this is dropped (when the work returns).
#[derive(Debug)]
#[must_use = "the work counts as in flight only while this lives"]
pub struct InFlight {
    calls: Calls,
    id: u64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.calls.started.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.id);
    }
}

impl Calls {
    /// `what` (a name for logs: "labelling pass", "health reading") starts now.
    pub fn enter(&self, what: &'static str) -> InFlight {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let started = (what, Instant::now(), SystemTime::now());
        self.started.lock().unwrap_or_else(|p| p.into_inner()).insert(id, started);
        InFlight { calls: self.clone(), id }
    }

    /// The work in flight longest, and for how long.
    pub fn longest(&self) -> Option<(&'static str, Duration)> {
        self.oldest().map(|(what, at, _)| (what, at.elapsed()))
    }

    /// The work in flight longest, and when it started by the wall clock (the same instant
    /// however often it is asked, so a message that names it does not change while it hangs).
    pub fn longest_since(&self) -> Option<(&'static str, Duration, SystemTime)> {
        self.oldest().map(|(what, at, wall)| (what, at.elapsed(), wall))
    }

    fn oldest(&self) -> Option<Started> {
        let started = self.started.lock().unwrap_or_else(|p| p.into_inner());
        started.values().min_by_key(|(_, at, _)| *at).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_counts_while_in_flight_and_the_oldest_is_named() {
        let calls = Calls::default();
        assert_eq!(calls.longest(), None);
        let first = calls.enter("labelling pass");
        let second = calls.clone().enter("health reading");
        assert_eq!(calls.longest().map(|(w, _)| w), Some("labelling pass"));
        drop(first);
        assert_eq!(calls.longest().map(|(w, _)| w), Some("health reading"));
        drop(second);
        assert_eq!(calls.longest(), None);
    }
}
