//! A device source (and a few sysfs files) → [`Snapshot`]. Each source implements
//! [`DeviceSource`]: NVML (`nvml.rs`), the CUDA driver for integrated GPUs (`tegra.rs`) and
//! sysfs for GPUs bound to `vfio-pci` ([`vfio`], named from [`pci_ids`]); `implementation()` is
//! the one place a [`Source`] becomes its implementation, and the [`session`] chooses it once.
//! The labels and the writers read only the snapshot; the one other NVML reader is health
//! (`health/reading/nvml_reads.rs`, `health/reading/raw_events.rs`), through the same [`session`].
//!
//! Failure policy, per device: a call GFD treats as fatal (name, compute capability, MIG mode,
//! MIG enumeration, fabric info) and the memory query exclude that GPU from this pass; PCI info
//! only drops the label it feeds; a MIG device that cannot be read or named is skipped.
//! Each is recorded in [`Snapshot::issues`] with the source whose call failed (the caller logs
//! it when it starts and ends). Only the source's start and its device count (for vfio: the
//! PCI device list and pci.ids) fail the whole probe, with the source's own error type (a
//! [`SourceError`]: whether it is a start failure, its function, its hint), which [`ProbeError`]
//! wraps.

pub mod calls;
pub mod cuda;
mod nvml;
mod nvml_error;
pub mod pci;
pub mod pci_ids;
pub mod profile;
mod raw;
mod raw_topology;
pub mod session;
pub mod strategy;
pub mod sysfs;
mod tegra;
mod topology;
pub mod vfio;

pub use crate::snapshot::Source;
pub use nvml_error::NvmlSourceError;
pub use raw::clocks_event_reasons;
pub use session::Session;
pub use strategy::Strategy;
pub use tegra::CudaSourceError;
pub use vfio::VfioSourceError;

use crate::exit::Classify;
use crate::snapshot::{Issue, Snapshot};
use std::path::PathBuf;
use std::sync::Arc;

/// One device source: how a pass finds the GPUs. The session chooses one per session
/// ([`Session::device_source`]); a new source is one more implementation and one arm of
/// `implementation()`. Its names are its [`Source`]'s: `as_str` (snapshot, metrics), `driver`
/// (messages), and [`Strategy::of`] (the flag value, and how logs name it).
pub trait DeviceSource: Send + Sync {
    /// Which source this is (what the snapshot, the daemon and the metrics are told).
    fn source(&self) -> Source;
    /// Fills `snapshot`'s GPUs, driver versions and their issues through `session`.
    fn collect(
        &self,
        session: &Session,
        opts: &ProbeOptions,
        snapshot: &mut Snapshot,
    ) -> Result<(), ProbeError>;
}

/// The implementation of `source` (`wsl`: NVML under WSL): the one place a source is chosen.
fn implementation(source: Source, wsl: bool) -> Arc<dyn DeviceSource> {
    match source {
        Source::Nvml => Arc::new(nvml::NvmlSource { wsl }),
        Source::Cuda => Arc::new(tegra::CudaSource::default()),
        Source::Vfio => Arc::new(vfio::VfioSource),
    }
}

/// The library name the driver installs (what go-nvml loads too).
pub const DEFAULT_LIBRARY: &str = "libnvidia-ml.so.1";
/// The CUDA driver's library name (what GFD loads on integrated GPUs).
pub const DEFAULT_CUDA_LIBRARY: &str = "libcuda.so.1";

/// Every NVML function whose failure the probe records (the `function` of the error metric).
pub const NVML_FUNCTIONS: &[&str] = &[
    "nvmlInit",
    "nvmlDeviceGetCount_v2",
    "nvmlSystemGetDriverVersion",
    "nvmlSystemGetCudaDriverVersion_v2",
    "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetCudaComputeCapability",
    "nvmlDeviceGetMigMode",
    "nvmlDeviceGetGpuFabricInfo",
    "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetMigDeviceHandleByIndex",
    "nvmlDeviceGetGpuInstanceById",
    "nvmlDeviceGetGpuInstanceProfileInfo",
    "nvmlDeviceGetAttributes_v2",
    "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeInstanceId",
    "nvmlGpuInstanceGetInfo",
    "nvmlGpuInstanceGetComputeInstanceById",
    "nvmlComputeInstanceGetInfo_v2",
    "nvmlGpuInstanceGetComputeInstanceProfileInfo",
    // The topology functions (those `topology.rs` and `raw_topology.rs` call), read only with --extended-labels.
    "nvmlDeviceGetNvLinkState",
    "nvmlDeviceGetNvLinkVersion",
    "nvmlDeviceGetNvLinkRemoteDeviceType",
    "nvmlDeviceGetNvLinkRemotePciInfo_v2",
    "nvmlDeviceGetMaxPcieLinkGeneration",
    "nvmlDeviceGetMaxPcieLinkWidth",
    "nvmlDeviceGetNumaNodeId",
    "nvmlSystemGetConfComputeCapabilities",
];

/// Where the probe reads from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeOptions {
    /// Which device source (`--device-discovery-strategy`).
    pub strategy: Strategy,
    /// The NVML library: a name searched like the driver's, or a path.
    pub library: PathBuf,
    /// The CUDA driver library, for integrated GPUs.
    pub cuda_library: PathBuf,
    /// The host's root, where `/etc/nv_tegra_release` marks a Tegra system.
    pub host_root: PathBuf,
    /// A `pci.ids` file naming vfio GPUs; `None` for the system's, else the built-in copy.
    pub pci_ids: Option<PathBuf>,
    /// Where the system's pci.ids is looked for, in order ([`pci_ids::SYSTEM_PATHS`]; a test's
    /// own files in tests).
    pub pci_ids_search: Vec<PathBuf>,
    /// The root of sysfs (`/sys`).
    pub sysfs_root: PathBuf,
    /// The machine-type file; empty for none.
    pub machine_type_file: PathBuf,
    /// Also read the topology facts (NVLink, PCIe, NUMA, confidential computing, GPUDirect):
    /// only the extended labels use them, so a GFD-equivalent pass does not pay their NVML calls.
    pub topology: bool,
}

impl Default for ProbeOptions {
    fn default() -> ProbeOptions {
        ProbeOptions {
            strategy: Strategy::Auto,
            library: DEFAULT_LIBRARY.into(),
            cuda_library: DEFAULT_CUDA_LIBRARY.into(),
            host_root: "/".into(),
            pci_ids: None,
            pci_ids_search: pci_ids::SYSTEM_PATHS.iter().map(PathBuf::from).collect(),
            sysfs_root: "/sys".into(),
            machine_type_file: PathBuf::new(),
            topology: false,
        }
    }
}

/// What every device source's error says of itself, each answering with an exhaustive `match`
/// over its own variants, so a new source's error says how it fails or does not compile.
pub trait SourceError: Classify {
    /// The device source whose error this is.
    fn device_source(&self) -> Source;
    /// Whether the source could not start (what `--fail-on-init-error` is about).
    fn is_init(&self) -> bool;
    /// The source's function (or file) behind the error, for metrics.
    fn function(&self) -> &'static str;
    /// What to do about a start failure: the usual fix, if there is one.
    fn hint(&self) -> Option<&'static str>;
}

/// Why the probe produced no snapshot: the error of the source that failed, as that source says
/// it (messages are the source error's own).
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// NVML's.
    #[error(transparent)]
    Nvml(#[from] NvmlSourceError),
    /// The CUDA source's (integrated GPUs).
    #[error(transparent)]
    Cuda(#[from] CudaSourceError),
    /// vfio's.
    #[error(transparent)]
    Vfio(#[from] VfioSourceError),
}

impl ProbeError {
    /// NVML's "no NVIDIA driver found" with what the loader or NVML said.
    pub fn no_driver(detail: impl Into<String>) -> ProbeError {
        NvmlSourceError::NoDriver { detail: detail.into() }.into()
    }

    /// The source's own error: the one `match` over the sources.
    fn of_source(&self) -> &dyn SourceError {
        match self {
            ProbeError::Nvml(e) => e,
            ProbeError::Cuda(e) => e,
            ProbeError::Vfio(e) => e,
        }
    }

    /// The device source that failed.
    pub fn source(&self) -> Source {
        self.of_source().device_source()
    }

    /// The source's function (or file) behind the error, for metrics.
    pub fn function(&self) -> &'static str {
        self.of_source().function()
    }

    /// Whether this is an initialisation failure (what `--fail-on-init-error` is about).
    pub fn is_init(&self) -> bool {
        self.of_source().is_init()
    }

    /// What to do about an initialisation failure: the usual fix, for the source that failed.
    pub fn hint(&self) -> Option<&'static str> {
        self.of_source().hint()
    }
}

impl Classify for ProbeError {
    /// A driver that is missing or will not start is the node's, even where `--nvml-library` or
    /// `--cuda-library` points at the wrong file: the same file is right on another node.
    fn is_bad_configuration(&self) -> bool {
        self.of_source().is_bad_configuration()
    }
}

/// Probes the session's device source, then the files. On error, [`probe_files`] still gives
/// the node-level facts.
pub fn probe(session: &Session, opts: &ProbeOptions) -> Result<Snapshot, ProbeError> {
    let source = session.device_source(opts);
    let mut snapshot = Snapshot { source: source.source(), ..Snapshot::default() };
    source.collect(session, opts, &mut snapshot)?;
    let files = probe_files(session, opts);
    snapshot.machine_type = files.machine_type;
    snapshot.vgpu = files.vgpu;
    snapshot.issues.extend(files.issues);
    if opts.topology {
        snapshot.gpudirect = topology::gpudirect(&opts.sysfs_root, &mut snapshot.issues);
    }
    Ok(snapshot)
}

/// Whether this is an integrated-GPU node without NVML (JetPack 5), told without a driver.
pub use strategy::cuda_without_nvml;

/// The facts that do not need NVML: machine type and the vGPU scan (kept in `session`).
pub fn probe_files(session: &Session, opts: &ProbeOptions) -> Snapshot {
    let mut snapshot =
        Snapshot { machine_type: sysfs::machine_type(&opts.machine_type_file), ..Snapshot::default() };
    match session.vgpu(&opts.sysfs_root) {
        Ok(devices) => snapshot.vgpu = Some(devices),
        Err(e) => {
            snapshot.issues.push(Issue {
                device: None,
                function: "vGPU PCI scan".into(),
                error: e,
                effect: "vgpu labels omitted".into(),
                source: None,
            });
        }
    }
    snapshot
}
