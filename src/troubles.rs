//! Troubles: what a pass could not do (a lost GPU, a missing DMI file, MPS on a MIG node).
//! A trouble usually lasts for many passes, so it is logged when it starts and when it ends,
//! never on every pass. (Not a Node condition: health's `GPUHealthy` condition is another thing.)

use crate::snapshot::Issue;
use std::collections::BTreeSet;

/// One thing that went wrong in a pass.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Trouble {
    /// The probe could not read a fact.
    Issue(Issue),
    /// A labeler's warning.
    Warning(String),
}

impl std::fmt::Display for Trouble {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Trouble::Issue(i) => match &i.device {
                Some(d) => write!(f, "device {d}: {}: {}: {}", i.function, i.error, i.effect),
                None => write!(f, "{}: {}: {}", i.function, i.error, i.effect),
            },
            Trouble::Warning(w) => f.write_str(w),
        }
    }
}

impl Trouble {
    /// Logs the condition as starting (warn) or ending (info), with structured fields.
    fn log(&self, started: bool) {
        match (self, started) {
            (Trouble::Issue(i), true) => {
                tracing::warn!(device = i.device.as_deref().map(tracing::field::display), function = %i.function, error = %i.error, "{}", i.effect)
            }
            (Trouble::Issue(i), false) => {
                tracing::info!(device = i.device.as_deref().map(tracing::field::display), function = %i.function, "resolved: {}", i.effect)
            }
            (Trouble::Warning(w), true) => tracing::warn!("{w}"),
            (Trouble::Warning(w), false) => tracing::info!("resolved: {w}"),
        }
    }
}

/// The troubles of the last pass.
#[derive(Debug, Default)]
pub struct Troubles {
    active: BTreeSet<Trouble>,
}

/// What changed between two passes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Change {
    /// Troubles that hold now and did not before.
    pub started: Vec<Trouble>,
    /// Troubles that held before and no longer do.
    pub ended: Vec<Trouble>,
}

impl Troubles {
    /// Replaces the active set with `now`, logs what started and ended, and returns it.
    pub fn update(&mut self, now: impl IntoIterator<Item = Trouble>) -> Change {
        let now: BTreeSet<Trouble> = now.into_iter().collect();
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

    fn w(s: &str) -> Trouble {
        Trouble::Warning(s.into())
    }

    #[test]
    fn a_condition_is_reported_when_it_starts_and_when_it_ends_only() {
        let mut c = Troubles::default();
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
            source: None,
        };
        assert_eq!(
            Trouble::Issue(i).to_string(),
            "device 2: nvmlDeviceGetMemoryInfo_v2: GpuLost: GPU excluded from this pass"
        );
    }
}
