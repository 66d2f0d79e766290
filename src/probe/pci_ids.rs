//! NVIDIA device names from the PCI ID database (`pci.ids`), for GPUs bound to `vfio-pci`: with
//! no driver to ask, the name is what pci.ids calls the device id (`GH100 [H100 PCIe]`).
//!
//! Found as GFD (go-nvlib `pciids.NewDB`) finds it: the first of the system's copies that can be
//! read, else a built-in copy. Where the system's copy does not know a device the built-in copy
//! names, the built-in name is taken (GFD says `UNKNOWN_DEVICE`; decisions.md: a newer list is
//! no reason to call a GPU unknown). `--pci-ids FILE` is used alone. Only NVIDIA's section of a
//! system copy is kept: the vfio scan names nothing else. The built-in copy is NVIDIA's device
//! lines alone, one string written by `build.rs`: no relocations at start, and its pages are
//! read only when a vfio GPU is named.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// NVIDIA's PCI vendor id.
pub const NVIDIA_VENDOR: u16 = 0x10de;

/// NVIDIA's device names in the built-in copy: `<4 hex digits> <name>` lines, sorted by id.
const BUILT_IN: &str = include_str!(concat!(env!("OUT_DIR"), "/nvidia_pci_ids.txt"));

/// Where go-nvlib looks for the system's pci.ids, in order (Ubuntu and Debian, RHEL updated by
/// hand, RHEL, SUSE).
pub const SYSTEM_PATHS: [&str; 4] = [
    "/usr/share/misc/pci.ids",
    "/usr/local/share/pci.ids",
    "/usr/share/hwdata/pci.ids",
    "/usr/share/pci.ids",
];

/// Why an explicitly named pci.ids could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PciIdsError {
    /// The file could not be read (missing, unreadable, or over the size limit).
    #[error("cannot read --pci-ids {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl crate::exit::Classify for PciIdsError {
    /// Like a snapshot, the PCI database describes the hardware: unreadable, it is the node's;
    /// a path naming nothing is the user's slip.
    fn is_bad_configuration(&self) -> bool {
        match self {
            PciIdsError::Read { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
        }
    }
}

/// Which copy of the database the names come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A pci.ids file on this system.
    File(PathBuf),
    /// The copy built into nvlabel (NVIDIA's names from the `pci-ids-rs` crate's database).
    BuiltIn,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::File(path) => write!(f, "{}", path.display()),
            Source::BuiltIn => f.write_str("the built-in pci.ids"),
        }
    }
}

/// NVIDIA device names from one copy of pci.ids, and from the built-in copy where a system copy
/// lacks a device.
#[derive(Debug, Clone)]
pub struct PciIds {
    source: Source,
    /// NVIDIA's device names from a file; empty for the built-in copy.
    nvidia: HashMap<u16, String>,
    /// Whether a device the file lacks is named by the built-in copy: a system copy's gaps are
    /// filled, a file the user named (`--pci-ids`) is used alone.
    fill_in: bool,
}

impl PciIds {
    /// `explicit` when given (it must be readable: a configured file that cannot be used is a
    /// mistake to report, not to step over), else the first readable of `search` (the system's
    /// copies, [`SYSTEM_PATHS`] outside tests), else the built-in copy.
    pub fn load(explicit: Option<&Path>, search: &[PathBuf]) -> Result<PciIds, PciIdsError> {
        match explicit {
            Some(path) => read(path)
                .map(|text| PciIds::parse(&text, Source::File(path.into())))
                .map_err(|source| PciIdsError::Read { path: path.display().to_string(), source }),
            None => Ok(PciIds::first_readable(search)),
        }
    }

    /// The first of `paths` that can be read, else the built-in copy; a device the copy read
    /// lacks is named by the built-in one.
    pub fn first_readable(paths: &[PathBuf]) -> PciIds {
        for path in paths {
            match read(path) {
                Ok(text) => {
                    return PciIds {
                        fill_in: true,
                        ..PciIds::parse(&text, Source::File(path.to_path_buf()))
                    };
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                // GFD steps over any unreadable copy silently; which copy names the GPUs matters.
                Err(e) => tracing::warn!(path = %path.display(), error = %e, "skipping unreadable pci.ids"),
            }
        }
        PciIds::built_in()
    }

    /// The built-in copy alone.
    pub fn built_in() -> PciIds {
        PciIds { source: Source::BuiltIn, nvidia: HashMap::new(), fill_in: true }
    }

    /// Keeps NVIDIA's device names from pci.ids text (used alone, as `--pci-ids` is), reading lines as go-nvlib's scanner does:
    /// a vendor line starts with a digit or `a`-`f`, a device line with exactly one tab, and a
    /// second `10de` section replaces the first. (The class section at the end needs no state of
    /// its own: its `C` lines are no vendors and its two-digit ids never read as a device's four.)
    pub fn parse(text: &str, source: Source) -> PciIds {
        let mut nvidia = HashMap::new();
        let mut in_nvidia = false;
        for line in text.lines() {
            match line.as_bytes() {
                [b'0'..=b'9' | b'a'..=b'f', ..] => {
                    in_nvidia = entry(line).is_some_and(|(id, _)| id == NVIDIA_VENDOR);
                    if in_nvidia {
                        nvidia.clear();
                    }
                }
                // Two tabs is a subsystem line, which names a board, not the device.
                [b'\t', next, ..] if in_nvidia && *next != b'\t' => {
                    if let Some((id, name)) = entry(line) {
                        nvidia.insert(id, name.to_string());
                    }
                }
                _ => {}
            }
        }
        PciIds { source, nvidia, fill_in: false }
    }

    /// The copy the names come from.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// pci.ids' name of an NVIDIA device id, as written there (`GH100 [H100 PCIe]`).
    pub fn nvidia_device_name(&self, device: u16) -> Option<&str> {
        match self.nvidia.get(&device) {
            Some(name) => Some(name),
            None if self.fill_in => built_in_name(device),
            None => None,
        }
    }
}

/// The built-in copy's name of an NVIDIA device id. A scan of about 60 KB, once per vfio GPU
/// named, rather than a table every process would build at start.
fn built_in_name(device: u16) -> Option<&'static str> {
    BUILT_IN.lines().find_map(|line| match entry(line) {
        Some((id, name)) if id == device => Some(name),
        _ => None,
    })
}

/// Reads a pci.ids file within its size limit; names are UTF-8, a stray byte costs one letter.
fn read(path: &Path) -> std::io::Result<String> {
    let bytes = crate::limits::read(path, crate::limits::PCI_IDS_FILE)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The id (four hex digits) and the name of a vendor or device line, both trimmed as GFD does.
fn entry(line: &str) -> Option<(u16, &str)> {
    let line = line.trim();
    let (id, name) = (line.get(..4)?, line.get(4..)?);
    Some((u16::from_str_radix(id, 16).ok()?, name.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real lines of pci.ids (2025.07.11), with the traps of its format around NVIDIA's section.
    const SAMPLE: &str = "\
#\tList of PCI ID's
#\t2331  GH100 [not a device: a comment]
10b5  PLX Technology, Inc.
\t2331  PLX device with NVIDIA's id
10de  NVIDIA Corporation
\t20b0  GA100 [A100 SXM4 40GB]
\t\t10de 134f  A100-SXM4-40GB
\t2331  GH100 [H100 PCIe]\r
\t\t10de 1626  H100 PCIe 80GB
\t2684  AD102 [GeForce RTX 4090]   
10df  Emulex Corporation
\t2330  Emulex device with NVIDIA's id
C 03  Display controller
\t02  3D controller
";

    #[test]
    fn keeps_nvidia_device_names_only() {
        let ids = PciIds::parse(SAMPLE, Source::File("x".into()));
        assert_eq!(ids.nvidia_device_name(0x20b0), Some("GA100 [A100 SXM4 40GB]"));
        assert_eq!(ids.nvidia_device_name(0x2331), Some("GH100 [H100 PCIe]"), "a CR is trimmed");
        assert_eq!(ids.nvidia_device_name(0x2684), Some("AD102 [GeForce RTX 4090]"), "trailing blanks");
        assert_eq!(ids.nvidia_device_name(0x2330), None, "another vendor's device");
        assert_eq!(ids.nvidia_device_name(0x0002), None, "a class line is no device");
        assert_eq!(ids.nvidia_device_name(0x10de), None, "a subsystem line is no device");
        assert_eq!(ids.nvidia.len(), 3);
    }

    #[test]
    fn a_second_nvidia_section_replaces_the_first() {
        let text = "10de  NVIDIA\n\t2331  old\n\t20b0  kept? no\n1234  X\n10de  NVIDIA again\n\t2331  new\n";
        let ids = PciIds::parse(text, Source::File("x".into()));
        assert_eq!(ids.nvidia_device_name(0x2331), Some("new"));
        assert_eq!(ids.nvidia_device_name(0x20b0), None);
    }

    #[test]
    fn the_built_in_copy_names_nvidia_gpus() {
        let ids = PciIds::built_in();
        assert_eq!(ids.nvidia_device_name(0x2331), Some("GH100 [H100 PCIe]"));
        assert_eq!(ids.nvidia_device_name(0x20b0), Some("GA100 [A100 SXM4 40GB]"));
        assert_eq!(ids.nvidia_device_name(0x2330), Some("GH100 [H100 SXM5 80GB]"));
        assert_eq!(ids.nvidia_device_name(0xfffe), None);
        assert_eq!(ids.source(), &Source::BuiltIn);
    }

    #[test]
    fn the_first_readable_system_copy_wins_over_the_built_in_one() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.ids");
        let system = dir.path().join("pci.ids");
        let later = dir.path().join("later.ids");
        std::fs::write(&system, "10de  NVIDIA Corporation\n\t2331  GH100 [H100 PCIe, system copy]\n")
            .unwrap();
        std::fs::write(&later, "10de  NVIDIA Corporation\n\t2331  later copy\n").unwrap();
        let ids = PciIds::first_readable(&[missing.clone(), system.clone(), later]);
        assert_eq!(ids.source(), &Source::File(system.clone()));
        assert_eq!(ids.nvidia_device_name(0x2331), Some("GH100 [H100 PCIe, system copy]"));
        assert_eq!(ids.nvidia_device_name(0xfffe), None, "in neither copy");
        let none = PciIds::first_readable(std::slice::from_ref(&missing));
        assert_eq!(none.source(), &Source::BuiltIn);
        assert_eq!(none.nvidia_device_name(0x20b0), Some("GA100 [A100 SXM4 40GB]"));
    }

    #[test]
    fn a_device_the_system_copy_lacks_is_named_by_the_built_in_one() {
        // Debian 12's pci.ids of 2023 names no L40S (26b9): GFD there says UNKNOWN_DEVICE.
        let dir = tempfile::tempdir().unwrap();
        let system = dir.path().join("pci.ids");
        std::fs::write(&system, "10de  NVIDIA Corporation\n\t2331  GH100 [H100 PCIe]\n").unwrap();
        let ids = PciIds::load(None, std::slice::from_ref(&system)).unwrap();
        assert_eq!(ids.source(), &Source::File(system));
        assert_eq!(ids.nvidia_device_name(0x26b9), Some("AD102GL [L40S]"));
    }

    #[test]
    fn the_built_in_table_is_nvidia_devices_alone_sorted_by_id() {
        let ids: Vec<u16> = BUILT_IN.lines().map(|l| entry(l).expect(l).0).collect();
        assert!(ids.len() > 1000, "NVIDIA's section has well over a thousand devices: {}", ids.len());
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "sorted, each id once");
        assert!(BUILT_IN.lines().all(|l| !l.starts_with('\t')), "no subsystem lines");
    }

    #[test]
    fn an_oversized_system_copy_is_stepped_over() {
        let dir = tempfile::tempdir().unwrap();
        let huge = dir.path().join("huge.ids");
        std::fs::File::create(&huge).unwrap().set_len(crate::limits::PCI_IDS_FILE + 1).unwrap();
        assert_eq!(PciIds::first_readable(&[huge]).source(), &Source::BuiltIn);
    }

    #[test]
    fn an_explicit_file_is_used_or_named_in_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pci.ids");
        std::fs::write(&path, "10de  NVIDIA Corporation\n\t2331  explicit\n").unwrap();
        let ids = PciIds::load(Some(&path), &[]).unwrap();
        assert_eq!(ids.nvidia_device_name(0x2331), Some("explicit"));
        assert_eq!(ids.nvidia_device_name(0x20b0), None, "a named file is used alone");
        assert_eq!(ids.source().to_string(), path.display().to_string());
        let missing = dir.path().join("nope.ids");
        let e = PciIds::load(Some(&missing), &[]).unwrap_err();
        assert!(e.to_string().starts_with(&format!("cannot read --pci-ids {}: ", missing.display())), "{e}");
    }
}
