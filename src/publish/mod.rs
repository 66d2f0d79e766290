//! Where labels go. One small trait; one file per writer. A writer publishes only what changed
//! and never removes what it published when the process stops.

mod file;
pub mod node;
pub mod nodefeature;
pub mod retry;
mod stdout;

pub use file::FeatureFile;
pub use node::NodeLabels;
pub use nodefeature::NodeFeature;
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
    /// The Kubernetes API refused or could not be reached (after retries).
    #[error("{writer}: {source}")]
    Api {
        /// Which writer.
        writer: &'static str,
        /// The API error.
        source: kube::Error,
    },
    /// Our Node does not exist; it is never created by us.
    #[error("node {0:?} not found; its labels are not written (a deleted Node is never re-created)")]
    NodeMissing(String),
}

impl PublishError {
    /// A short, stable reason for the publish-failure metric.
    pub fn reason(&self) -> &'static str {
        match self {
            PublishError::File(_) => "file",
            PublishError::Stdout(_) => "stdout",
            PublishError::Api { source: kube::Error::Api(s), .. } if s.code == 409 => "conflict",
            PublishError::Api { source: kube::Error::Api(s), .. } if s.code == 429 => "throttled",
            PublishError::Api { source: kube::Error::Api(s), .. } if s.code >= 500 => "server",
            PublishError::Api { source: kube::Error::Api(_), .. } => "refused",
            PublishError::Api { .. } => "connection",
            PublishError::NodeMissing(_) => "node-missing",
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
