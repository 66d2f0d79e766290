//! Xids that are no fault once and one when they repeat (`--health-xid-thresholds
//! XID:COUNT/WINDOW[,...]`): the operator's thresholds as values, and the count of each GPU's
//! recent Xids that reaches them. Counted at the times handed in (health's one clock, so tests
//! can move time); each GPU's
//! count of an Xid keeps at most COUNT times. The fault a threshold makes is an Xid fault
//! ([`crate::health::values::fault::Fault::Xid`] with its threshold in `repeated`), so it clears as one does.

use crate::health::values::fault::{duration_text, Threshold, Thresholds};
use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

/// What a good value looks like, for error messages.
const FORM: &str = "use XID:COUNT/WINDOW items such as 43:3/1m,13:5/10m";
/// The highest COUNT: the times counted per GPU and Xid are kept until the window passes.
pub const MAX_COUNT: u32 = 1000;

/// Where one GPU's count of an Xid stands against its threshold: the `seen`-th of COUNT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// The Xids counted within the window, this one included.
    pub seen: u32,
    /// The threshold counted against.
    pub threshold: Threshold,
}

impl Tally {
    /// Whether this Xid reached the threshold (its fault).
    pub fn reached(&self) -> bool {
        self.seen >= self.threshold.count
    }
}

impl std::fmt::Display for Tally {
    /// As the log says it: `1 of 3 within 1m`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Threshold { count, window } = self.threshold;
        write!(f, "{} of {count} within {}", self.seen, duration_text(window))
    }
}

/// The flag's text: comma-separated `XID:COUNT/WINDOW` items (empty: none). A bad item is named
/// with what is wrong and what a good one looks like.
pub fn parse(text: &str) -> Result<Thresholds, String> {
    let mut out = Thresholds::new();
    for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (xid, threshold) = parse_item(item)?;
        if out.insert(xid, threshold).is_some() {
            return Err(format!("Xid {xid} has two thresholds; give each Xid one ({FORM})"));
        }
    }
    Ok(out)
}

/// One `XID:COUNT/WINDOW` item.
fn parse_item(item: &str) -> Result<(u64, Threshold), String> {
    let shape = || format!("{item:?} is not XID:COUNT/WINDOW; {FORM}");
    let (xid, rest) = item.split_once(':').ok_or_else(shape)?;
    let (count, window) = rest.split_once('/').ok_or_else(shape)?;
    let xid = xid.trim().parse().map_err(|_| format!("{xid:?} in {item:?} is not an Xid number; {FORM}"))?;
    let count = count
        .trim()
        .parse()
        .ok()
        .filter(|c| (2..=MAX_COUNT).contains(c))
        .ok_or_else(|| format!("the count {count:?} in {item:?} is not a whole number from 2 to {MAX_COUNT} (once is --health-fatal-xids); {FORM}"))?;
    let window =
        crate::duration::parse_go_duration(window.trim()).ok().filter(|w| !w.is_zero()).ok_or_else(|| {
            format!("the window {window:?} in {item:?} is not a positive duration such as 1m or 90s; {FORM}")
        })?;
    Ok((xid, Threshold { count, window }))
}

/// Each GPU's recent Xids that a threshold counts: the times of the last COUNT at most.
#[derive(Debug, Default)]
pub struct Counter {
    seen: BTreeMap<(u32, u64), VecDeque<Instant>>,
}

impl Counter {
    /// Counts Xid `xid` on GPU `index`, come `now`, by `thresholds` (the ones in force: a reload
    /// may change them); returns the threshold it reaches, if this one does. The count starts
    /// again after, so the next fault of the same kind needs COUNT more.
    pub fn count(
        &mut self,
        thresholds: &Thresholds,
        index: u32,
        xid: u64,
        now: Instant,
    ) -> Option<Threshold> {
        self.seen.retain(|(_, x), _| thresholds.contains_key(x));
        let threshold = *thresholds.get(&xid)?;
        let times = self.seen.entry((index, xid)).or_default();
        times.push_back(now);
        while times.front().is_some_and(|t| now.duration_since(*t) > threshold.window) {
            times.pop_front();
        }
        if times.len() < threshold.count as usize {
            return None;
        }
        // Reaching the count empties the list: it never holds more than COUNT times.
        self.seen.remove(&(index, xid));
        Some(threshold)
    }

    /// Counts as [`Counter::count`] does, and says where the count stands: the `seen`-th of
    /// COUNT (reached at COUNT); `None` for an Xid without a threshold.
    pub fn tally(&mut self, thresholds: &Thresholds, index: u32, xid: u64, now: Instant) -> Option<Tally> {
        let threshold = *thresholds.get(&xid)?;
        let seen = match self.count(thresholds, index, xid, now) {
            Some(reached) => reached.count,
            None => self.seen.get(&(index, xid)).map_or(0, |t| t.len() as u32),
        };
        Some(Tally { seen, threshold })
    }
}

#[cfg(test)]
#[path = "thresholds_tests.rs"]
mod tests;
