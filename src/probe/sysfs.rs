//! Facts NVML does not give: PCI class (`gpu.mode`), the vGPU capability in PCI config space,
//! and the DMI machine type. All paths hang off a configurable root so tests use a fake tree.

use crate::snapshot::{MachineType, VgpuDevice};
use std::path::{Path, PathBuf};

/// NVIDIA's PCI vendor id as sysfs writes it.
const NVIDIA_VENDOR: &str = "0x10de";
/// Bytes of config space a privileged reader sees; an unprivileged container gets only 64.
const FULL_CONFIG_LEN: usize = 256;

/// Why the vGPU scan failed (the whole scan fails, as in GFD, and no vGPU label is written).
#[derive(Debug, thiserror::Error)]
pub enum VgpuScanError {
    /// A sysfs file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The config space is truncated, as it is without privilege.
    #[error(
        "entire PCI configuration is not read for device {0}. Please run with privileges that \
         can read the full PCI configuration space (only {1} bytes readable)"
    )]
    Truncated(String, usize),
}

/// The sysfs address of an NVML bus id: lower case, and an 8-digit domain cut to 4.
pub fn sysfs_address(bus_id: &str) -> String {
    let id = bus_id.to_ascii_lowercase();
    let b = id.as_bytes();
    if id.starts_with("0000") && b.len() > 8 && b[8] == b':' && b[4..8].iter().all(u8::is_ascii_hexdigit) {
        id[4..].to_string()
    } else {
        id
    }
}

/// Reads `<root>/bus/pci/devices/<address>/class` (`0x030200`).
pub fn pci_class(sysfs_root: &Path, bus_id: &str) -> Result<u32, String> {
    let path = sysfs_root.join("bus/pci/devices").join(sysfs_address(bus_id)).join("class");
    let bytes = crate::limits::read(&path, crate::limits::SYSFS_FILE)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    parse_hex(text.trim()).ok_or_else(|| format!("{}: not a hex class: {:?}", path.display(), text.trim()))
}

fn parse_hex(s: &str) -> Option<u32> {
    u32::from_str_radix(s.strip_prefix("0x").unwrap_or(s), 16).ok()
}

/// Reads the machine-type file; an empty path means none is configured.
pub fn machine_type(path: &Path) -> MachineType {
    let shown = path.display().to_string();
    if shown.is_empty() {
        return MachineType::default();
    }
    match crate::limits::read(path, crate::limits::SYSFS_FILE) {
        Ok(bytes) => MachineType {
            path: shown,
            content: Some(String::from_utf8_lossy(&bytes).into_owned()),
            error: None,
        },
        Err(e) => MachineType { path: shown, content: None, error: Some(e.to_string()) },
    }
}

/// Scans every NVIDIA PCI device for the vGPU vendor capability, counting the config-space
/// reads in `config_reads` (the dear part of the scan).
pub fn vgpu_scan(sysfs_root: &Path, config_reads: &mut u64) -> Result<Vec<VgpuDevice>, VgpuScanError> {
    let dir = sysfs_root.join("bus/pci/devices");
    let read = |p: PathBuf| {
        crate::limits::read(&p, crate::limits::SYSFS_FILE)
            .map_err(|source| VgpuScanError::Read { path: p.display().to_string(), source })
    };
    let mut entries: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        // No PCI bus in this root at all: nothing to scan, no vGPU.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(VgpuScanError::Read { path: dir.display().to_string(), source }),
    };
    entries.sort();
    let mut found = Vec::new();
    for dev in entries {
        let vendor = read(dev.join("vendor"))?;
        if String::from_utf8_lossy(&vendor).trim() != NVIDIA_VENDOR {
            continue;
        }
        read(dev.join("class"))?;
        *config_reads += 1;
        let config = read(dev.join("config"))?;
        let address = dev.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if config.len() < FULL_CONFIG_LEN {
            return Err(VgpuScanError::Truncated(address, config.len()));
        }
        if let Some(cap) = vendor_capability(&config).filter(|c| is_vgpu(c)) {
            let (host_driver_version, host_driver_branch) = match host_driver(cap) {
                Some((v, b)) => (Some(v), Some(b)),
                None => (None, None),
            };
            found.push(VgpuDevice { address, host_driver_version, host_driver_branch });
        }
    }
    Ok(found)
}

/// The first vendor-specific capability (id 0x09) of a config space, bounded to the buffer.
pub fn vendor_capability(config: &[u8]) -> Option<&[u8]> {
    const STATUS: usize = 0x06;
    const CAP_LIST: u8 = 0x10;
    const CAP_POINTER: usize = 0x34;
    if config.get(STATUS)? & CAP_LIST == 0 {
        return None;
    }
    let mut seen = [false; 256];
    let mut pos = *config.get(CAP_POINTER)? as usize;
    loop {
        let id = *config.get(pos)?;
        // A repeated position is a loop in the list; GFD stops there too.
        if id == 0xff || seen[pos] {
            return None;
        }
        seen[pos] = true;
        if id == 0x09 {
            let len = *config.get(pos + 2)? as usize;
            return config.get(pos..(pos + len).min(config.len()));
        }
        pos = *config.get(pos + 1)? as usize;
        if pos == 0 {
            return None;
        }
    }
}

/// A vendor capability is a vGPU's when it carries the `VF` signature.
pub fn is_vgpu(cap: &[u8]) -> bool {
    cap.len() >= 5 && cap[3] == 0x56 && cap[4] == 0x46
}

/// The host driver `(version, branch)` record of a vGPU capability.
pub fn host_driver(cap: &[u8]) -> Option<(String, String)> {
    let mut pos = 5;
    while pos < cap.len() && cap[pos] != 0 {
        let step = *cap.get(pos + 1)? as usize;
        // A zero-length record would loop forever; GFD hangs here, we give up.
        if step == 0 {
            return None;
        }
        pos += step;
    }
    if pos + 2 + 10 + 10 > cap.len() {
        return None;
    }
    let text = |b: &[u8]| String::from_utf8_lossy(b).trim_matches('\0').to_string();
    Some((text(&cap[pos + 2..pos + 12]), text(&cap[pos + 12..pos + 22])))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GFD's vGPU mock capability: `09 68 1b 56 46 | 00 16 | "460.16" | "r460_00"`.
    fn gfd_mock_capability() -> Vec<u8> {
        let mut cap = vec![0x09, 0x68, 0x1b, 0x56, 0x46, 0x00, 0x16];
        cap.extend(b"460.16\0\0\0\0");
        cap.extend(b"r460_00\0\0\0");
        cap
    }

    fn config_with(cap: &[u8], at: usize) -> Vec<u8> {
        let mut config = vec![0u8; 256];
        config[0x06] = 0x10;
        config[0x34] = at as u8;
        config[at..at + cap.len()].copy_from_slice(cap);
        config
    }

    #[test]
    fn decodes_gfd_mock_vgpu() {
        let config = config_with(&gfd_mock_capability(), 0x68);
        let cap = vendor_capability(&config).unwrap();
        assert!(is_vgpu(cap));
        assert_eq!(host_driver(cap), Some(("460.16".into(), "r460_00".into())));
    }

    #[test]
    fn passthrough_capability_is_not_vgpu() {
        let mut cap = vec![0x09, 0x00, 20];
        cap.resize(20, 0x11);
        let config = config_with(&cap, 0x40);
        assert!(!is_vgpu(vendor_capability(&config).unwrap()));
    }

    #[test]
    fn loops_and_truncation_do_not_hang_or_panic() {
        let mut config = vec![0u8; 256];
        config[0x06] = 0x10;
        config[0x34] = 0x40;
        config[0x40] = 0x01;
        config[0x41] = 0x40; // points at itself
        assert_eq!(vendor_capability(&config), None);
        let cap = [0x09, 0, 7, 0x56, 0x46, 0x01, 0x00];
        assert_eq!(host_driver(&cap), None, "zero-length record");
        let short = [0x09, 0, 0xff, 0x56, 0x46, 0x00];
        assert_eq!(host_driver(&short), None);
        assert_eq!(vendor_capability(&[0u8; 8]), None);
    }

    #[test]
    fn sysfs_addresses_follow_gfd() {
        assert_eq!(sysfs_address("00000000:3B:00.0"), "0000:3b:00.0");
        assert_eq!(sysfs_address("0000:3b:00.0"), "0000:3b:00.0");
        assert_eq!(sysfs_address("00000001:3B:00.0"), "0001:3b:00.0");
        assert_eq!(sysfs_address("0001:3B:00.0"), "0001:3b:00.0");
    }
}
