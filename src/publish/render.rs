//! Rendering labels (NFD `key=value` lines or JSON) and writing the NFD feature file atomically.

use crate::exit::Classify;
use crate::labels::Labels;
use std::io::Write;
use std::path::{Path, PathBuf};

/// NFD skips feature files larger than this.
pub const NFD_MAX_FILE: usize = 64 * 1024;

/// Why the feature file was not written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// A filesystem step failed.
    #[error("cannot write the feature file {path}: {step}: {source}")]
    Write {
        /// The target file.
        path: PathBuf,
        /// Which step.
        step: &'static str,
        /// The I/O error.
        source: std::io::Error,
    },
    /// NFD would ignore the file.
    #[error("feature file {path} would be {size} bytes; NFD reads at most {NFD_MAX_FILE}")]
    TooLarge {
        /// The target file.
        path: PathBuf,
        /// Its size.
        size: usize,
    },
    /// A device, FIFO, socket or directory is at the path: replacing it is never what was meant.
    #[error(
        "cannot write the feature file {path}: it is a {kind}, not a regular file (use another --output-file, or \"\" for stdout)"
    )]
    NotAFile {
        /// The target path.
        path: PathBuf,
        /// What is there.
        kind: &'static str,
    },
}

impl Classify for OutputError {
    /// Even a path that is no regular file is the node's state, like a missing directory.
    fn is_bad_configuration(&self) -> bool {
        match self {
            OutputError::Write { .. } | OutputError::TooLarge { .. } | OutputError::NotAFile { .. } => false,
        }
    }
}

/// `key=value` lines, sorted by key: NFD's feature-file format.
pub fn render_text(labels: &Labels) -> String {
    labels.iter().map(|(k, v)| format!("{k}={v}\n")).collect()
}

/// One JSON object, keys sorted, followed by a newline.
pub fn render_json(labels: &Labels) -> String {
    let mut s = serde_json::to_string_pretty(labels).expect("a string map always serialises");
    s.push('\n');
    s
}

/// Opens `path` for reading without ever waiting (`O_NONBLOCK`: a FIFO with no writer blocks a
/// plain open forever), and only if it is a regular file; else `Ok(Err(kind))`, what is there.
/// The type is asked of the opened file, so nothing can be swapped in between.
pub fn open_regular(path: &Path) -> std::io::Result<Result<(std::fs::File, u64), &'static str>> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let file =
        std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY).open(path)?;
    let meta = file.metadata()?;
    let kind = meta.file_type();
    Ok(match () {
        _ if kind.is_file() => Ok((file, meta.len())),
        _ if kind.is_dir() => Err("directory"),
        _ if kind.is_char_device() => Err("character device"),
        _ if kind.is_block_device() => Err("block device"),
        _ if kind.is_fifo() => Err("FIFO"),
        _ if kind.is_socket() => Err("socket"),
        _ => Err("special file"),
    })
}

/// Whether the file at `path` holds exactly `content`. Reads at most `content.len() + 1` bytes
/// (a huge file or an endless device costs nothing), never blocks on a FIFO, and refuses
/// anything but a regular file. A missing or unreadable file does not hold it.
pub fn holds(path: &Path, content: &[u8]) -> Result<bool, OutputError> {
    use std::io::Read;
    let (file, len) = match open_regular(path) {
        Ok(Ok(opened)) => opened,
        Ok(Err(kind)) => return Err(OutputError::NotAFile { path: path.to_path_buf(), kind }),
        // Replacing it is how it gets fixed (a file we may not read, a dangling link).
        Err(_) => return Ok(false),
    };
    if len != content.len() as u64 {
        return Ok(false);
    }
    let mut old = Vec::with_capacity(content.len());
    match file.take(content.len() as u64 + 1).read_to_end(&mut old) {
        Ok(_) => Ok(old == content),
        Err(_) => Ok(false),
    }
}

/// Writes `content` to `path` unless it already holds exactly that: a dot-file in the same
/// directory (NFD skips dot-files), fsync, rename over the target, fsync the directory.
/// Returns whether the file changed.
pub fn write_feature_file(path: &Path, content: &str) -> Result<bool, OutputError> {
    let err =
        |step: &'static str| move |source| OutputError::Write { path: path.to_path_buf(), step, source };
    if content.len() > NFD_MAX_FILE {
        return Err(OutputError::TooLarge { path: path.to_path_buf(), size: content.len() });
    }
    if holds(path, content.as_bytes())? {
        return Ok(false);
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}"))
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))
        .tempfile_in(dir)
        .map_err(|e| err("create temporary file")(without_temp_path(e)))?;
    tmp.write_all(content.as_bytes()).map_err(err("write"))?;
    tmp.as_file().sync_all().map_err(err("fsync"))?;
    tmp.persist(path).map_err(|e| OutputError::Write {
        path: path.to_path_buf(),
        step: "rename",
        source: without_temp_path(e.error),
    })?;
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(err("fsync directory"))?;
    Ok(true)
}

/// The tempfile crate appends the random temporary name to its errors; users know the target
/// file (which the message names), not that name.
fn without_temp_path(e: std::io::Error) -> std::io::Error {
    let text = e.to_string();
    match text.split_once(" at path ") {
        Some((cause, _)) => std::io::Error::new(e.kind(), cause.to_string()),
        None => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels() -> Labels {
        Labels::from([
            ("nvidia.com/b".to_string(), "2".to_string()),
            ("nvidia.com/a".to_string(), "".to_string()),
        ])
    }

    #[test]
    fn text_is_sorted_key_value_lines() {
        assert_eq!(render_text(&labels()), "nvidia.com/a=\nnvidia.com/b=2\n");
    }

    #[test]
    fn json_is_sorted() {
        assert_eq!(render_json(&labels()), "{\n  \"nvidia.com/a\": \"\",\n  \"nvidia.com/b\": \"2\"\n}\n");
    }

    #[test]
    fn feature_file_is_written_once_and_readable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gfd");
        assert!(write_feature_file(&path, "a=1\n").unwrap());
        assert!(!write_feature_file(&path, "a=1\n").unwrap(), "unchanged content is not rewritten");
        assert!(write_feature_file(&path, "a=2\n").unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a=2\n");
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o644);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("gfd")], "no temporary file is left behind");
    }

    #[test]
    fn a_missing_directory_names_the_file() {
        let err = write_feature_file(Path::new("/nonexistent/dir/gfd"), "a=1\n").unwrap_err();
        let err = crate::logging::error_chain(&err);
        assert_eq!(
            err,
            "cannot write the feature file /nonexistent/dir/gfd: create temporary file: No such file or directory (os error 2)",
            "the target, not the random temporary name, and each cause once"
        );
    }

    #[test]
    fn devices_fifos_and_directories_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let cases = [(fifo.as_path(), "FIFO"), (dir.path(), "directory")];
        for (path, kind) in cases {
            let err = write_feature_file(path, "a=1\n").unwrap_err().to_string();
            assert!(err.contains(&path.display().to_string()) && err.contains(kind), "{path:?}: {err}");
        }
    }

    #[test]
    fn an_existing_file_is_compared_within_its_expected_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gfd");
        // A sparse 1 GiB file: read whole, it would cost a gigabyte.
        std::fs::File::create(&path).unwrap().set_len(1 << 30).unwrap();
        assert!(!holds(&path, b"a=1\n").unwrap());
        assert!(write_feature_file(&path, "a=1\n").unwrap());
        assert!(holds(&path, b"a=1\n").unwrap());
        assert!(!holds(&path, b"a=2\n").unwrap(), "same size, other content");
        assert!(!holds(&dir.path().join("missing"), b"a=1\n").unwrap());
    }

    #[test]
    fn oversized_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let big = "x".repeat(NFD_MAX_FILE + 1);
        assert!(matches!(
            write_feature_file(&dir.path().join("gfd"), &big),
            Err(OutputError::TooLarge { .. })
        ));
    }
}
