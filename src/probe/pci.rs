//! The PCI bus as sysfs lists it, looked at every pass for the price of one directory listing.
//! Vendor and class are read again only when the listing changes, and config space (a read traps
//! to the hypervisor on a VM: 24 ms on a cloud H100) only when the NVIDIA functions change, since
//! the vGPU capability it holds cannot change while the device stays.

use super::sysfs::{self, VgpuScanError};
use crate::snapshot::VgpuDevice;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// NVIDIA's PCI vendor id.
const NVIDIA: u32 = 0x10de;

/// One NVIDIA PCI function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// Its sysfs address (`0000:3b:00.0`).
    pub address: String,
    /// Its PCI class (`0x030200`), when readable.
    pub class: Option<u32>,
}

impl Function {
    /// A GPU: a display-class function (NVSwitches and audio functions are other classes).
    pub fn is_display(&self) -> bool {
        self.class.is_some_and(|c| c >> 16 == 0x03)
    }
}

/// What is known of the bus under one sysfs root, and what reading it has cost.
#[derive(Debug)]
pub struct PciBus {
    root: PathBuf,
    /// The device directory's names at the last look (`Err`: it could not be listed).
    listed: Option<Result<Vec<OsString>, String>>,
    /// The NVIDIA functions of that listing.
    functions: Option<Vec<Function>>,
    /// The vGPU scan of those functions, kept until they change (errors too: a truncated config
    /// space is a lack of privilege, which a second read does not cure).
    vgpu: Option<Result<Vec<VgpuDevice>, String>>,
    config_reads: u64,
}

impl PciBus {
    /// Nothing read yet.
    pub fn new(root: &Path) -> PciBus {
        PciBus { root: root.into(), listed: None, functions: None, vgpu: None, config_reads: 0 }
    }

    /// The sysfs root it reads.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Lists the bus again; reads vendor and class only when the listing changed. Returns whether
    /// the NVIDIA functions changed (the first look counts as a change).
    pub fn refresh(&mut self) -> bool {
        let dir = self.root.join("bus/pci/devices");
        let listing = match std::fs::read_dir(&dir) {
            Ok(rd) => {
                let mut names: Vec<OsString> = rd.filter_map(|e| e.ok().map(|e| e.file_name())).collect();
                names.sort();
                Ok(names)
            }
            // No PCI bus in this root at all: nothing to scan.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(format!("cannot read {}: {e}", dir.display())),
        };
        if self.listed.as_ref() == Some(&listing) {
            return false;
        }
        let functions = match &listing {
            Ok(names) => Some(names.iter().filter_map(|n| self.nvidia_function(n)).collect()),
            Err(_) => None,
        };
        self.listed = Some(listing);
        if self.functions == functions {
            return false;
        }
        self.functions = functions;
        self.vgpu = None;
        true
    }

    fn nvidia_function(&self, name: &OsString) -> Option<Function> {
        let dev = self.root.join("bus/pci/devices").join(name);
        let hex = |file: &str| {
            let bytes = crate::limits::read(&dev.join(file), crate::limits::SYSFS_FILE).ok()?;
            let text = String::from_utf8_lossy(&bytes);
            u32::from_str_radix(text.trim().trim_start_matches("0x"), 16).ok()
        };
        (hex("vendor")? == NVIDIA)
            .then(|| Function { address: name.to_string_lossy().into_owned(), class: hex("class") })
    }

    /// The NVIDIA functions at the last look; `None` when the bus could not be listed.
    pub fn functions(&self) -> Option<&[Function]> {
        self.functions.as_deref()
    }

    /// NVIDIA GPUs on the bus at the last look; `None` when the bus could not be listed.
    pub fn display_gpus(&self) -> Option<u32> {
        self.functions().map(|f| f.iter().filter(|f| f.is_display()).count() as u32)
    }

    /// The vGPU devices (GFD's scan, with its errors), reading config space only when the NVIDIA
    /// functions changed since the last scan.
    pub fn vgpu(&mut self) -> Result<Vec<VgpuDevice>, String> {
        if self.listed.is_none() {
            self.refresh();
        }
        if self.vgpu.is_none() {
            let mut reads = 0;
            let scanned = sysfs::vgpu_scan(&self.root, &mut reads).map_err(|e: VgpuScanError| e.to_string());
            self.config_reads += reads;
            self.vgpu = Some(scanned);
        }
        self.vgpu.clone().expect("just scanned")
    }

    /// Whether the next [`PciBus::vgpu`] reads config space.
    pub fn needs_scan(&self) -> bool {
        self.vgpu.is_none()
    }

    /// Config-space reads so far.
    pub fn config_reads(&self) -> u64 {
        self.config_reads
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(root: &Path, address: &str, vendor: &str, class: &str) {
        let dir = root.join("bus/pci/devices").join(address);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("vendor"), format!("{vendor}\n")).unwrap();
        std::fs::write(dir.join("class"), format!("{class}\n")).unwrap();
        // A config space without a capability list: no vGPU.
        std::fs::write(dir.join("config"), [0u8; 256]).unwrap();
    }

    #[test]
    fn config_space_is_read_again_only_when_the_nvidia_functions_change() {
        let dir = tempfile::tempdir().unwrap();
        device(dir.path(), "0000:00:00.0", "0x8086", "0x060000");
        device(dir.path(), "0000:3b:00.0", "0x10de", "0x030200");
        let mut bus = PciBus::new(dir.path());
        assert!(bus.refresh(), "the first look is a change");
        assert_eq!(bus.vgpu(), Ok(vec![]));
        assert_eq!(bus.config_reads(), 1, "one NVIDIA function, one read");
        for _ in 0..10 {
            assert!(!bus.refresh());
            bus.vgpu().unwrap();
        }
        assert_eq!(bus.config_reads(), 1, "unchanged bus: no more reads");
        // Another vendor's device comes and goes: NVIDIA's functions are unchanged.
        device(dir.path(), "0000:00:1f.0", "0x8086", "0x060100");
        assert!(!bus.refresh());
        bus.vgpu().unwrap();
        assert_eq!(bus.config_reads(), 1);
        // A GPU is hot-added: read again, both.
        device(dir.path(), "0000:5e:00.0", "0x10de", "0x030200");
        assert!(bus.refresh());
        assert_eq!(bus.display_gpus(), Some(2));
        bus.vgpu().unwrap();
        assert_eq!(bus.config_reads(), 3);
    }

    #[test]
    fn gpus_are_display_class_nvidia_functions() {
        let dir = tempfile::tempdir().unwrap();
        device(dir.path(), "0000:3b:00.0", "0x10de", "0x030200");
        device(dir.path(), "0000:3b:00.1", "0x10de", "0x040300");
        device(dir.path(), "0000:00:02.0", "0x8086", "0x030000");
        let mut bus = PciBus::new(dir.path());
        bus.refresh();
        assert_eq!(bus.functions().unwrap().len(), 2);
        assert_eq!(bus.display_gpus(), Some(1));
        assert_eq!(PciBus::new(&dir.path().join("none")).display_gpus(), None, "not looked at yet");
        let mut empty = PciBus::new(&dir.path().join("none"));
        empty.refresh();
        assert_eq!(empty.display_gpus(), Some(0), "no PCI bus in the root: none");
    }

    #[test]
    fn a_scan_error_is_kept_until_the_functions_change() {
        let dir = tempfile::tempdir().unwrap();
        device(dir.path(), "0000:3b:00.0", "0x10de", "0x030200");
        // An unprivileged reader sees 64 bytes.
        std::fs::write(dir.path().join("bus/pci/devices/0000:3b:00.0/config"), [0u8; 64]).unwrap();
        let mut bus = PciBus::new(dir.path());
        let e = bus.vgpu().unwrap_err();
        assert!(e.contains("only 64 bytes readable"), "{e}");
        bus.refresh();
        assert_eq!(bus.vgpu().unwrap_err(), e);
        assert_eq!(bus.config_reads(), 1);
    }
}
