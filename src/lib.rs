//! nvlabel: NVIDIA GPU node labels for Kubernetes, the same as GPU Feature Discovery's where
//! GFD is right, valid and deterministic where it is not.
//!
//! The flow is probe (NVML → [`snapshot::Snapshot`]) → labels (pure functions) → output.
#![deny(unsafe_code)]

pub mod cli;
pub mod config;
pub mod daemon;
pub mod duration;
pub mod http;
pub mod labels;
pub mod limits;
pub mod logging;
pub mod node;
pub mod output;
pub mod probe;
pub mod publish;
pub mod run;
pub mod select;
pub mod sharing;
pub mod snapshot;
