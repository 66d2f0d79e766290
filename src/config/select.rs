//! Which config a node uses, from a mounted ConfigMap directory (one file per key) and the node's
//! `nvidia.com/device-plugin.config` label. This replaces GFD's config-manager sidecar.

use crate::exit::Classify;
use std::path::{Path, PathBuf};

/// The node label that names the config key (defined with the Node view, which reads it).
pub use crate::kubeapi::node_view::CONFIG_LABEL;

/// Why no config could be chosen.
#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    /// The label (or `--config-default`) names a key the directory does not have.
    #[error("{source_name} selects config {key:?}, but {dir} has no such key ({})", listing(available))]
    MissingKey {
        /// Where the key came from.
        source_name: String,
        /// The key.
        key: String,
        /// The directory.
        dir: String,
        /// Keys that exist.
        available: Vec<String>,
    },
    /// The directory cannot be listed.
    #[error("cannot list config directory {dir}: {source}")]
    List {
        /// The directory.
        dir: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl Classify for SelectError {
    /// A directory that cannot be listed is the `--config-dir` the operator named.
    fn is_bad_configuration(&self) -> bool {
        match self {
            SelectError::MissingKey { .. } | SelectError::List { .. } => true,
        }
    }
}

/// The keys a directory has, as a message says them: `keys: a, b`, or that it has none.
fn listing(keys: &[String]) -> String {
    match keys {
        [] => "it has no keys".into(),
        keys => format!("keys: {}", keys.join(", ")),
    }
}

/// Why [`select`] chose no key in `dir`, for the warning that says so: a directory without keys
/// is not one of several keys among which nothing picks.
pub fn why_none(dir: &Path) -> String {
    match keys(dir) {
        Ok(keys) if keys.is_empty() => format!("{} has no keys", dir.display()),
        Ok(keys) => format!(
            "no node label {CONFIG_LABEL}, no --config-default and no key `default` pick one of {}'s {}",
            dir.display(),
            listing(&keys)
        ),
        Err(e) => e.to_string(),
    }
}

/// The keys of a ConfigMap mount: visible regular files (following symlinks), sorted. Kubernetes'
/// own entries (`..data`, `..2024_...`) start with dots and are skipped.
pub fn keys(dir: &Path) -> Result<Vec<String>, SelectError> {
    let rd = std::fs::read_dir(dir)
        .map_err(|source| SelectError::List { dir: dir.display().to_string(), source })?;
    let mut keys: Vec<String> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().map(String::from))
        .filter(|name| !name.starts_with('.') && dir.join(name).is_file())
        .collect();
    keys.sort();
    Ok(keys)
}

/// The config file for a node: `DIR/<label>`; without a label, `--config-default`, then a key
/// named `default`, then the only key. `Ok(None)`: nothing to choose (no sharing).
pub fn select(
    dir: &Path,
    label: Option<&str>,
    default_key: Option<&str>,
) -> Result<Option<PathBuf>, SelectError> {
    let available = keys(dir)?;
    let pick = |key: &str, source_name: &str| {
        if available.iter().any(|k| k == key) {
            Ok(Some(dir.join(key)))
        } else {
            Err(SelectError::MissingKey {
                source_name: source_name.into(),
                key: key.into(),
                dir: dir.display().to_string(),
                available: available.clone(),
            })
        }
    };
    match (label.filter(|l| !l.is_empty()), default_key) {
        (Some(key), _) => pick(key, &format!("node label {CONFIG_LABEL}")),
        (None, Some(key)) => pick(key, "--config-default"),
        (None, None) if available.iter().any(|k| k == "default") => Ok(Some(dir.join("default"))),
        (None, None) if available.len() == 1 => Ok(Some(dir.join(&available[0]))),
        (None, None) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(keys: &[&str]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for k in keys {
            std::fs::write(d.path().join(k), "version: v1\n").unwrap();
        }
        std::fs::create_dir(d.path().join("..2026_11_21_00_00_00.1")).unwrap();
        d
    }

    #[test]
    fn selection_rules() {
        let d = dir(&["a", "b", "default"]);
        let p = d.path();
        assert_eq!(select(p, Some("b"), None).unwrap(), Some(p.join("b")), "the label wins");
        assert_eq!(select(p, Some("b"), Some("a")).unwrap(), Some(p.join("b")));
        assert_eq!(select(p, None, Some("a")).unwrap(), Some(p.join("a")), "then --config-default");
        assert_eq!(select(p, None, None).unwrap(), Some(p.join("default")), "then `default`");
        assert_eq!(select(p, Some(""), None).unwrap(), Some(p.join("default")), "an empty label is no label");
        let one = dir(&["only"]);
        assert_eq!(
            select(one.path(), None, None).unwrap(),
            Some(one.path().join("only")),
            "then the only key"
        );
        let two = dir(&["x", "y"]);
        assert_eq!(select(two.path(), None, None).unwrap(), None, "else nothing");
        assert_eq!(select(dir(&[]).path(), None, None).unwrap(), None);
    }

    #[test]
    fn a_missing_key_is_an_error_naming_it() {
        let d = dir(&["a"]);
        let err = select(d.path(), Some("nope"), None).unwrap_err();
        assert!(
            matches!(&err, SelectError::MissingKey { key, available, .. } if key == "nope" && available == &["a"])
        );
        assert!(err.to_string().contains(CONFIG_LABEL), "{err}");
        assert!(select(d.path(), None, Some("nope")).unwrap_err().to_string().contains("--config-default"));
        let empty = dir(&[]);
        let err = select(empty.path(), None, Some("nope")).unwrap_err().to_string();
        assert!(err.ends_with("has no such key (it has no keys)"), "{err}");
    }

    #[test]
    fn why_nothing_was_chosen_counts_the_keys() {
        let empty = dir(&[]);
        assert_eq!(why_none(empty.path()), format!("{} has no keys", empty.path().display()));
        let two = dir(&["x", "y"]);
        let why = why_none(two.path());
        assert!(why.ends_with("'s keys: x, y"), "{why}");
    }

    #[test]
    fn hidden_kubernetes_entries_are_not_keys() {
        let d = dir(&["a"]);
        std::os::unix::fs::symlink("..2026_11_21_00_00_00.1", d.path().join("..data")).unwrap();
        assert_eq!(keys(d.path()).unwrap(), ["a"]);
    }
}
