//! How an NVML error reads in the snapshot's issues and the logs; below the walk (`nvml.rs`), the
//! topology reads (`topology.rs`) and the CUDA source's NVML driver version (`tegra.rs`), which
//! each report with it. And NVML's own source error, [`NvmlSourceError`]: why NVML gave no
//! snapshot (`session.rs` opens it, `nvml.rs` counts its GPUs).

use super::{Source, SourceError};
use crate::exit::Classify;
use nvml_wrapper::error::NvmlError;

/// Why NVML gave no snapshot.
#[derive(Debug, thiserror::Error)]
pub enum NvmlSourceError {
    /// The NVML library is missing or the driver is not loaded.
    #[error("no NVIDIA driver found: {detail}")]
    NoDriver {
        /// What the loader or NVML said.
        detail: String,
    },
    /// NVML is there but would not initialise.
    #[error("failed to initialize NVML from {library}: {}", describe(source))]
    Init {
        /// The library loaded.
        library: String,
        /// NVML's error.
        source: NvmlError,
    },
    /// The number of GPUs is unknown, so nothing can be labelled.
    #[error("error getting devices: nvmlDeviceGetCount_v2: {}", describe(.0))]
    DeviceCount(NvmlError),
    /// The other side (labelling or health) is initialising NVML: not waited for, so a hung
    /// `nvmlInit` stalls only the side that called it.
    #[error("NVML is being initialised by the other side for {}; this one goes without it and tries again", humantime::format_duration(*.0))]
    Opening(std::time::Duration),
}

impl Classify for NvmlSourceError {
    /// A driver that is missing or will not start is the node's, even where `--nvml-library`
    /// points at the wrong file: the same file is right on another node.
    fn is_bad_configuration(&self) -> bool {
        match self {
            NvmlSourceError::NoDriver { .. }
            | NvmlSourceError::Init { .. }
            | NvmlSourceError::DeviceCount(_)
            | NvmlSourceError::Opening(_) => false,
        }
    }
}

impl SourceError for NvmlSourceError {
    fn device_source(&self) -> Source {
        Source::Nvml
    }

    fn is_init(&self) -> bool {
        match self {
            NvmlSourceError::NoDriver { .. } | NvmlSourceError::Init { .. } => true,
            // An open in progress on the other side is not this side's failure to start.
            NvmlSourceError::DeviceCount(_) | NvmlSourceError::Opening(_) => false,
        }
    }

    fn function(&self) -> &'static str {
        match self {
            NvmlSourceError::NoDriver { .. } | NvmlSourceError::Init { .. } | NvmlSourceError::Opening(_) => {
                "nvmlInit"
            }
            NvmlSourceError::DeviceCount(_) => "nvmlDeviceGetCount_v2",
        }
    }

    fn hint(&self) -> Option<&'static str> {
        match self {
            NvmlSourceError::NoDriver { .. } | NvmlSourceError::Init { .. } => Some(
                "install the driver or point --nvml-library at its libnvidia-ml.so.1 (on Jetson, IGX or Thor: --device-discovery-strategy=tegra, or let nvlabel see the host's /etc/nv_tegra_release through --host-root); --fail-on-init-error=false labels this node without GPUs",
            ),
            NvmlSourceError::DeviceCount(_) | NvmlSourceError::Opening(_) => None,
        }
    }
}

/// The error's name and text, as the snapshot's issues and the logs show it.
pub(super) fn describe(e: &NvmlError) -> String {
    match e {
        // nvml-wrapper's text misspells "inaccessible".
        NvmlError::GpuLost => "GpuLost: the GPU fell off the bus or has otherwise become inaccessible".into(),
        // The variant's name alone: its fields (a symbol, a loader error) are in the text, and
        // their Debug form is no part of a log line.
        e => {
            let debug = format!("{e:?}");
            format!("{}: {e}", debug.split(['(', ' ', '{']).next().unwrap_or_default())
        }
    }
}
