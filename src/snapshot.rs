//! The node as the probe saw it: plain data, serialisable, and the only input the labelers get.
//! `nvlabel probe` prints it as YAML and `--snapshot FILE` reads it back, so a real machine
//! becomes a test case without a GPU.

use serde::{Deserialize, Serialize};
use std::path::Path;

mod topology;
pub use topology::{ConfCompute, GpuDirect, NvLink, NvLinkLink, NvLinkRemote};

/// Everything one labelling pass knows about the node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    /// The device source that found the GPUs (NVML unless said).
    #[serde(default, skip_serializing_if = "Source::is_nvml")]
    pub source: Source,
    /// `nvmlSystemGetDriverVersion`; `None` when the call failed (or, off NVML, NVML is absent).
    #[serde(default)]
    pub driver_version: Option<String>,
    /// `nvmlSystemGetCudaDriverVersion` in NVML's integer form (12040 is 12.4); from CUDA,
    /// `cuDriverGetVersion`.
    #[serde(default)]
    pub cuda_driver_version: Option<i32>,
    /// The GPUs that answered every call the labels need, in NVML index order.
    #[serde(default)]
    pub gpus: Vec<Gpu>,
    /// The machine-type (DMI product name) file.
    #[serde(default)]
    pub machine_type: MachineType,
    /// NVIDIA PCI devices that are vGPUs; `None` when the PCI scan failed.
    #[serde(default)]
    pub vgpu: Option<Vec<VgpuDevice>>,
    /// What went wrong while probing: excluded devices and missing facts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub issues: Vec<Issue>,
    /// Confidential-computing capabilities; `None` when not supported or not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidential_compute: Option<ConfCompute>,
    /// GPUDirect kernel modules; `None` when not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpudirect: Option<GpuDirect>,
}

/// The device source: where the GPUs of a snapshot were found, the one name of it that the
/// probe, the snapshot file, the labels, the daemon and the metrics share (the flag value that
/// asks for one is `probe::Strategy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// NVML (WSL included).
    #[default]
    Nvml,
    /// The CUDA driver API: integrated GPUs (Jetson, IGX, Thor).
    Cuda,
    /// sysfs: GPUs bound to `vfio-pci`, with no driver to ask.
    Vfio,
}

impl Source {
    /// Whether this is NVML (the default, left out of a snapshot file).
    pub fn is_nvml(&self) -> bool {
        *self == Source::Nvml
    }

    /// Every source (what a lookup by another of its names walks).
    pub const ALL: [Source; 3] = [Source::Nvml, Source::Cuda, Source::Vfio];

    /// Its name in a snapshot file and as a metric's label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Nvml => "nvml",
            Source::Cuda => "cuda",
            Source::Vfio => "vfio",
        }
    }

    /// What it asks for the GPUs, as messages name it ("Failed to initialize CUDA"); the
    /// strategy that asks for it is `probe::Strategy::of`.
    pub fn driver(self) -> &'static str {
        match self {
            Source::Nvml => "NVML",
            Source::Cuda => "CUDA",
            Source::Vfio => "vfio-pci",
        }
    }
}

/// One physical GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    /// NVML index.
    pub index: u32,
    /// `nvmlDeviceGetName`, raw.
    pub name: String,
    /// `nvmlDeviceGetUUID`.
    #[serde(default)]
    pub uuid: Option<String>,
    /// PCI bus id as NVML reports it (`00000000:07:00.0`).
    #[serde(default)]
    pub pci_bus_id: Option<String>,
    /// PCI device id (the upper 16 bits of NVML's `pciDeviceId`); `None` when NVML reports 0.
    #[serde(default)]
    pub pci_device_id: Option<u16>,
    /// PCI class from sysfs (`0x030200` is a 3D controller); `None` when unreadable.
    #[serde(default)]
    pub pci_class: Option<u32>,
    /// Total memory in bytes; `None` when NVML could not say.
    #[serde(default)]
    pub memory_bytes: Option<u64>,
    /// CUDA compute capability `[major, minor]`.
    pub compute_capability: [i32; 2],
    /// MIG state; `None` when the GPU is not MIG capable.
    #[serde(default)]
    pub mig: Option<Mig>,
    /// Fabric (IMEX) state; `None` when not supported.
    #[serde(default)]
    pub fabric: Option<Fabric>,
    /// NVLink version and links; `None` when unknown (not read, or NVML failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink: Option<NvLink>,
    /// `nvmlDeviceGetMaxPcieLinkGeneration`; `None` when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_max_generation: Option<u32>,
    /// `nvmlDeviceGetMaxPcieLinkWidth` (lanes); `None` when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_max_width: Option<u32>,
    /// `nvmlDeviceGetNumaNodeId`; `None` when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<u32>,
}

/// MIG mode and the MIG devices of one GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mig {
    /// Current MIG mode.
    pub enabled: bool,
    /// MIG devices in index order (empty while disabled).
    #[serde(default)]
    pub devices: Vec<MigDevice>,
}

/// One MIG device and its attributes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigDevice {
    /// Index within the parent GPU.
    pub index: u32,
    /// MIG device UUID.
    #[serde(default)]
    pub uuid: Option<String>,
    /// Profile name as GFD writes it (`1g.5gb`, `1c.3g.20gb`, `1g.10gb.me`).
    pub profile: String,
    /// GPU instance id.
    pub gi_id: u32,
    /// Compute instance id.
    pub ci_id: u32,
    /// NVML GPU-instance profile id.
    pub gi_profile_id: u32,
    /// NVML compute-instance profile id.
    pub ci_profile_id: u32,
    /// `memorySizeMB` (MiB).
    pub memory_mib: u64,
    /// `multiprocessorCount`.
    pub multiprocessors: u32,
    /// `gpuInstanceSliceCount`.
    pub gpu_instance_slices: u32,
    /// `computeInstanceSliceCount`.
    pub compute_instance_slices: u32,
    /// `sharedCopyEngineCount`.
    pub copy_engines: u32,
    /// `sharedDecoderCount`.
    pub decoders: u32,
    /// `sharedEncoderCount`.
    pub encoders: u32,
    /// `sharedJpegCount`.
    pub jpeg_decoders: u32,
    /// `sharedOfaCount`.
    pub ofa: u32,
}

/// NVML fabric info of one GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fabric {
    /// Cluster UUID, canonical lower-case 8-4-4-4-12.
    pub cluster_uuid: String,
    /// Clique id.
    pub clique_id: u32,
    /// `nvmlGpuFabricState_t` (3 is completed).
    pub state: u8,
    /// `nvmlReturn_t` of the fabric registration (0 is success).
    pub status: u32,
}

/// The machine-type file and what reading it gave.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineType {
    /// The path read; empty means none was configured.
    #[serde(default)]
    pub path: String,
    /// The file's content, raw.
    #[serde(default)]
    pub content: Option<String>,
    /// Why it could not be read.
    #[serde(default)]
    pub error: Option<String>,
}

/// An NVIDIA PCI device that is a vGPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VgpuDevice {
    /// PCI address (`0000:07:00.0`).
    pub address: String,
    /// Host driver version from the vendor capability, when it has a driver record.
    #[serde(default)]
    pub host_driver_version: Option<String>,
    /// Host driver branch.
    #[serde(default)]
    pub host_driver_branch: Option<String>,
}

/// Something the probe could not read, and what that cost.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Issue {
    /// `"3"` for GPU 3, `"3:1"` for MIG device 1 of GPU 3, absent for node-wide facts.
    #[serde(default)]
    pub device: Option<String>,
    /// What failed: an NVML function or a file.
    pub function: String,
    /// The error.
    pub error: String,
    /// What the labels lose because of it.
    pub effect: String,
    /// The device source whose call failed (counted in the daemon's error metric under its
    /// name); `None` for the node's own files. Not in a snapshot file: a pass read back from
    /// one called no source.
    #[serde(skip)]
    pub source: Option<Source>,
}

/// Errors reading or writing a snapshot file.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The file could not be read.
    #[error("cannot read --snapshot {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not a valid snapshot.
    #[error("invalid snapshot {path}: {source}")]
    Parse {
        /// The file.
        path: String,
        /// The parser's message, with line and column.
        source: crate::yaml::YamlError,
    },
    /// The file holds no snapshot at all (empty, comments, a bare `---`).
    #[error("invalid snapshot {path}: it is empty; write one with `nvlabel probe > {path}`")]
    Empty {
        /// The file.
        path: String,
    },
    /// The snapshot could not be rendered as YAML.
    #[error("cannot render snapshot as YAML: {0}")]
    Render(#[source] serde_saphyr::ser::Error),
}

impl crate::exit::Classify for SnapshotError {
    /// A `--snapshot` stands in for the hardware: one that cannot be read is the node's, as a
    /// driver that cannot be loaded is; but a path that names nothing at all is a slip of the
    /// user's, whom only the command line can fix.
    fn is_bad_configuration(&self) -> bool {
        match self {
            SnapshotError::Read { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
            SnapshotError::Parse { .. } | SnapshotError::Empty { .. } | SnapshotError::Render(_) => false,
        }
    }
}

impl Gpu {
    /// GPU `index` named `name` with compute capability `compute_capability`, every other fact
    /// unknown (what a source that is not NVML starts from).
    pub fn new(index: u32, name: String, compute_capability: [i32; 2]) -> Gpu {
        Gpu {
            index,
            name,
            uuid: None,
            pci_bus_id: None,
            pci_device_id: None,
            pci_class: None,
            memory_bytes: None,
            compute_capability,
            mig: None,
            fabric: None,
            nvlink: None,
            pcie_max_generation: None,
            pcie_max_width: None,
            numa_node: None,
        }
    }
}

impl Snapshot {
    /// Reads a snapshot written by `nvlabel probe`.
    pub fn load(path: &Path) -> Result<Snapshot, SnapshotError> {
        let bytes = crate::limits::read(path, crate::limits::SNAPSHOT_FILE)
            .map_err(|source| SnapshotError::Read { path: path.display().to_string(), source })?;
        let text = String::from_utf8_lossy(&bytes);
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses snapshot YAML.
    pub fn from_yaml(text: &str) -> Result<Snapshot, SnapshotError> {
        Self::parse(text, "(text)")
    }

    /// Parses snapshot YAML from `path` (named in errors). A snapshot is never blank: an empty
    /// file is a mistake (a failed or unfinished `nvlabel probe`), not a machine without GPUs.
    fn parse(text: &str, path: &str) -> Result<Snapshot, SnapshotError> {
        if crate::yaml::is_blank(text) {
            return Err(SnapshotError::Empty { path: path.into() });
        }
        crate::yaml::from_str(text).map_err(|source| SnapshotError::Parse { path: path.into(), source })
    }

    /// Renders the snapshot as YAML.
    pub fn to_yaml(&self) -> Result<String, SnapshotError> {
        serde_saphyr::to_string(self).map_err(SnapshotError::Render)
    }
}
