//! Conditions: what a pass could not do (a lost GPU, a missing DMI file, MPS on a MIG node).
//! A condition usually holds for many passes, so it is logged when it starts and when it ends,
//! never on every pass.

use crate::snapshot::Issue;
use std::collections::BTreeSet;

/// One thing that went wrong in a pass.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Condition {
    /// The probe could not read a fact.
    Issue(Issue),
    /// A labeler's warning.
    Warning(String),
}

impl std::fmt::Display for Condition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Condition::Issue(i) => match &i.device {
                Some(d) => write!(f, "device {d}: {}: {}: {}", i.function, i.error, i.effect),
                None => write!(f, "{}: {}: {}", i.function, i.error, i.effect),
            },
            Condition::Warning(w) => f.write_str(w),
        }
    }
}

impl Condition {
    /// Logs the condition as starting (warn) or ending (info), with structured fields.
    fn log(&self, started: bool) {
        match (self, started) {
            (Condition::Issue(i), true) => {
                tracing::warn!(device = i.device.as_deref().map(tracing::field::display), function = %i.function, error = %i.error, "{}", i.effect)
            }
            (Condition::Issue(i), false) => {
                tracing::info!(device = i.device.as_deref().map(tracing::field::display), function = %i.function, "resolved: {}", i.effect)
            }
            (Condition::Warning(w), true) => tracing::warn!("{w}"),
            (Condition::Warning(w), false) => tracing::info!("resolved: {w}"),
        }
    }
}

/// The conditions of the last pass.
#[derive(Debug, Default)]
pub struct Conditions {
    active: BTreeSet<Condition>,
}

/// What changed between two passes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Change {
    /// Conditions that hold now and did not before.
    pub started: Vec<Condition>,
    /// Conditions that held before and no longer do.
    pub ended: Vec<Condition>,
}

impl Conditions {
    /// Replaces the active set with `now`, logs what started and ended, and returns it.
    pub fn update(&mut self, now: impl IntoIterator<Item = Condition>) -> Change {
        let now: BTreeSet<Condition> = now.into_iter().collect();
        let change = Change {
            started: now.difference(&self.active).cloned().collect(),
            ended: self.active.difference(&now).cloned().collect(),
        };
        for c in &change.started {
            c.log(true);
        }
        for c in &change.ended {
            c.log(false);
        }
        self.active = now;
        change
    }

    /// Whether nothing is wrong.
    pub fn is_empty(&self) -> bool {
        self.active.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &str) -> Condition {
        Condition::Warning(s.into())
    }

    #[test]
    fn a_condition_is_reported_when_it_starts_and_when_it_ends_only() {
        let mut c = Conditions::default();
        assert_eq!(c.update([w("a"), w("b")]).started, vec![w("a"), w("b")]);
        assert_eq!(c.update([w("a"), w("b")]), Change::default(), "a repeat is not reported again");
        let change = c.update([w("b")]);
        assert_eq!((change.started, change.ended), (vec![], vec![w("a")]));
        assert_eq!(c.update([w("a"), w("b")]).started, vec![w("a")], "a return is a new start");
        assert_eq!(c.update([]).ended.len(), 2);
        assert!(c.is_empty());
    }

    #[test]
    fn issues_name_device_function_and_error() {
        let i = Issue {
            device: Some("2".into()),
            function: "nvmlDeviceGetMemoryInfo_v2".into(),
            error: "GpuLost".into(),
            effect: "GPU excluded from this pass".into(),
        };
        assert_eq!(
            Condition::Issue(i).to_string(),
            "device 2: nvmlDeviceGetMemoryInfo_v2: GpuLost: GPU excluded from this pass"
        );
    }
}
