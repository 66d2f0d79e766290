//! The one way a labelling pass runs, for the daemon and the one-shot run alike: its NVML work
//! on the labelling thread (`nvml-labels`), with `--health-nvml-timeout` as its deadline. A
//! driver call that hangs past it fails the pass (in the daemon the published labels stay and
//! the loop goes on refreshing and repairing them) and is left running on its one thread, never
//! queued behind.

use super::ThreadError;
use crate::pass::{self, Pass, PassConfig, PassError};
use crate::probe::Session;
use crate::worker::{Answer, Worker};
use std::time::Duration;

/// Runs passes through one NVML session on the labelling thread.
pub struct PassRunner {
    session: Session,
    /// The labelling side's own thread for NVML: a hung call in health never holds it.
    worker: Worker,
    /// A pass that outlived its deadline, still running on the worker (never queued behind).
    in_flight: Option<Answer<Result<Pass, PassError>>>,
}

impl PassRunner {
    /// A runner through `session`, with its thread started.
    pub fn new(session: Session) -> Result<PassRunner, ThreadError> {
        let worker = Worker::spawn("nvml-labels").map_err(|e| ThreadError("nvml-labels", e))?;
        Ok(PassRunner { session, worker, in_flight: None })
    }

    /// One pass of `config`, its NVML work waited for up to `limit`. A `--snapshot` pass is
    /// one bounded file read, done in place.
    pub async fn run(&mut self, config: &PassConfig, limit: Duration) -> Result<Pass, PassError> {
        let session = self.session.clone();
        if config.snapshot.is_some() {
            return pass::run(config, &session);
        }
        if let Some(earlier) = self.in_flight.take() {
            // The answer of a pass that hung is old news: it is dropped, and this pass starts afresh.
            if let Err(still) = earlier.within(Duration::ZERO).await {
                self.in_flight = Some(still);
                return Err(unresponsive(&session, limit));
            }
        }
        let config = config.clone();
        let job = move || {
            let _busy = session.enter("labelling pass");
            pass::run(&config, &session)
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
fn unresponsive(session: &Session, limit: Duration) -> PassError {
    let waited = session.longest_call().map_or(limit, |(_, d)| d);
    PassError::Unresponsive { waited: Duration::from_secs(waited.as_secs()), limit }
}
