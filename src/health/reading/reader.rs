//! Health's NVML readings: each on health's own worker thread (a hung call here never holds
//! labelling, nor the reverse), waited for up to `--health-nvml-timeout`, and the watchdog that
//! says which NVML call hangs.

use crate::health::config::HealthConfig;
use crate::health::metrics::HealthMetrics;
use crate::health::reading::nvml_reads;
use crate::health::reading::watchdog::Watchdog;
use crate::health::values::reading::ReadError;
use crate::health::values::reading::Reading;
use crate::health::HealthError;
use crate::probe::Session;
use crate::worker::{Answer, Worker};
use std::time::Duration;

/// Reads NVML for health.
pub struct Reader {
    session: Session,
    /// Health's own thread for NVML.
    worker: Worker,
    /// A reading that outlived its deadline, still running on the worker (never queued behind).
    in_flight: Option<Answer<Result<Reading, ReadError>>>,
    /// Whether some NVML work hung at the last look.
    watchdog: Watchdog,
}

impl Reader {
    /// A reader through `session`, with its worker thread started.
    pub fn new(session: Session) -> Result<Reader, HealthError> {
        let worker = Worker::spawn("nvml-health").map_err(|e| HealthError::Thread("nvml-health", e))?;
        Ok(Reader { session, worker, in_flight: None, watchdog: Watchdog::default() })
    }

    /// This pass's reading where `config` says, waited for up to its NVML timeout; `None` while it
    /// hangs (it is kept, and the next pass looks whether it came, without queueing another
    /// behind it).
    pub async fn read(&mut self, config: &HealthConfig) -> Option<Result<Reading, ReadError>> {
        let (answer, wait) = match self.in_flight.take() {
            Some(answer) => (answer, Duration::ZERO),
            None => {
                let (session, opts) = (self.session.clone(), config.probe.clone());
                let job = move || {
                    let _busy = session.enter("health reading");
                    nvml_reads::read(&session, &opts)
                };
                match self.worker.submit(job) {
                    Ok(answer) => (answer, config.settings.nvml_timeout),
                    Err(e) => return Some(Err(e.into())),
                }
            }
        };
        match answer.within(wait).await {
            Ok(answer) => Some(answer.unwrap_or_else(|e| Err(e.into()))),
            Err(still) => {
                self.in_flight = Some(still);
                None
            }
        }
    }

    /// How long until [`Reader::stall`] may say something new: when the NVML work in flight
    /// passes `timeout` (no later than `timeout` from now, should work start meanwhile), or,
    /// while a call hangs, a second, to say its end when it ends.
    pub fn stall_in(&self, timeout: Duration) -> Duration {
        if self.watchdog.stalled() {
            return Duration::from_secs(1);
        }
        let waited = self.session.oldest_call().map_or(Duration::ZERO, |o| o.waited);
        timeout.saturating_sub(waited)
    }

    /// Whether a hung call was seen at the last check.
    pub fn stalled(&self) -> bool {
        self.watchdog.stalled()
    }

    /// What NVML work (labelling's or health's) hangs longer than `timeout`, if any.
    pub fn stall(&mut self, metrics: &HealthMetrics, timeout: Duration) -> Option<String> {
        self.watchdog.check(&self.session, metrics, timeout)
    }
}
