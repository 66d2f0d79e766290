//! Log lines captured in process: a `tracing` subscriber writing into memory while its guard
//! lives (this thread's: run on a current-thread runtime, so a task's lines are the test's).

use std::sync::{Arc, Mutex};

/// The lines written while a [`Logs::capture`] guard lives.
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    /// Captures this thread's `INFO` lines and above until the guard drops.
    pub fn capture(&self) -> tracing::subscriber::DefaultGuard {
        let logs = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || logs.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    /// How many lines contain `text`.
    pub fn count(&self, text: &str) -> usize {
        self.lines().iter().filter(|l| l.contains(text)).count()
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        self.text().lines().map(String::from).collect()
    }

    /// Forgets what was written so far.
    pub fn clear(&self) {
        self.0.lock().unwrap().clear();
    }

    /// Everything so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}
