//! A driver that stops answering: NVML work (labelling's or health's own) that runs past
//! `--health-nvml-timeout` makes the condition `Unknown`, with a message that names the hung NVML
//! call (where the work marked it, [`crate::probe::calls::driver`]), since when and what to do. It holds no growing wait, so the condition is written once while
//! the call hangs, not every pass.

use crate::health::metrics::HealthMetrics;
use crate::probe::{calls::Step, Session};
use std::time::Duration;

/// The target of this file's log lines: the module it was before health had rooms, so no
/// line an operator reads or filters on changed with the move.
const LOG: &str = "nvlabel::health::watchdog";

/// Whether a hung call was seen at the last pass (the deadline itself stays in the
/// configuration, `--health-nvml-timeout`, and is handed in at each check).
#[derive(Debug, Default)]
pub struct Watchdog {
    stalled: bool,
}

impl Watchdog {
    /// Whether a hung call was seen at the last check.
    pub fn stalled(&self) -> bool {
        self.stalled
    }

    /// What hangs in `session` longer than `timeout`; said once in the log when it starts and
    /// once when it ends, and as `nvlabel_nvml_call_stalled`.
    pub fn check(&mut self, session: &Session, metrics: &HealthMetrics, timeout: Duration) -> Option<String> {
        let stall = session.oldest_call().filter(|o| o.waited >= timeout).map(|o| {
            let call = match o.step {
                Some(Step { function, gpu: Some(g) }) => format!("{function} on GPU {g}, in the {},", o.what),
                Some(Step { function, gpu: None }) => format!("{function}, in the {},", o.what),
                None => format!("a call of the {}", o.what),
            };
            message(&call, humantime::format_rfc3339_seconds(o.since), timeout)
        });
        metrics.nvml_stalled.set(i64::from(stall.is_some()));
        match (&stall, self.stalled) {
            (Some(what), false) => {
                tracing::warn!(target: LOG, stall = %what, "an NVML call hangs: GPU health is Unknown until it returns; labels stay published")
            }
            (None, true) => tracing::info!(target: LOG, "the hung NVML call returned"),
            _ => {}
        }
        self.stalled = stall.is_some();
        stall
    }
}

/// The condition's words for the NVML `call` hung since `since`.
fn message(call: &str, since: impl std::fmt::Display, timeout: Duration) -> String {
    let limit = humantime::format_duration(timeout);
    format!(
        "{call} has not returned since {since} (longer than --health-nvml-timeout \
         {limit}); labels stay published. Check the driver on the node (nvidia-smi, and the kernel \
         log for Xid or NVRM errors); if it does not answer either, drain the node and reboot it"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_the_work_its_start_and_what_to_do() {
        assert_eq!(
            message("a call of the health reading", "2026-01-02T03:04:05Z", Duration::from_secs(30)),
            "a call of the health reading has not returned since 2026-01-02T03:04:05Z (longer than \
             --health-nvml-timeout 30s); labels stay published. Check the driver on the node \
             (nvidia-smi, and the kernel log for Xid or NVRM errors); if it does not answer either, \
             drain the node and reboot it"
        );
    }
}
