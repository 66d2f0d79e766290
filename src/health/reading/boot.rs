//! The node's boot id: a new one clears the faults recorded in the last boot.

use crate::health::values::record::BootId;
use std::path::{Path, PathBuf};

/// Why the boot id is unknown.
#[derive(Debug, thiserror::Error)]
pub enum BootIdError {
    /// The file could not be opened or read.
    #[error("cannot read the boot id from {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file holds nothing.
    #[error("cannot read the boot id from {path}: the file is empty")]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

/// Reads the node's boot id (a UUID line), within [`crate::limits::BOOT_ID_FILE`] and only from
/// a regular file, so a FIFO named by `--boot-id-file` cannot stall health.
pub fn boot_id(path: &Path) -> Result<BootId, BootIdError> {
    let err = |source| BootIdError::Read { path: path.into(), source };
    let bytes = crate::limits::read(path, crate::limits::BOOT_ID_FILE).map_err(err)?;
    let text = String::from_utf8_lossy(&bytes);
    let id = text.trim();
    if id.is_empty() {
        return Err(BootIdError::Empty { path: path.into() });
    }
    Ok(BootId::from(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_id_is_read_trimmed_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("boot_id");
        std::fs::write(&p, "6f1e0c0a-1111-2222-3333-444455556666\n").unwrap();
        assert_eq!(boot_id(&p).unwrap().as_str(), "6f1e0c0a-1111-2222-3333-444455556666");
        std::fs::write(&p, "").unwrap();
        assert!(boot_id(&p).unwrap_err().to_string().contains("boot_id: the file is empty"));
        let e = boot_id(&dir.path().join("missing")).unwrap_err().to_string();
        assert!(e.contains("missing"), "{e}");
    }
}
