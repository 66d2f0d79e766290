//! A named OS thread that runs blocking jobs one at a time for one owner. Labelling and health
//! each have their own, so a driver call that hangs on one side stalls only that side: the
//! runtime's shared blocking pool would put both behind the one hung call.

use std::sync::mpsc;

/// A job and where its answer goes.
type Job = Box<dyn FnOnce() + Send + 'static>;

/// Why a job gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The job panicked (the thread survives and takes the next job).
    #[error("{thread}: the job panicked: {message}")]
    Panicked {
        /// The thread's name.
        thread: String,
        /// The panic's text, when it had one.
        message: String,
    },
    /// The thread is gone (it could not be started, or the process is stopping).
    #[error("{0}: the worker thread is gone")]
    Gone(String),
}

impl crate::exit::Classify for WorkerError {
    fn is_bad_configuration(&self) -> bool {
        match self {
            WorkerError::Panicked { .. } | WorkerError::Gone(_) => false,
        }
    }
}

/// One long-lived thread; it ends when its `Worker` is dropped and the job in hand is done.
#[derive(Debug)]
pub struct Worker {
    name: String,
    jobs: mpsc::Sender<Job>,
}

impl Worker {
    /// Starts the thread `name`.
    pub fn spawn(name: &str) -> std::io::Result<Worker> {
        let (jobs, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new().name(name.into()).spawn(move || {
            while let Ok(job) = rx.recv() {
                job();
            }
        })?;
        Ok(Worker { name: name.into(), jobs })
    }

    /// The thread's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `f` on the thread and waits for its answer without blocking the runtime.
    pub async fn run<T, F>(&self, f: F) -> Result<T, WorkerError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        self.submit(f)?.rx.await.map_err(|_| WorkerError::Gone(self.name.clone()))?
    }

    /// Queues `f` on the thread; its answer comes through the [`Answer`], which can be waited
    /// for with a deadline and kept while the job is still running (so a hung job is never
    /// queued behind again, and no thread is started for it).
    pub fn submit<T, F>(&self, f: F) -> Result<Answer<T>, WorkerError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let thread = self.name.clone();
        let job: Job = Box::new(move || {
            let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
                .map_err(|p| WorkerError::Panicked { thread, message: panic_text(p.as_ref()) });
            let _ = tx.send(answer);
        });
        self.jobs.send(job).map_err(|_| WorkerError::Gone(self.name.clone()))?;
        Ok(Answer { rx, thread: self.name.clone() })
    }
}

/// The answer to come of a submitted job.
#[derive(Debug)]
pub struct Answer<T> {
    rx: tokio::sync::oneshot::Receiver<Result<T, WorkerError>>,
    thread: String,
}

impl<T> Answer<T> {
    /// The job's answer if it comes within `limit` (zero: only if it is there already); else the
    /// answer still to come, to wait for later.
    pub async fn within(mut self, limit: std::time::Duration) -> Result<Result<T, WorkerError>, Answer<T>> {
        match tokio::time::timeout(limit, &mut self.rx).await {
            Ok(answer) => Ok(answer.unwrap_or_else(|_| Err(WorkerError::Gone(self.thread.clone())))),
            Err(_) => Err(self),
        }
    }
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn one_worker_stuck_does_not_hold_another() {
        let stuck = Worker::spawn("stuck").unwrap();
        let free = Worker::spawn("free").unwrap();
        let (release, held) = std::sync::mpsc::channel::<()>();
        let blocked = tokio::spawn(async move { stuck.run(move || held.recv().ok()).await.unwrap() });
        // The other worker answers while the first is blocked.
        assert_eq!(free.run(|| 7).await.unwrap(), 7);
        assert!(!blocked.is_finished());
        release.send(()).unwrap();
        assert_eq!(blocked.await.unwrap(), Some(()));
    }

    #[tokio::test]
    async fn an_answer_late_for_its_deadline_is_kept_and_comes_later() {
        let w = Worker::spawn("slow").unwrap();
        let (release, held) = std::sync::mpsc::channel::<()>();
        let answer = w.submit(move || held.recv().map(|()| 5).ok()).unwrap();
        let late = answer.within(Duration::from_millis(10)).await.unwrap_err();
        let late = late.within(Duration::ZERO).await.unwrap_err();
        release.send(()).unwrap();
        assert_eq!(late.within(Duration::from_secs(30)).await.unwrap().unwrap(), Some(5));
    }

    #[tokio::test]
    async fn a_panic_is_an_error_and_the_thread_goes_on() {
        let w = Worker::spawn("panicky").unwrap();
        let e = w.run(|| -> u8 { panic!("boom") }).await.unwrap_err();
        assert_eq!(e.to_string(), "panicky: the job panicked: boom");
        assert_eq!(w.run(|| 1).await.unwrap(), 1);
    }

    #[tokio::test]
    async fn jobs_run_on_the_named_thread() {
        let w = Worker::spawn("nvml-test").unwrap();
        let name = w.run(|| std::thread::current().name().map(String::from)).await.unwrap();
        assert_eq!(name.as_deref(), Some("nvml-test"));
    }
}
