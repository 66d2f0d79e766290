//! A device source (and a few sysfs files) → [`Snapshot`]. Each source implements
//! [`DeviceSource`]: NVML (`nvml.rs`), the CUDA driver for integrated GPUs (`tegra.rs`) and
//! sysfs for GPUs bound to `vfio-pci` ([`vfio`], named from [`pci_ids`]); `implementation()` is
//! the one place a [`Source`] becomes its implementation, and the [`session`] chooses it once.
//! The labels and the writers read only the snapshot; the one other NVML reader is health
//! (`health/nvml.rs`, `health/raw_events.rs`), through the same [`session`].
//!
//! Failure policy, per device: a call GFD treats as fatal (name, compute capability, MIG mode,
//! MIG enumeration, fabric info) and the memory query exclude that GPU from this pass; PCI info
//! only drops the label it feeds; a MIG device that cannot be read or named is skipped.
//! Each is recorded in [`Snapshot::issues`] with the source whose call failed (the caller logs
//! it when it starts and ends). Only the source's start and its device count (for vfio: the
//! PCI device list and pci.ids) fail the whole probe.

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
pub mod source;
pub mod sysfs;
mod tegra;
mod topology;
pub mod vfio;

pub use crate::snapshot::Source;
pub use raw::clocks_event_reasons;
pub use session::Session;
pub use source::Strategy;

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

/// Why the probe produced no snapshot.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The NVML library is missing or the driver is not loaded.
    #[error("no NVIDIA driver found: {detail}")]
    NoDriver {
        /// What the loader or NVML said.
        detail: String,
    },
    /// NVML is there but would not initialise.
    #[error("failed to initialize NVML from {library}: {}", nvml::describe(source))]
    Init {
        /// The library loaded.
        library: String,
        /// NVML's error.
        source: nvml_wrapper::error::NvmlError,
    },
    /// The number of GPUs is unknown, so nothing can be labelled.
    #[error("error getting devices: nvmlDeviceGetCount_v2: {}", nvml::describe(.0))]
    DeviceCount(nvml_wrapper::error::NvmlError),
    /// The CUDA driver (integrated GPUs) did not load or start.
    #[error("no CUDA driver found: {0}")]
    Cuda(#[source] cuda::CudaOpenError),
    /// CUDA could not count its GPUs.
    #[error("error getting devices: {0}")]
    CudaCount(#[source] cuda::CudaError),
    /// The PCI devices could not be listed (vfio).
    #[error("error getting devices: {0}")]
    Vfio(#[source] vfio::VfioError),
    /// The `--pci-ids` file could not be read (vfio).
    #[error("{0}")]
    PciIds(#[source] pci_ids::PciIdsError),
    /// The other side (labelling or health) is initialising NVML: not waited for, so a hung
    /// `nvmlInit` stalls only the side that called it.
    #[error("NVML is being initialised by the other side for {}; this one goes without it and tries again", humantime::format_duration(*.0))]
    Opening(std::time::Duration),
}

impl Classify for ProbeError {
    /// A driver that is missing or will not start is the node's, even where `--nvml-library` or
    /// `--cuda-library` points at the wrong file: the same file is right on another node.
    fn is_bad_configuration(&self) -> bool {
        match self {
            ProbeError::NoDriver { .. }
            | ProbeError::Init { .. }
            | ProbeError::DeviceCount(_)
            | ProbeError::Opening(_) => false,
            ProbeError::Cuda(e) => e.is_bad_configuration(),
            ProbeError::CudaCount(e) => e.is_bad_configuration(),
            ProbeError::Vfio(e) => e.is_bad_configuration(),
            ProbeError::PciIds(e) => e.is_bad_configuration(),
        }
    }
}

impl ProbeError {
    /// The device source that failed.
    pub fn source(&self) -> Source {
        match self {
            ProbeError::NoDriver { .. }
            | ProbeError::Init { .. }
            | ProbeError::DeviceCount(_)
            | ProbeError::Opening(_) => Source::Nvml,
            ProbeError::Cuda(_) | ProbeError::CudaCount(_) => Source::Cuda,
            ProbeError::Vfio(_) | ProbeError::PciIds(_) => Source::Vfio,
        }
    }

    /// The source's function (or file) behind the error, for metrics.
    pub fn function(&self) -> &'static str {
        match self {
            ProbeError::NoDriver { .. } | ProbeError::Init { .. } | ProbeError::Opening(_) => "nvmlInit",
            ProbeError::DeviceCount(_) => "nvmlDeviceGetCount_v2",
            ProbeError::Cuda(_) => "cuInit",
            ProbeError::CudaCount(e) => e.function,
            ProbeError::Vfio(_) => "sysfs PCI devices",
            ProbeError::PciIds(_) => "pci.ids",
        }
    }

    /// Whether this is an initialisation failure (what `--fail-on-init-error` is about).
    pub fn is_init(&self) -> bool {
        matches!(self, ProbeError::NoDriver { .. } | ProbeError::Init { .. } | ProbeError::Cuda(_))
    }

    /// What to do about an initialisation failure: the usual fix, for the source that failed.
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            ProbeError::NoDriver { .. } | ProbeError::Init { .. } => Some(
                "install the driver or point --nvml-library at its libnvidia-ml.so.1 (on Jetson, IGX or Thor: --device-discovery-strategy=tegra, or let nvlabel see the host's /etc/nv_tegra_release through --host-root); --fail-on-init-error=false labels this node without GPUs",
            ),
            // The driver is there: non-root, the GPU's device nodes are what it cannot open.
            ProbeError::Cuda(cuda::CudaOpenError::Init { source, .. }) if source.code == cuda::NO_DEVICE => Some(
                "the CUDA driver loaded but sees no GPU: on Jetson, IGX and Thor this usually means this process (its uid and groups) cannot open the GPU's device nodes (/dev/nvhost-*, /dev/nvmap, /dev/nvgpu/igpu0/*, /dev/nvidia*; usually group video, mode 0660): run it with that group among its supplemental groups, e.g. the video group; --fail-on-init-error=false labels this node without GPUs",
            ),
            ProbeError::Cuda(_) => Some(
                "on Jetson, IGX and Thor the CUDA driver comes with JetPack: give the container the host's libcuda.so.1 (the NVIDIA container runtime mounts it) or point --cuda-library at it; --fail-on-init-error=false labels this node without GPUs",
            ),
            _ => None,
        }
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
pub use source::cuda_without_nvml;

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
