//! The import structure of a crate: which module each production file is (found by following
//! `mod` declarations from the crate root, so test-only files are never read), and what each
//! names (`syntax.rs`), resolved to the file that defines it, through re-exports.

use crate::architecture::syntax::{parse, ModPath, Parsed};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One production file of a crate.
#[derive(Debug)]
pub struct SourceFile {
    /// Its path relative to the crate's source directory (`config/flags.rs`).
    pub rel: String,
    /// What it says.
    pub parsed: Parsed,
}

/// A crate's production files by module path, and the files only tests declare.
#[derive(Debug, Default)]
pub struct Crate {
    /// Module path -> its file.
    pub files: BTreeMap<ModPath, SourceFile>,
    /// Files declared under `#[cfg(test)]`, relative to the source directory.
    pub test_files: BTreeSet<String>,
}

/// Reads the crate whose root file is `src/<root>`, following its `mod` declarations.
pub fn load(src: &Path, root: &str) -> Result<Crate, String> {
    let mut krate = Crate::default();
    let mut stack = vec![(Vec::new(), PathBuf::from(root))];
    while let Some((module, rel)) = stack.pop() {
        let path = src.join(&rel);
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let parsed = parse(&text, &module).map_err(|e| format!("{}: {e}", path.display()))?;
        let dir = rel.parent().unwrap_or(Path::new("")).to_path_buf();
        let stem = rel.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        // `lib.rs`, `main.rs` and `mod.rs` own their directory; `foo.rs` owns `foo/`.
        let own = if module.is_empty() || stem == "mod" { dir.clone() } else { dir.join(stem) };
        for m in &parsed.mods {
            let child = match &m.path {
                Some(p) => dir.join(p),
                None if src.join(own.join(format!("{}.rs", m.name))).exists() => {
                    own.join(format!("{}.rs", m.name))
                }
                None => own.join(&m.name).join("mod.rs"),
            };
            if m.test {
                krate.test_files.insert(child.to_string_lossy().into_owned());
            } else {
                let mut child_module = module.clone();
                child_module.push(m.name.clone());
                stack.push((child_module, child));
            }
        }
        krate.files.insert(module, SourceFile { rel: rel.to_string_lossy().into_owned(), parsed });
    }
    Ok(krate)
}

impl Crate {
    /// The file-module a path lands in: its longest prefix that is a file, following re-exports
    /// (`super::Settings` through `config/mod.rs`'s `pub use settings::Settings` is `settings`).
    pub fn resolve(&self, path: &[String]) -> ModPath {
        let mut path = path.to_vec();
        for _ in 0..16 {
            let module = (0..=path.len()).rev().map(|n| &path[..n]).find(|p| self.files.contains_key(*p));
            let module = module.unwrap_or_default().to_vec();
            let next = path.get(module.len()).and_then(|name| self.files[&module].parsed.imports.get(name));
            match next {
                Some(target) if !target.starts_with(&path[..=module.len()]) => {
                    let mut followed = target.clone();
                    followed.extend(path[module.len() + 1..].iter().cloned());
                    path = followed;
                }
                _ => return module,
            }
        }
        path
    }

    /// Every (file, file it names) pair, both as module paths, self-references left out, and
    /// every (file, file whose `impl` defines a method it calls) pair of [`Crate::method_edges`].
    pub fn edges(&self) -> BTreeSet<(ModPath, ModPath)> {
        let mut edges = self.method_edges();
        for (module, file) in &self.files {
            for r in &file.parsed.refs {
                let to = self.resolve(r);
                if &to != module {
                    edges.insert((module.clone(), to));
                }
            }
        }
        edges
    }

    /// Calls through an `impl` split over the files of one directory, which name no path: a
    /// call of `name` inside an `impl T` leads to the one other file of the directory (its
    /// siblings, its `mod.rs`, or the files a `mod.rs` declares) whose inherent `impl T` defines
    /// `name`. A method the caller defines itself, or that two other files define, is no edge.
    pub fn method_edges(&self) -> BTreeSet<(ModPath, ModPath)> {
        let near = |a: &ModPath, b: &ModPath| {
            a != b
                && ((a.len() == b.len() && !a.is_empty() && a[..a.len() - 1] == b[..b.len() - 1])
                    || (a.len() + 1 == b.len() && b.starts_with(a))
                    || (b.len() + 1 == a.len() && a.starts_with(b)))
        };
        let mut edges = BTreeSet::new();
        for (module, file) in &self.files {
            for call in &file.parsed.calls {
                if file.parsed.methods.contains(call) {
                    continue;
                }
                let definers: Vec<&ModPath> = self
                    .files
                    .iter()
                    .filter(|(other, f)| near(module, other) && f.parsed.methods.contains(call))
                    .map(|(other, _)| other)
                    .collect();
                if let [only] = definers[..] {
                    edges.insert((module.clone(), only.clone()));
                }
            }
        }
        edges
    }

    /// The graph between the children of module `parent` (for `[]`, the top-level modules): a
    /// child stands for its file and everything under it; the parent's own file is above them
    /// (it declares and re-exports them), so an edge into it counts only where a re-export
    /// leads on to a sibling.
    pub fn graph(&self, parent: &[String]) -> BTreeMap<String, BTreeSet<String>> {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let child =
            |m: &ModPath| (m.len() > parent.len() && m.starts_with(parent)).then(|| m[parent.len()].clone());
        for m in self.files.keys() {
            if let Some(c) = child(m) {
                g.entry(c).or_default();
            }
        }
        for (from, to) in self.edges() {
            if let (Some(a), Some(b)) = (child(&from), child(&to)) {
                if a != b {
                    g.entry(a).or_default().insert(b);
                }
            }
        }
        g
    }

    /// Every module that has children (a directory), the root included.
    pub fn parents(&self) -> BTreeSet<ModPath> {
        self.files.keys().filter(|m| !m.is_empty()).map(|m| m[..m.len() - 1].to_vec()).collect()
    }
}
