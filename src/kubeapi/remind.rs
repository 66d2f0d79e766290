//! How nvlabel speaks of a failure that repeats (a watch that cannot list, a health write the
//! API refuses): said when it starts, reminded of at most once a minute while it lasts, and said
//! resolved when a call works again, so a retry every second is not a log line every second.
//! Pure: the caller says when each try happened (tokio's clock, so tests run on its virtual one)
//! and words the lines itself.

use std::time::{Duration, Instant};

/// A failure that goes on is said again at most this often.
pub const REMIND_EVERY: Duration = Duration::from_secs(60);

/// What to say about a failed try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Say {
    /// A failure starts: say it.
    Starts,
    /// It went on for `failing_for` since it started, and nothing was said for a minute: remind.
    Still {
        /// Since the first failed try.
        failing_for: Duration,
    },
    /// Said less than a minute ago: nothing.
    Quiet,
}

/// A failure that ended: the last error and how long it lasted, to say it is resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The last failed try's error.
    pub error: String,
    /// From the first failed try to the success.
    pub failed_for: Duration,
}

/// One kind of call's failure in force, if any.
#[derive(Debug, Default)]
pub struct Failures {
    failing: Option<Failing>,
}

#[derive(Debug)]
struct Failing {
    error: String,
    since: Instant,
    reminded: Instant,
}

impl Failures {
    /// A try failed with `error` at `now`: what to say.
    pub fn failed(&mut self, error: String, now: Instant) -> Say {
        let Some(f) = self.failing.as_mut() else {
            self.failing = Some(Failing { error, since: now, reminded: now });
            return Say::Starts;
        };
        f.error = error;
        if now.saturating_duration_since(f.reminded) < REMIND_EVERY {
            return Say::Quiet;
        }
        f.reminded = now;
        Say::Still { failing_for: now.saturating_duration_since(f.since) }
    }

    /// A try worked at `now`: the failure it ends, if one was in force.
    pub fn succeeded(&mut self, now: Instant) -> Option<Resolved> {
        let f = self.failing.take()?;
        Some(Resolved { error: f.error, failed_for: now.saturating_duration_since(f.since) })
    }

    /// Whether a failure is in force.
    pub fn failing(&self) -> bool {
        self.failing.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn said_once_reminded_once_a_minute_and_resolved_once() {
        let (mut f, t0) = (Failures::default(), Instant::now());
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert_eq!(f.succeeded(t0), None, "nothing failed");
        assert_eq!(f.failed("a".into(), t0), Say::Starts);
        // Health's backoff: tries after 1, 2, 4, 8, 16 and 32 s say nothing more.
        for s in [1, 3, 7, 15, 31, 59] {
            assert_eq!(f.failed("b".into(), at(s)), Say::Quiet, "at {s} s");
        }
        assert_eq!(f.failed("c".into(), at(60)), Say::Still { failing_for: Duration::from_secs(60) });
        assert_eq!(f.failed("d".into(), at(119)), Say::Quiet);
        assert_eq!(f.failed("e".into(), at(125)), Say::Still { failing_for: Duration::from_secs(125) });
        assert!(f.failing());
        let resolved = Resolved { error: "e".into(), failed_for: Duration::from_secs(130) };
        assert_eq!(f.succeeded(at(130)), Some(resolved));
        assert_eq!(f.succeeded(at(131)), None, "resolved once");
        assert_eq!(f.failed("f".into(), at(132)), Say::Starts, "a new failure starts over");
    }
}
