//! Where labels go. One small trait; one file per writer. A writer publishes only what changed
//! and never removes what it published when the process stops.

mod file;
mod stdout;

pub use file::FeatureFile;
pub use stdout::Stdout;

use crate::labels::Labels;
use futures::future::BoxFuture;

/// Why a publish failed; the daemon retries and keeps going.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// Writing the feature file failed.
    #[error(transparent)]
    File(#[from] crate::output::OutputError),
    /// Writing stdout failed.
    #[error("cannot write labels to stdout: {0}")]
    Stdout(std::io::Error),
}

impl PublishError {
    /// A short, stable reason for the publish-failure metric.
    pub fn reason(&self) -> &'static str {
        match self {
            PublishError::File(_) => "file",
            PublishError::Stdout(_) => "stdout",
        }
    }
}

/// The writer the settings ask for: stdout for `--output-file ""`, else the feature file.
pub fn from_settings(settings: &crate::cli::Settings) -> Box<dyn Writer> {
    if settings.output_file.is_empty() {
        Box::new(Stdout::new(settings.format))
    } else {
        Box::new(FeatureFile::new(settings.output_file.clone().into(), settings.expiry))
    }
}

/// A label sink.
pub trait Writer: Send + Sync {
    /// Its name in logs and metrics.
    fn name(&self) -> &'static str;

    /// Publishes `labels`; `Ok(true)` when something was written.
    fn publish<'a>(&'a mut self, labels: &'a Labels) -> BoxFuture<'a, Result<bool, PublishError>>;
}
