//! GPUs bound to `vfio-pci` (passed through to virtual machines), found through sysfs as GFD's
//! vfio backend finds them: go-nvlib's `nvpci.GetGPUs` (NVIDIA functions of a VGA or 3D
//! controller class that are not SR-IOV virtual functions, sorted by bus address), kept only when
//! bound to `vfio-pci`. No driver answers for them, so the name comes from pci.ids and the
//! compute capability is unknown (-1, -1).
//!
//! Where GFD fails the whole scan on one unreadable device, this excludes that device and says
//! why in an [`Issue`]. Only the files a label needs are read: not `resource` (the BAR sizes GFD
//! publishes as `gpu.memory`, which nvlabel omits), nor the IOMMU and subsystem files. Its
//! failures are [`VfioSourceError`]s.

use super::pci_ids::{PciIds, PciIdsError, NVIDIA_VENDOR};
use super::{DeviceSource, ProbeError, ProbeOptions, Session, SourceError};
use crate::exit::Classify;
use crate::snapshot::{Gpu, Issue, Snapshot, Source};
use std::path::{Path, PathBuf};

/// The vfio source: sysfs, named from the session's pci.ids.
pub(super) struct VfioSource;

impl DeviceSource for VfioSource {
    fn source(&self) -> Source {
        Source::Vfio
    }

    fn collect(&self, session: &Session, opts: &ProbeOptions, snap: &mut Snapshot) -> Result<(), ProbeError> {
        let ids = session.pci_ids(opts).map_err(VfioSourceError::PciIds)?;
        let Found { gpus, issues } = gpus(&opts.sysfs_root, &ids).map_err(VfioSourceError::Devices)?;
        snap.gpus = gpus;
        snap.issues = issues;
        Ok(())
    }
}

/// Why the vfio source gave no snapshot.
#[derive(Debug, thiserror::Error)]
pub enum VfioSourceError {
    /// The PCI devices could not be listed.
    #[error("error getting devices: {0}")]
    Devices(#[source] VfioError),
    /// The `--pci-ids` file could not be read.
    #[error("{0}")]
    PciIds(#[source] PciIdsError),
}

impl Classify for VfioSourceError {
    fn is_bad_configuration(&self) -> bool {
        match self {
            VfioSourceError::Devices(e) => e.is_bad_configuration(),
            VfioSourceError::PciIds(e) => e.is_bad_configuration(),
        }
    }
}

impl SourceError for VfioSourceError {
    fn device_source(&self) -> Source {
        Source::Vfio
    }

    /// vfio starts no driver: nothing of it is a start failure.
    fn is_init(&self) -> bool {
        match self {
            VfioSourceError::Devices(_) | VfioSourceError::PciIds(_) => false,
        }
    }

    fn function(&self) -> &'static str {
        match self {
            VfioSourceError::Devices(_) => "sysfs PCI devices",
            VfioSourceError::PciIds(_) => "pci.ids",
        }
    }

    fn hint(&self) -> Option<&'static str> {
        match self {
            VfioSourceError::Devices(_) | VfioSourceError::PciIds(_) => None,
        }
    }
}

/// The driver a GPU must be bound to for this backend to keep it.
pub const VFIO_DRIVER: &str = "vfio-pci";
/// GFD's name for a device id pci.ids does not know (go-nvlib `nvpci.UnknownDeviceString`).
pub const UNKNOWN_DEVICE: &str = "UNKNOWN_DEVICE";
/// A VGA controller (older GPUs, and GeForce boards).
const VGA_CLASS: u32 = 0x030000;
/// A 3D controller (data-centre GPUs).
const THREE_D_CLASS: u32 = 0x030200;
/// The effect of an unreadable file of a GPU.
const EXCLUDED: &str = "GPU excluded from this pass";
/// The effect of an unreadable vendor or class: the device may or may not be a GPU.
const UNSURE: &str = "device skipped this pass: it may be an NVIDIA GPU";

/// Why no vfio scan could be made.
#[derive(Debug, thiserror::Error)]
pub enum VfioError {
    /// The PCI device directory could not be listed.
    #[error("unable to read PCI bus devices {path}: {source}")]
    List {
        /// The directory (`<sysfs>/bus/pci/devices`).
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl crate::exit::Classify for VfioError {
    fn is_bad_configuration(&self) -> bool {
        match self {
            VfioError::List { .. } => false,
        }
    }
}

/// Why one sysfs file of a device gave no value.
#[derive(Debug, thiserror::Error)]
enum FileError {
    /// It could not be read or resolved.
    #[error("{0}")]
    Read(#[source] std::io::Error),
    /// It holds no number of the expected width.
    #[error("{value:?} is not a {bits}-bit number")]
    Parse {
        /// The content, trimmed.
        value: String,
        /// The width expected.
        bits: u32,
    },
}

/// What a scan found: the GPUs kept, and an issue for each device left out.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The GPUs bound to `vfio-pci`, indexed in bus-address order.
    pub gpus: Vec<Gpu>,
    /// Each device left out because a file failed.
    pub issues: Vec<Issue>,
}

/// The GPUs under `<sysfs_root>/bus/pci/devices` bound to `vfio-pci`, indexed in bus-address
/// order, named from `ids`; with an issue for each device left out because a file failed.
pub fn gpus(sysfs_root: &Path, ids: &PciIds) -> Result<Found, VfioError> {
    let dir = sysfs_root.join("bus/pci/devices");
    let list_error = |source| VfioError::List { path: dir.display().to_string(), source };
    let mut addresses = std::fs::read_dir(&dir)
        .map_err(list_error)?
        .map(|entry| entry.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(list_error)?;
    addresses.sort_by_cached_key(|a| (bus_order(a), a.clone()));
    let mut gpus = Vec::new();
    let mut issues = Vec::new();
    for address in addresses {
        let device = Device { path: dir.join(&address), address };
        match device.gpu(ids) {
            Ok(Some(mut gpu)) => {
                gpu.index = gpus.len() as u32;
                gpus.push(gpu);
            }
            Ok(None) => {}
            Err(issue) => issues.push(issue),
        }
    }
    Ok(Found { gpus, issues })
}

/// go-nvlib's sort key: the address without `:` and `.`, read as one hex number (0 when it is
/// not one), which is the address order for the kernel's fixed-width names.
fn bus_order(address: &str) -> u64 {
    let digits: String = address.chars().filter(|c| *c != ':' && *c != '.').collect();
    u64::from_str_radix(&digits, 16).unwrap_or(0)
}

/// One entry of the PCI device directory.
struct Device {
    /// `<sysfs>/bus/pci/devices/<address>`.
    path: PathBuf,
    /// Its name there (`0000:41:00.0`).
    address: String,
}

impl Device {
    /// The GPU this device is, `None` when the backend does not keep it, or why it cannot say.
    fn gpu(&self, ids: &PciIds) -> Result<Option<Gpu>, Issue> {
        if self.number("vendor", 16, UNSURE)? != u64::from(NVIDIA_VENDOR) {
            return Ok(None);
        }
        let class = self.number("class", 32, UNSURE)? as u32;
        if class != VGA_CLASS && class != THREE_D_CLASS {
            return Ok(None);
        }
        // A virtual function has this link to its physical function; GFD never lists VFs as GPUs.
        if std::fs::symlink_metadata(self.path.join("physfn")).is_ok() {
            return Ok(None);
        }
        let driver = self.driver()?;
        if driver.as_deref() != Some(VFIO_DRIVER) {
            // GFD's info line: a GPU the host keeps for itself is a choice, not a fault.
            tracing::info!(
                "Device not bound to 'vfio-pci'; device: {} driver: '{}'",
                self.address,
                driver.unwrap_or_default()
            );
            return Ok(None);
        }
        let device = self.number("device", 16, EXCLUDED)? as u16;
        let numa = self.numa_node()?;
        let name = match ids.nvidia_device_name(device) {
            Some(name) => name.to_string(),
            None => {
                tracing::warn!(
                    device = %self.address,
                    "unable to get device name: no device {device:04x} of vendor 10de in {}; named {UNKNOWN_DEVICE}",
                    ids.source()
                );
                UNKNOWN_DEVICE.to_string()
            }
        };
        // No driver answers: compute is GFD's -1/-1, and (decisions.md) a BAR aperture is not the
        // GPU's memory, so none is known.
        Ok(Some(Gpu {
            pci_bus_id: Some(self.address.clone()),
            pci_device_id: Some(device),
            pci_class: Some(class),
            numa_node: numa,
            ..Gpu::new(0, name, [-1, -1])
        }))
    }

    /// The driver bound: the last component of where the `driver` link leads; none when there
    /// is no link or it leads nowhere (as go-nvlib's `getDriver`).
    fn driver(&self) -> Result<Option<String>, Issue> {
        let link = self.path.join("driver");
        match std::fs::canonicalize(&link) {
            Ok(target) => Ok(target.file_name().map(|n| n.to_string_lossy().into_owned())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.issue(&link, FileError::Read(e), EXCLUDED)),
        }
    }

    /// `numa_node`: a node, or `None` for the kernel's -1 (no affinity).
    fn numa_node(&self) -> Result<Option<u32>, Issue> {
        let (path, text) = self.read("numa_node", EXCLUDED)?;
        match parse_signed(&text) {
            Some(n) if n < 0 => Ok(None),
            Some(n) if n <= i64::from(u32::MAX) => Ok(Some(n as u32)),
            _ => Err(self.issue(&path, FileError::Parse { value: text, bits: 32 }, EXCLUDED)),
        }
    }

    /// A number file (`vendor`, `class`, `device`) of at most `bits` bits, read as go-nvlib does.
    fn number(&self, file: &str, bits: u32, effect: &str) -> Result<u64, Issue> {
        let (path, text) = self.read(file, effect)?;
        parse_unsigned(&text)
            .filter(|n| n >> bits == 0)
            .ok_or_else(|| self.issue(&path, FileError::Parse { value: text, bits }, effect))
    }

    /// A file of the device, trimmed.
    fn read(&self, file: &str, effect: &str) -> Result<(PathBuf, String), Issue> {
        let path = self.path.join(file);
        match crate::limits::read(&path, crate::limits::SYSFS_FILE) {
            Ok(bytes) => Ok((path, String::from_utf8_lossy(&bytes).trim().to_string())),
            Err(e) => Err(self.issue(&path, FileError::Read(e), effect)),
        }
    }

    fn issue(&self, path: &Path, error: FileError, effect: &str) -> Issue {
        // The file's name is the "function" (a metric label: one series per kind of file, not per
        // device); the path is in the error.
        let file = path.file_name().map_or_else(String::new, |f| f.to_string_lossy().into_owned());
        Issue {
            device: Some(self.address.clone()),
            function: format!("sysfs {file}"),
            error: format!("{}: {error}", path.display()),
            effect: effect.into(),
            source: Some(Source::Vfio),
        }
    }
}

/// Go's `ParseUint(s, 0, 64)` for what sysfs writes: `0x` hex, else decimal.
fn parse_unsigned(text: &str) -> Option<u64> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// Go's `ParseInt(s, 0, 64)` for what sysfs writes (`-1`, `0`, `1`).
fn parse_signed(text: &str) -> Option<i64> {
    match text.strip_prefix('-') {
        Some(rest) => parse_unsigned(rest).and_then(|n| i64::try_from(n).ok()).map(|n| -n),
        None => parse_unsigned(text).and_then(|n| i64::try_from(n).ok()),
    }
}

#[cfg(test)]
#[path = "vfio_tests.rs"]
mod tests;
