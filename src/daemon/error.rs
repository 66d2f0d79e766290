//! Why the daemon, or a one-shot run, stopped with an error; each says whether it is a bad
//! configuration by asking the error it wraps.

use crate::exit::Classify;
use crate::pass::PassError;
use crate::publish::{PublishError, SetupError};

/// Why the daemon stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// A pass failed in a way that ends the process: any failure of a one-shot run's pass; in
    /// the daemon, only NVML init with `--fail-on-init-error`.
    #[error(transparent)]
    Pass(#[from] PassError),
    /// Publishing failed in a one-shot run.
    #[error(transparent)]
    Publish(#[from] PublishError),
    /// The writer could not be set up.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// The config watch could not be set up.
    #[error("cannot watch the configuration: {0}")]
    Watch(#[from] notify::Error),
    /// A thread of the daemon could not be started.
    #[error(transparent)]
    Thread(#[from] ThreadError),
    /// GPU health could not be started.
    #[error(transparent)]
    Health(#[from] crate::health::task::HealthError),
    /// The HTTP endpoint could not be started.
    #[error(transparent)]
    Serve(#[from] crate::http::ServeError),
    /// The API client could not be made.
    #[error(transparent)]
    Client(#[from] crate::kubeapi::ClientError),
    /// `--metrics-addr` is not an address.
    #[error(transparent)]
    ListenAddr(#[from] crate::http::ListenAddrError),
    /// The labelling loop panicked.
    #[error("the labelling loop panicked: {0}")]
    Panicked(#[source] tokio::task::JoinError),
}

impl Classify for DaemonError {
    fn is_bad_configuration(&self) -> bool {
        match self {
            DaemonError::Pass(e) => e.is_bad_configuration(),
            DaemonError::Publish(e) => e.is_bad_configuration(),
            DaemonError::Setup(e) => e.is_bad_configuration(),
            DaemonError::Health(e) => e.is_bad_configuration(),
            DaemonError::Serve(e) => e.is_bad_configuration(),
            DaemonError::Client(e) => e.is_bad_configuration(),
            DaemonError::ListenAddr(e) => e.is_bad_configuration(),
            DaemonError::Watch(_) | DaemonError::Thread(_) | DaemonError::Panicked(_) => false,
        }
    }
}

/// A thread could not be started.
#[derive(Debug, thiserror::Error)]
#[error("cannot start the {0} thread: {1}")]
pub struct ThreadError(pub &'static str, #[source] pub std::io::Error);
