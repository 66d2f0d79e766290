//! nvlabel: NVIDIA GPU node labels for Kubernetes, the same as GPU Feature Discovery's where
//! GFD is right, valid and deterministic where it is not.
//!
//! The flow is probe (a device source → [`snapshot::Snapshot`]) → labels (pure functions) → output.
#![deny(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod app;
pub mod clock;
pub mod config;
pub mod daemon;
pub mod duration;
pub mod exit;
pub mod health;
pub mod http;
pub mod kubeapi;
pub mod labels;
pub mod limits;
pub mod logging;
pub mod pass;
pub mod pow;
pub mod probe;
pub mod publish;
pub mod sharing;
pub mod sharing_check;
pub mod snapshot;
pub mod template;

pub mod troubles;
pub mod worker;
pub mod yaml;

/// The async runtime nvlabel runs on. NVML work runs on threads of its own ([`worker`]); a small,
/// fixed set of threads keeps memory flat (each new thread can bring a new malloc arena, and tokio
/// would otherwise retire an idle blocking thread after 10 s and start another).
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(1)
        .thread_keep_alive(std::time::Duration::from_secs(24 * 3600))
        .enable_all()
        .build()
}
