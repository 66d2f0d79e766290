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

/// A kubeconfig (a few KiB; one with many clusters and embedded certificates some hundreds).
pub const KUBECONFIG_FILE: u64 = 4 << 20;
/// The node's boot id file (a UUID line of 37 bytes).
pub const BOOT_ID_FILE: u64 = 4 << 10;

/// Reads at most `limit` bytes of `path`; a longer file is an `InvalidData` error that says so,
/// and anything but a regular file (see [`open`]) an `InvalidInput` error naming what it is.
pub fn read(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let file = open(path)?;
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

/// Opens `path` for reading if it is a regular file (sysfs attributes and `/proc` files are) or
/// the null device.
/// The open never waits: `O_NONBLOCK` returns at once where a FIFO with no writer would block
/// forever, and the type is asked of the opened file, so nothing can swap it in between; a
/// FIFO, socket, device or directory is refused before a byte is read.
pub fn open(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
    let file =
        std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY).open(path)?;
    let meta = file.metadata()?;
    let kind = meta.file_type();
    let what = match () {
        _ if kind.is_file() => return Ok(file),
        // The null device reads as empty at once: GFD's config manager links a config file to
        // /dev/null to mean "no configuration".
        _ if kind.is_char_device() && meta.rdev() == libc::makedev(1, 3) => return Ok(file),
        _ if kind.is_dir() => "a directory",
        _ if kind.is_fifo() => "a FIFO",
        _ if kind.is_socket() => "a socket",
        _ if kind.is_char_device() => "a character device",
        _ if kind.is_block_device() => "a block device",
        _ => "a special file",
    };
    Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{what}, not a regular file")))
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

    /// A FIFO with no writer would block a plain open forever; it is refused at once, as is
    /// every other file that is not a regular one.
    #[test]
    fn only_regular_files_are_read_and_a_fifo_never_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let err = super::read(&fifo, 10).unwrap_err();
        assert_eq!(err.to_string(), "a FIFO, not a regular file");
        let err = super::read(dir.path(), 10).unwrap_err();
        assert_eq!(err.to_string(), "a directory, not a regular file");
        let err = super::read(std::path::Path::new("/dev/zero"), 10).unwrap_err();
        assert_eq!(err.to_string(), "a character device, not a regular file");
        // The null device is empty, not refused (a config file linked to it means none).
        assert_eq!(super::read(std::path::Path::new("/dev/null"), 10).unwrap(), b"");
    }
}
