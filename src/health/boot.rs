//! The node's boot id: a new one clears the faults recorded in the last boot.

use std::path::{Path, PathBuf};

/// Why the boot id is unknown.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the boot id from {path}: {reason}")]
pub struct BootIdError {
    /// The file.
    pub path: PathBuf,
    /// What went wrong.
    pub reason: String,
}

/// Reads the node's boot id (a UUID line; at most 128 bytes are read).
pub fn boot_id(path: &Path) -> Result<String, BootIdError> {
    let err = |reason: String| BootIdError { path: path.into(), reason };
    let file = std::fs::File::open(path).map_err(|e| err(e.to_string()))?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::Read::take(file, 128), &mut text)
        .map_err(|e| err(e.to_string()))?;
    let id = text.trim();
    if id.is_empty() {
        return Err(err("the file is empty".into()));
    }
    Ok(id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_id_is_read_trimmed_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("boot_id");
        std::fs::write(&p, "6f1e0c0a-1111-2222-3333-444455556666\n").unwrap();
        assert_eq!(boot_id(&p).unwrap(), "6f1e0c0a-1111-2222-3333-444455556666");
        std::fs::write(&p, "").unwrap();
        assert!(boot_id(&p).unwrap_err().to_string().contains("boot_id: the file is empty"));
        let e = boot_id(&dir.path().join("missing")).unwrap_err().to_string();
        assert!(e.contains("missing"), "{e}");
    }
}
