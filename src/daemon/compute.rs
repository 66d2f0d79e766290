//! The labelling pass's NVML work, on the labelling thread with a deadline: a driver call that
//! hangs past `--health-nvml-timeout` fails the pass (the published labels stay, the loop goes on
//! refreshing and repairing them) and is left running on its one thread, never queued behind.

use super::Daemon;
use crate::pass::{self, PassError};
use std::time::Duration;

impl Daemon {
    /// Probes and labels on the labelling thread (NVML calls block). A `--snapshot` pass is one
    /// bounded file read, done in place.
    pub(super) async fn compute(&mut self, profile: crate::labels::Profile) -> Result<pass::Pass, PassError> {
        let loaded = self.config.loaded();
        let (config, limit) = (loaded.pass_config(), loaded.settings.health.nvml_timeout);
        let session = self.session.clone();
        if config.snapshot.is_some() {
            return pass::run(&config, &session, profile);
        }
        if let Some(earlier) = self.in_flight.take() {
            // The answer of a pass that hung is old news: it is dropped, and this pass starts afresh.
            if let Err(still) = earlier.within(Duration::ZERO).await {
                self.in_flight = Some(still);
                return Err(unresponsive(&session, limit));
            }
        }
        let job = move || {
            let _busy = session.enter("labelling pass");
            pass::run(&config, &session, profile)
        };
        match self.worker.submit(job)?.within(limit).await {
            Ok(answer) => answer?,
            Err(still) => {
                self.in_flight = Some(still);
                Err(unresponsive(&self.session, limit))
            }
        }
    }
}

/// The error of a pass whose NVML work has not returned.
fn unresponsive(session: &crate::probe::Session, limit: Duration) -> PassError {
    let waited = session.longest_call().map_or(limit, |(_, d)| d);
    PassError::Unresponsive { waited: Duration::from_secs(waited.as_secs()), limit }
}
