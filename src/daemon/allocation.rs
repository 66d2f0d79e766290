//! `--allocation-mode auto`: the label profile follows this node's `gpu.nvidia.com`
//! ResourceSlices (the owner's one [`SliceWatch`]), so a node that moves between the device
//! plugin and the DRA driver changes profile at the next pass, without a restart. Without API
//! access, or where ResourceSlices cannot be read, `auto` is the device-plugin profile.

use crate::kubeapi::slices::{SliceState, SliceWatch};
use crate::labels::{AllocationMode, Profile};
use std::time::Duration;

/// How long the first pass waits for the first list of the slices.
const FIRST_LIST: Duration = Duration::from_secs(10);

/// The profile a mode gives for the slices seen.
pub fn profile(mode: AllocationMode, slices: &SliceState) -> Profile {
    match (mode.fixed(), slices.is_dra()) {
        (Some(fixed), _) => fixed,
        (None, Some(true)) => Profile::Dra,
        (None, _) => Profile::DevicePlugin,
    }
}

/// The allocation mode in force and what decides `auto`.
pub struct Allocation {
    mode: AllocationMode,
    slices: Option<SliceWatch>,
    /// The profile of the last pass, to log a switch once and to wake the loop only for one.
    last: Option<Profile>,
}

impl Allocation {
    /// `mode`, decided by `slices` when it is `auto` (none: no API access).
    pub fn new(mode: AllocationMode, slices: Option<SliceWatch>) -> Allocation {
        Allocation { mode, slices: slices.filter(|_| mode == AllocationMode::Auto), last: None }
    }

    /// The profile for the pass about to run; the first waits (bounded) for the first list.
    pub async fn profile(&mut self) -> Profile {
        let state = match &self.slices {
            None => SliceState::Unknown,
            Some(w) => {
                let mut rx = w.changes();
                let listed = rx.wait_for(|s| *s != SliceState::Unknown);
                let _ = tokio::time::timeout(FIRST_LIST, listed).await;
                w.state()
            }
        };
        self.decide(state)
    }

    /// The profile for `state`, logged when it changes.
    pub fn decide(&mut self, state: SliceState) -> Profile {
        let now = profile(self.mode, &state);
        if self.mode == AllocationMode::Auto && self.last != Some(now) {
            let reason = match &state {
                SliceState::Unknown if self.slices.is_none() => "nvlabel has no API access here",
                SliceState::Listed(s) if !s.is_empty() => "this node has a gpu.nvidia.com ResourceSlice",
                SliceState::Listed(_) => "this node has no gpu.nvidia.com ResourceSlice",
                SliceState::Unavailable(_) => "ResourceSlices cannot be read",
                SliceState::Unknown => "ResourceSlices were not listed in time",
            };
            let profile = match now {
                crate::labels::Profile::DevicePlugin => "device-plugin",
                crate::labels::Profile::Dra => "dra",
            };
            tracing::info!(profile, "--allocation-mode=auto: {reason}");
        }
        self.last = Some(now);
        now
    }

    /// Returns when the slices would change the profile of the last pass (never for a fixed mode).
    pub async fn switched(&self) {
        let Some(w) = &self.slices else { return futures::future::pending().await };
        let mut rx = w.changes();
        loop {
            // Checked before waiting too: a change during the pass is not lost.
            let now = profile(self.mode, &rx.borrow_and_update());
            if self.last != Some(now) {
                return;
            }
            if rx.changed().await.is_err() {
                return futures::future::pending().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn auto_is_dra_only_with_a_slice() {
        let with = SliceState::Listed(BTreeMap::from([("s".to_string(), Default::default())]));
        let without = SliceState::Listed(BTreeMap::new());
        assert_eq!(profile(AllocationMode::Auto, &with), Profile::Dra);
        assert_eq!(profile(AllocationMode::Auto, &without), Profile::DevicePlugin);
        assert_eq!(
            profile(AllocationMode::Auto, &SliceState::Unavailable("403".into())),
            Profile::DevicePlugin
        );
        assert_eq!(profile(AllocationMode::Auto, &SliceState::Unknown), Profile::DevicePlugin);
        assert_eq!(profile(AllocationMode::Dra, &without), Profile::Dra);
        assert_eq!(profile(AllocationMode::DevicePlugin, &with), Profile::DevicePlugin);
    }
}
