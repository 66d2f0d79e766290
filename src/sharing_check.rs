//! The sharing cross-check (with `--extended-labels`): what the labels promise per resource
//! (count × replicas, under the name the device plugin advertises) against the Node's
//! `status.allocatable`. The device plugin may lag behind a config change, so a mismatch counts
//! only after a grace period; then it is one warning naming both numbers and a gauge, and it
//! clears by itself when they agree. It never changes a label.

use crate::labels::Labels;
use crate::sharing::Sharing;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Per resource name, how many the labels promise the device plugin advertises.
pub fn promised(labels: &Labels, sharing: &Sharing) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (k, count) in labels {
        let Some(resource) = k.strip_suffix(".count") else { continue };
        // The resources GFD's labels describe: the full-GPU (or single-strategy MIG) resource,
        // and one per MIG profile under the mixed strategy. Not the extended inventory.
        let is_resource = resource == "nvidia.com/gpu"
            || resource.strip_prefix("nvidia.com/mig-").is_some_and(|p| !p.contains('/'));
        let Ok(count) = count.parse::<u64>() else { continue };
        if !is_resource {
            continue;
        }
        let replicas = labels.get(&format!("{resource}.replicas")).and_then(|r| r.parse::<u64>().ok());
        // 0 replicas: MIG-enabled full GPUs, which the plugin does not advertise as this resource.
        let Some(replicas) = replicas.filter(|r| *r > 0) else { continue };
        let name = sharing
            .entry(resource)
            .and_then(|e| e.rename.clone())
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| resource.to_string());
        *out.entry(name).or_default() += count * replicas;
    }
    out
}

/// What changed in one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// A mismatch outlasted the grace period.
    Mismatch {
        /// The resource.
        resource: String,
        /// What the labels promise.
        promised: u64,
        /// What the Node has allocatable (`None`: not at all).
        allocatable: Option<u64>,
    },
    /// A reported mismatch is gone.
    Cleared {
        /// The resource.
        resource: String,
    },
}

/// Mismatches seen: since when, against which promise, and what was reported.
#[derive(Debug)]
pub struct SharingCheck {
    grace: Duration,
    /// Per resource, since when it mismatches the promise it has now (a new promise, after a
    /// config change, starts its grace anew: the device plugin needs it again).
    since: BTreeMap<String, (Instant, u64)>,
    reported: BTreeMap<String, (u64, Option<u64>)>,
}

impl SharingCheck {
    /// A check that reports a mismatch once it has lasted `grace`.
    pub fn new(grace: Duration) -> SharingCheck {
        SharingCheck { grace, since: BTreeMap::new(), reported: BTreeMap::new() }
    }

    /// The grace period a reload set.
    pub fn set_grace(&mut self, grace: Duration) {
        self.grace = grace;
    }

    /// Forgets the mismatches not reported yet (nothing to compare now): none is then due.
    pub fn forget_pending(&mut self) {
        self.since.clear();
    }

    /// When a mismatch not reported yet outlasts the grace period: the check is due then, not
    /// at the next pass or Node event.
    pub fn due(&self) -> Option<Instant> {
        self.since
            .iter()
            .filter(|(r, (_, want))| self.reported.get(*r).is_none_or(|(w, _)| w != want))
            .map(|(_, (at, _))| *at + self.grace)
            .min()
    }

    /// Compares `promised` with the Node's `allocatable` (quantities as the API gives them) at
    /// `now`; returns what started or cleared. Each lasting mismatch is reported once.
    pub fn check(
        &mut self,
        promised: &BTreeMap<String, u64>,
        allocatable: &BTreeMap<String, String>,
        now: Instant,
    ) -> Vec<Finding> {
        let mut findings = Vec::new();
        let mut mismatched = Vec::new();
        for (resource, want) in promised {
            let have = allocatable.get(resource).and_then(|q| q.parse::<u64>().ok());
            if have == Some(*want) {
                continue;
            }
            mismatched.push(resource.clone());
            let entry = self.since.entry(resource.clone()).or_insert((now, *want));
            if entry.1 != *want {
                *entry = (now, *want);
            }
            let since = entry.0;
            let lasting = now.duration_since(since) >= self.grace;
            if lasting && self.reported.get(resource) != Some(&(*want, have)) {
                self.reported.insert(resource.clone(), (*want, have));
                findings.push(Finding::Mismatch {
                    resource: resource.clone(),
                    promised: *want,
                    allocatable: have,
                });
            }
        }
        self.since.retain(|r, _| mismatched.contains(r));
        let cleared: Vec<String> =
            self.reported.keys().filter(|r| !mismatched.contains(r)).cloned().collect();
        for resource in cleared {
            self.reported.remove(&resource);
            findings.push(Finding::Cleared { resource });
        }
        findings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn promises_follow_count_replicas_and_renames() {
        let labels = map(&[
            ("nvidia.com/gpu.count", "2"),
            ("nvidia.com/gpu.replicas", "4"),
            ("nvidia.com/mig-1g.5gb.count", "7"),
            ("nvidia.com/mig-1g.5gb.replicas", "1"),
            ("nvidia.com/gpu.models.l40s.count", "2"),
            ("nvidia.com/gpu.physical.count", "2"),
        ]);
        let p = promised(&labels, &Sharing::time_slicing(&[("nvidia.com/gpu", 4)]));
        assert_eq!(p, BTreeMap::from([("nvidia.com/gpu".into(), 8), ("nvidia.com/mig-1g.5gb".into(), 7)]));
        let mut renamed = Sharing::time_slicing(&[("nvidia.com/gpu", 4)]);
        renamed.time_slicing.as_mut().unwrap().resources[0].rename = Some("nvidia.com/gpu.shared".into());
        assert_eq!(promised(&labels, &renamed).get("nvidia.com/gpu.shared"), Some(&8));
        // MIG-enabled full GPUs (replicas 0) promise nothing.
        let mig = map(&[("nvidia.com/gpu.count", "8"), ("nvidia.com/gpu.replicas", "0")]);
        assert!(promised(&mig, &Sharing::default()).is_empty());
    }

    #[test]
    fn a_mismatch_is_reported_once_after_the_grace_period_and_clears_by_itself() {
        let t0 = Instant::now();
        let minute = Duration::from_secs(60);
        let mut c = SharingCheck::new(5 * minute);
        let want = BTreeMap::from([("nvidia.com/gpu".to_string(), 8)]);
        let lagging = map(&[("nvidia.com/gpu", "2")]);
        assert!(c.check(&want, &lagging, t0).is_empty(), "the plugin may lag");
        assert!(c.check(&want, &lagging, t0 + 4 * minute).is_empty());
        let found = c.check(&want, &lagging, t0 + 5 * minute);
        assert_eq!(
            found,
            [Finding::Mismatch { resource: "nvidia.com/gpu".into(), promised: 8, allocatable: Some(2) }]
        );
        assert!(c.check(&want, &lagging, t0 + 6 * minute).is_empty(), "said once");
        let caught_up = map(&[("nvidia.com/gpu", "8")]);
        assert_eq!(
            c.check(&want, &caught_up, t0 + 7 * minute),
            [Finding::Cleared { resource: "nvidia.com/gpu".into() }]
        );
        assert!(c.check(&want, &caught_up, t0 + 8 * minute).is_empty());
        // A mismatch that mends itself within the grace period is never reported.
        assert!(c.check(&want, &lagging, t0 + 9 * minute).is_empty());
        assert!(c.check(&want, &caught_up, t0 + 10 * minute).is_empty());
        assert!(c.check(&want, &lagging, t0 + 11 * minute).is_empty(), "the clock starts again");
        // A resource the Node does not have at all.
        let found = c.check(&want, &map(&[]), t0 + 17 * minute);
        assert_eq!(
            found,
            [Finding::Mismatch { resource: "nvidia.com/gpu".into(), promised: 8, allocatable: None }]
        );
    }
}
