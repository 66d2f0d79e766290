//! Size limits for everything nvlabel reads, so hostile or broken input costs bounded memory and
//! time and gets a clear error instead.

use std::io::Read;
use std::path::Path;

/// A device-plugin config file (real ones are a few KiB).
pub const CONFIG_FILE: u64 = 1 << 20;
/// A snapshot file (a 10,000-GPU snapshot is about 5 MiB).
pub const SNAPSHOT_FILE: u64 = 64 << 20;
/// A sysfs attribute or the DMI machine-type file (PCI config space is at most 4 KiB).
pub const SYSFS_FILE: u64 = 64 << 10;
/// A system `pci.ids` database (about 1.7 MiB in 2026, growing some 50 KiB a year).
pub const PCI_IDS_FILE: u64 = 16 << 20;

/// Reads at most `limit` bytes of `path`; a longer file is an `InvalidData` error that says so.
pub fn read(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than the {limit}-byte limit for this file"),
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_up_to_the_limit_and_refuses_more() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"abcd").unwrap();
        assert_eq!(super::read(&path, 4).unwrap(), b"abcd");
        let err = super::read(&path, 3).unwrap_err();
        assert!(err.to_string().contains("3-byte limit"), "{err}");
        // A huge sparse file is refused after reading only the limit.
        let big = dir.path().join("big");
        std::fs::File::create(&big).unwrap().set_len(100 << 20).unwrap();
        assert!(super::read(&big, 1 << 20).is_err());
    }
}
