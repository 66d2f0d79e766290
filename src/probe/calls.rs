//! The driver work in flight through one session, since when, and which call it is in (NVML's, or
//! the CUDA source's): how a hung driver call is seen from outside the thread it hangs on
//! (health's watchdog reads it, whichever side is stuck). The call is marked by [`driver`] around
//! it, on the thread doing the work; a mark costs one uncontended lock.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

/// The driver call a piece of work is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Its function (or a named group of calls).
    pub function: &'static str,
    /// The GPU it is about, if one.
    pub gpu: Option<u32>,
}

/// Where a piece of work's current [`Step`] is kept.
type Slot = Arc<Mutex<Option<Step>>>;

/// One piece of work: its name, when it started (monotonic, and by the wall clock), its step.
#[derive(Debug, Clone)]
struct Started {
    what: &'static str,
    at: Instant,
    wall: SystemTime,
    step: Slot,
}

/// What is known of the work in flight longest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Oldest {
    /// The work ("labelling pass", "health reading").
    pub what: &'static str,
    /// How long it has run.
    pub waited: Duration,
    /// When it started, by the wall clock (the same however often it is asked).
    pub since: SystemTime,
    /// The driver call it is in, where that call is marked.
    pub step: Option<Step>,
}

thread_local! {
    /// The step slot of the work this thread does, while it does some.
    static SLOT: RefCell<Option<Slot>> = const { RefCell::new(None) };
}

/// Runs `call`, the driver function `function` (NVML's or CUDA's) (or a group of calls so named) of GPU `gpu`, as
/// the current step of this thread's work, so that a watchdog can name it while it hangs.
pub fn driver<T>(function: &'static str, gpu: Option<u32>, call: impl FnOnce() -> T) -> T {
    let outer = mark(Some(Step { function, gpu }));
    let out = call();
    mark(outer);
    out
}

/// Sets this thread's step; returns the one it replaces.
fn mark(step: Option<Step>) -> Option<Step> {
    SLOT.with(|s| match &*s.borrow() {
        Some(slot) => std::mem::replace(&mut *slot.lock().unwrap_or_else(PoisonError::into_inner), step),
        None => None,
    })
}

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
        self.calls.started.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.id);
        SLOT.with(|s| s.borrow_mut().take());
    }
}

impl Calls {
    /// `what` (a name for logs: "labelling pass", "health reading") starts now, on this thread.
    pub fn enter(&self, what: &'static str) -> InFlight {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let step = Slot::default();
        SLOT.with(|s| *s.borrow_mut() = Some(step.clone()));
        let started = Started { what, at: Instant::now(), wall: SystemTime::now(), step };
        self.started.lock().unwrap_or_else(PoisonError::into_inner).insert(id, started);
        InFlight { calls: self.clone(), id }
    }

    /// The work in flight longest: what, for how long, since when, and in which driver call.
    pub fn oldest(&self) -> Option<Oldest> {
        self.oldest_where(|_| true)
    }

    /// The oldest work in flight called `what` (one side's, whatever the other does).
    pub fn oldest_of(&self, what: &str) -> Option<Oldest> {
        self.oldest_where(|s| s.what == what)
    }

    fn oldest_where(&self, keep: impl Fn(&Started) -> bool) -> Option<Oldest> {
        let started = self.started.lock().unwrap_or_else(PoisonError::into_inner);
        started.values().filter(|s| keep(s)).min_by_key(|s| s.at).map(|s| Oldest {
            what: s.what,
            waited: s.at.elapsed(),
            since: s.wall,
            step: *s.step.lock().unwrap_or_else(PoisonError::into_inner),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_counts_while_in_flight_and_the_oldest_is_named() {
        let calls = Calls::default();
        assert_eq!(calls.oldest(), None);
        let first = calls.enter("labelling pass");
        let second =
            std::thread::scope(|s| s.spawn(|| calls.clone().enter("health reading")).join().unwrap());
        assert_eq!(calls.oldest().map(|o| o.what), Some("labelling pass"));
        drop(first);
        assert_eq!(calls.oldest().map(|o| o.what), Some("health reading"));
        drop(second);
        assert_eq!(calls.oldest(), None);
    }

    #[test]
    fn the_call_in_progress_is_named_from_another_thread() {
        let calls = Calls::default();
        let (inside, wait) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
        std::thread::scope(|s| {
            s.spawn(|| {
                let _busy = calls.enter("health reading");
                driver("the MIG device reads", Some(1), || {
                    driver("nvmlDeviceGetMemoryInfo_v2", Some(1), || {
                        inside.wait();
                        wait.wait();
                    });
                    inside.wait();
                    wait.wait();
                });
                inside.wait();
                wait.wait();
            });
            let mut seen = Vec::new();
            for _ in 0..3 {
                inside.wait();
                seen.push(calls.oldest().unwrap().step);
                wait.wait();
            }
            let named = [
                Some(Step { function: "nvmlDeviceGetMemoryInfo_v2", gpu: Some(1) }),
                Some(Step { function: "the MIG device reads", gpu: Some(1) }),
                None,
            ];
            assert_eq!(seen, named, "the inner call, then the outer again, then none");
        });
        assert_eq!(calls.oldest(), None);
        let marked_nowhere = driver("nvmlInit_v2", None, || 7);
        assert_eq!(marked_nowhere, 7, "outside any work a mark does nothing");
    }
}
