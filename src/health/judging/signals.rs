//! Warnings, not faults: a GPU whose clocks the hardware holds down (thermal or power-brake
//! slowdown) and a PCIe link that keeps retrying transfers. Neither makes a GPU unusable, so the
//! condition stays as it is; an operator gets one Warning Event when an episode begins (not one
//! per pass) and the metrics. Pure: readings and times in, the episodes that began out.

use crate::health::values::reading::Reading;
use crate::health::values::report::Signal;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

/// The target of this file's log lines: the module it was before health had rooms, so no
/// line an operator reads or filters on changed with the move.
const LOG: &str = "nvlabel::health::signals";

/// nvml.h's `nvmlClocksThrottleReasonHwThermalSlowdown`.
pub const HW_THERMAL_SLOWDOWN: u64 = 0x40;
/// nvml.h's `nvmlClocksThrottleReasonHwPowerBrakeSlowdown`.
pub const HW_POWER_BRAKE_SLOWDOWN: u64 = 0x80;
/// More PCIe replays than this in a minute is an episode.
pub const REPLAYS_PER_MINUTE: u64 = 100;
/// The window replays are counted over.
const MINUTE: Duration = Duration::from_secs(60);

/// An episode that began with this reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Began {
    /// GPU index.
    pub index: u32,
    /// The signal.
    pub signal: Signal,
    /// What happened and what to check (the Event's message, without the GPU).
    pub text: String,
}

/// One GPU's episodes in progress and its recent replay counts.
#[derive(Debug, Default)]
struct GpuState {
    active: BTreeSet<Signal>,
    replays: VecDeque<(Instant, u64)>,
}

/// The episodes of every GPU between readings.
#[derive(Debug, Default)]
pub struct Signals {
    gpus: BTreeMap<u32, GpuState>,
}

impl Signals {
    /// Takes a reading made at `now`; returns the episodes that began with it. A value the GPU
    /// could not give this time changes nothing (an episode does not end on a failed read).
    pub fn observe(&mut self, reading: &Reading, now: Instant) -> Vec<Began> {
        let mut began = Vec::new();
        for gpu in reading.gpus.iter().filter(|g| !g.lost) {
            let state = self.gpus.entry(gpu.index).or_default();
            let mut seen: Vec<(Signal, Option<String>)> = Vec::new();
            if let Some(bits) = gpu.clock_events {
                let on = |bit: u64, what: &str| {
                    (bits & bit != 0).then(|| format!("{what} (clock event reasons {bits:#x})"))
                };
                seen.push((Signal::ThermalSlowdown, on(HW_THERMAL_SLOWDOWN, "hardware thermal slowdown")));
                seen.push((
                    Signal::PowerBrakeSlowdown,
                    on(HW_POWER_BRAKE_SLOWDOWN, "hardware power brake slowdown"),
                ));
            }
            if let Some(count) = gpu.pcie_replays {
                let per_minute = state.replay_rate(now, count);
                let text =
                    format!("PCIe replays grew by {per_minute} in a minute (more than {REPLAYS_PER_MINUTE})");
                seen.push((Signal::PcieReplays, (per_minute > REPLAYS_PER_MINUTE).then_some(text)));
            }
            for (signal, on) in seen {
                match on {
                    Some(what) if state.active.insert(signal) => {
                        let text = format!("{what}: {}", signal.advice());
                        began.push(Began { index: gpu.index, signal, text });
                    }
                    Some(_) => {}
                    None => {
                        if state.active.remove(&signal) {
                            tracing::info!(target: LOG,
                                gpu = gpu.index,
                                reason = signal.reason(),
                                "GPU warning episode ended"
                            );
                        }
                    }
                }
            }
        }
        began
    }

    /// Whether an episode of `signal` is in progress on GPU `index`.
    pub fn active(&self, index: u32, signal: Signal) -> bool {
        self.gpus.get(&index).is_some_and(|g| g.active.contains(&signal))
    }
}

impl GpuState {
    /// Replays in the last minute: growth since the oldest count of the last minute, or, when
    /// readings are further apart than that, the growth since the last one scaled to a minute.
    fn replay_rate(&mut self, now: Instant, count: u64) -> u64 {
        if self.replays.back().is_some_and(|(_, last)| count < *last) {
            // The counter started over (a driver reload): count from here.
            self.replays.clear();
        }
        while self.replays.len() > 1 && self.replays[1].0 + MINUTE <= now {
            self.replays.pop_front();
        }
        let rate = match self.replays.front() {
            None => 0,
            Some((t, old)) => {
                let (grown, elapsed) = (count - old, now.saturating_duration_since(*t));
                match elapsed > MINUTE {
                    true => (u128::from(grown) * MINUTE.as_millis() / elapsed.as_millis().max(1)) as u64,
                    false => grown,
                }
            }
        };
        self.replays.push_back((now, count));
        rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::values::reading::GpuReading;

    fn reading(clock_events: Option<u64>, pcie_replays: Option<u64>) -> Reading {
        let gpu = GpuReading { index: 0, clock_events, pcie_replays, ..GpuReading::default() };
        Reading { gpus: vec![gpu], pci_gpus: None }
    }

    #[test]
    fn a_slowdown_is_one_episode_until_it_clears() {
        let (mut s, t) = (Signals::default(), Instant::now());
        assert!(s.observe(&reading(Some(0x1), None), t).is_empty(), "idle is not a slowdown");
        let began = s.observe(&reading(Some(HW_THERMAL_SLOWDOWN | 0x1), None), t);
        assert_eq!(began.len(), 1);
        assert_eq!(began[0].signal, Signal::ThermalSlowdown);
        assert!(
            began[0].text.starts_with("hardware thermal slowdown (clock event reasons 0x41)"),
            "{began:?}"
        );
        for _ in 0..5 {
            assert!(s.observe(&reading(Some(HW_THERMAL_SLOWDOWN), None), t).is_empty(), "once per episode");
        }
        assert!(s.observe(&reading(None, None), t).is_empty(), "a failed read does not end it");
        assert!(s.active(0, Signal::ThermalSlowdown));
        assert!(s.observe(&reading(Some(0), None), t).is_empty());
        assert!(!s.active(0, Signal::ThermalSlowdown), "cleared");
        let again = s.observe(&reading(Some(HW_THERMAL_SLOWDOWN | HW_POWER_BRAKE_SLOWDOWN), None), t);
        let signals: Vec<Signal> = again.iter().map(|b| b.signal).collect();
        assert_eq!(signals, [Signal::ThermalSlowdown, Signal::PowerBrakeSlowdown], "a new episode of each");
    }

    #[test]
    fn software_slowdowns_are_not_warnings() {
        let mut s = Signals::default();
        // sw_power_cap, sw_thermal_slowdown, hw_slowdown alone, sync_boost, applications clocks.
        assert!(s.observe(&reading(Some(0x4 | 0x20 | 0x8 | 0x10 | 0x2), None), Instant::now()).is_empty());
    }

    #[test]
    fn replays_over_100_in_a_minute_are_an_episode() {
        let (mut s, t) = (Signals::default(), Instant::now());
        let at = |secs: u64| t + Duration::from_secs(secs);
        assert!(s.observe(&reading(None, Some(5000)), at(0)).is_empty(), "the count so far is no rate");
        // 100 in 50 s: not more than 100.
        assert!(s.observe(&reading(None, Some(5100)), at(50)).is_empty());
        // 101 within the minute (from the reading at 0 s).
        let began = s.observe(&reading(None, Some(5101)), at(59));
        assert_eq!(began.len(), 1, "{began:?}");
        assert!(began[0].text.starts_with("PCIe replays grew by 101 in a minute"), "{began:?}");
        assert!(s.observe(&reading(None, Some(5190)), at(100)).is_empty(), "still the same episode");
        assert!(s.active(0, Signal::PcieReplays));
        // No growth for a minute ends it.
        assert!(s.observe(&reading(None, Some(5190)), at(170)).is_empty());
        assert!(!s.active(0, Signal::PcieReplays));
    }

    #[test]
    fn replays_far_apart_are_scaled_to_a_minute_and_a_reset_counter_starts_over() {
        let (mut s, t) = (Signals::default(), Instant::now());
        let at = |secs: u64| t + Duration::from_secs(secs);
        s.observe(&reading(None, Some(0)), at(0));
        // 150 in 120 s is 75 a minute.
        assert!(s.observe(&reading(None, Some(150)), at(120)).is_empty());
        // 250 in the next 120 s is 125 a minute.
        assert_eq!(s.observe(&reading(None, Some(400)), at(240)).len(), 1);
        // The counter went back to 3 (driver reloaded): no growth, the episode ends.
        assert!(s.observe(&reading(None, Some(3)), at(250)).is_empty());
        assert!(!s.active(0, Signal::PcieReplays));
    }
}
