//! The one way a labelling pass runs, for the daemon and the one-shot run alike: its NVML work
//! on the labelling thread (`nvml-labels`), with `--health-nvml-timeout` as its deadline. A
//! driver call that hangs past it fails the pass (in the daemon the published labels stay and
//! the loop goes on refreshing and repairing them) and is left running on its one thread, never
//! queued behind.

use super::ThreadError;
use crate::pass::{self, Pass, PassConfig, PassError};
use crate::probe::{calls::Step, Session};
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
            let _busy = session.enter(WORK);
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

/// What the labelling pass's work is called where the watchdog names it.
const WORK: &str = "labelling pass";

/// The error of a pass whose work has not returned, naming what it waits on.
fn unresponsive(session: &Session, limit: Duration) -> PassError {
    let oldest = session.oldest_call_of(WORK);
    let waited = oldest.as_ref().map_or(limit, |o| o.waited);
    let waiting_on = waiting_on(oldest.and_then(|o| o.step));
    PassError::Unresponsive { waited: Duration::from_secs(waited.as_secs()), limit, waiting_on }
}

/// What a pass in `step` waits on, in words: the driver call it is in, or none.
fn waiting_on(step: Option<Step>) -> String {
    match step {
        Some(Step { function, gpu: Some(gpu) }) => {
            format!("it waits on {function} on GPU {gpu}: the driver may be hung")
        }
        Some(Step { function, gpu: None }) => format!("it waits on {function}: the driver may be hung"),
        None => {
            "it is in no driver call (reading sysfs or another file, say): a file system may be hung".into()
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::probe::calls::Step;

    #[test]
    fn a_stuck_pass_names_what_it_waits_on() {
        let e = crate::pass::PassError::Unresponsive {
            waited: std::time::Duration::from_secs(29),
            limit: std::time::Duration::from_secs(30),
            waiting_on: super::waiting_on(Some(Step {
                function: "nvmlDeviceGetMemoryInfo_v2",
                gpu: Some(0),
            })),
        };
        assert_eq!(
            e.to_string(),
            "the labelling pass has not returned for 29s (--health-nvml-timeout is 30s): it waits on nvmlDeviceGetMemoryInfo_v2 on GPU 0: the driver may be hung"
        );
        assert_eq!(
            super::waiting_on(None),
            "it is in no driver call (reading sysfs or another file, say): a file system may be hung"
        );
        assert_eq!(
            super::waiting_on(Some(Step { function: "nvmlInit_v2", gpu: None })),
            "it waits on nvmlInit_v2: the driver may be hung"
        );
    }
}
