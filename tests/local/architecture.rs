//! The house's rules, read from the source: no top-level module of `src/` uses one that uses it
//! back, nor does any file inside a module directory (or inside the fake NVML crate), whether
//! through a path or by calling a method of a type whose `impl` is split over the files; the lower
//! layers never reach up; `kubeapi` uses only `logging`, `exit` and `limits`, `labels` never
//! `probe`. The import structure is parsed (`architecture/syntax.rs`, `architecture/imports.rs`),
//! test code left out, and the rules check that what they name exists and that edges known to be
//! there are found, so they cannot pass on nothing.

#[path = "architecture/imports.rs"]
mod imports;
#[path = "architecture/imports_tests.rs"]
mod imports_tests;
#[path = "architecture/rooms.rs"]
mod rooms;
#[path = "architecture/syntax.rs"]
mod syntax;

use imports::Crate;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

type Graph = BTreeMap<String, BTreeSet<String>>;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn src() -> PathBuf {
    repo().join("src")
}

fn fake_src() -> PathBuf {
    repo().join("crates/fake-nvml/src")
}

/// The nvlabel library crate.
fn nvlabel() -> &'static Crate {
    static C: OnceLock<Crate> = OnceLock::new();
    C.get_or_init(|| imports::load(&src(), "lib.rs").unwrap())
}

/// The fake NVML crate.
fn fake() -> &'static Crate {
    static C: OnceLock<Crate> = OnceLock::new();
    C.get_or_init(|| imports::load(&fake_src(), "lib.rs").unwrap())
}

/// The layers above the configuration's consumers.
const UPPER: &[&str] = &["app", "config", "daemon", "health", "pass", "http"];
/// The layers that never reach up into [`UPPER`].
const LOWER: &[&str] =
    &["publish", "kubeapi", "probe", "labels", "snapshot", "sharing", "troubles", "limits", "logging"];
/// docs/architecture.md's leaves: they use no other module of the crate.
const LEAVES: &[&str] = &["sharing", "limits", "duration", "clock", "yaml", "logging", "exit"];
/// The leaves any layer may use: the one line an error ends as, how an error classifies itself,
/// and the one way a file a user names is read (size limit, regular files only).
const EVERYWHERE: &[&str] = &["logging", "exit", "limits"];

/// A path from `from` back to `to`, if there is one.
pub fn path(g: &Graph, from: &str, to: &str, seen: &mut BTreeSet<String>) -> Option<Vec<String>> {
    if from == to {
        return Some(vec![to.to_string()]);
    }
    if !seen.insert(from.to_string()) {
        return None;
    }
    for next in g.get(from).into_iter().flatten() {
        if let Some(mut rest) = path(g, next, to, seen) {
            rest.insert(0, from.to_string());
            return Some(rest);
        }
    }
    None
}

/// The first circle in `g`, as `a -> b -> a`.
pub fn circle(g: &Graph) -> Option<String> {
    g.iter().find_map(|(module, uses)| {
        uses.iter().find_map(|used| {
            path(g, used, module, &mut BTreeSet::new())
                .map(|back| format!("{module} -> {}", back.join(" -> ")))
        })
    })
}

/// The names in `names` that are not nodes of `g`: a rule naming them would check nothing.
pub fn missing<'a>(g: &Graph, names: &[&'a str]) -> Vec<&'a str> {
    names.iter().copied().filter(|n| !g.contains_key(*n)).collect()
}

/// What `module` uses in `g`, asserting first that the module exists.
fn uses<'a>(g: &'a Graph, module: &str) -> &'a BTreeSet<String> {
    g.get(module).unwrap_or_else(|| panic!("a rule names module {module:?}, which is not in {:?}", g.keys()))
}

#[test]
fn every_module_a_rule_names_exists() {
    let g = nvlabel().graph(&[]);
    let named: Vec<&str> =
        UPPER.iter().chain(LOWER).chain(LEAVES).copied().chain(["kubeapi", "labels", "probe"]).collect();
    assert_eq!(missing(&g, &named), Vec::<&str>::new(), "the rules name modules that do not exist");
    let fake = fake().graph(&[]);
    assert_eq!(missing(&fake, &["exports", "codes", "call"]), Vec::<&str>::new());
}

#[test]
fn no_module_uses_one_that_uses_it_back() {
    let g = nvlabel().graph(&[]);
    assert!(g.len() > 15, "the modules were found: {g:?}");
    if let Some(c) = circle(&g) {
        panic!("a circle between top-level modules: {c}");
    }
}

#[test]
fn no_file_inside_a_module_uses_one_that_uses_it_back() {
    let mut checked = Vec::new();
    for (name, krate) in [("src", nvlabel()), ("crates/fake-nvml/src", fake())] {
        for parent in krate.parents() {
            if name == "src" && parent.is_empty() {
                continue; // the top level, checked above
            }
            let g = krate.graph(&parent);
            if let Some(c) = circle(&g) {
                panic!("a circle between the files of {name}/{}: {c}", parent.join("/"));
            }
            checked.push(format!("{name}/{}", parent.join("/")));
        }
    }
    for dir in ["src/config", "src/probe", "src/labels", "src/config/file", "crates/fake-nvml/src/"] {
        assert!(checked.iter().any(|c| c == dir), "{dir} was not checked: {checked:?}");
    }
}

/// Edges that are there today: a reader that sees nothing fails here, not silently above.
#[test]
fn edges_known_to_exist_are_found() {
    let top = nvlabel().graph(&[]);
    for (from, to) in [
        ("app", "config"),
        ("config", "health"),
        ("publish", "kubeapi"),
        ("labels", "snapshot"),
        ("config", "publish"),
    ] {
        assert!(uses(&top, from).contains(to), "{from} -> {to} was not found: {top:?}");
    }
    let config = nvlabel().graph(&["config".to_string()]);
    for (from, to) in
        [("source", "settings"), ("resolve", "rows"), ("rows", "health_checks"), ("usage", "flags")]
    {
        assert!(uses(&config, from).contains(to), "config/{from} -> {to} was not found: {config:?}");
    }
    let probe = nvlabel().graph(&["probe".to_string()]);
    assert!(uses(&probe, "topology").contains("nvml_error"), "probe/topology -> nvml_error: {probe:?}");
    // `impl Daemon` is split over daemon/mod.rs and serve.rs: serve.rs calls `self.cross_check()`
    // and `self.reload()`, which only mod.rs defines, and no path leads there.
    let serve = (vec!["daemon".to_string(), "serve".to_string()], vec!["daemon".to_string()]);
    assert!(nvlabel().method_edges().contains(&serve), "daemon/serve.rs's calls into mod.rs's impl");
    let fake = fake().graph(&[]);
    for (from, to) in [("exports", "answers"), ("events", "call"), ("call", "state")] {
        assert!(uses(&fake, from).contains(to), "fake-nvml {from} -> {to} was not found: {fake:?}");
    }
}

/// Configuration on top: the rooms define their own configuration types and `config/` makes
/// them; only `app/`, the run of one command (its `startup.rs` builds the service from the
/// settings), reads `config/` (and `main.rs`, outside the library).
#[test]
fn only_the_service_builder_reads_the_configuration() {
    let readers: BTreeSet<String> = nvlabel()
        .edges()
        .into_iter()
        .filter(|(from, to)| {
            to.first().is_some_and(|m| m == "config") && from.first().is_none_or(|m| m != "config")
        })
        .map(|(from, _)| from.join("::"))
        .collect();
    let app = BTreeSet::from(["app".to_string(), "app::startup".to_string()]);
    assert_eq!(readers, app, "files outside config/ that import it");
}

#[test]
fn the_lower_layers_never_reach_up() {
    let g = nvlabel().graph(&[]);
    for lower in LOWER {
        let reached: Vec<&String> = uses(&g, lower).iter().filter(|m| UPPER.contains(&m.as_str())).collect();
        assert!(reached.is_empty(), "{lower} uses {reached:?}");
    }
}

#[test]
fn kubeapi_uses_only_the_common_leaves_publish_only_kubeapi_and_labels_labels_never_probe() {
    let g = nvlabel().graph(&[]);
    let kubeapi: Vec<&String> =
        uses(&g, "kubeapi").iter().filter(|m| !EVERYWHERE.contains(&m.as_str())).collect();
    assert!(kubeapi.is_empty(), "kubeapi uses {kubeapi:?}; it may use only {EVERYWHERE:?}");
    assert!(!uses(&g, "labels").contains("probe"), "labels uses probe: labelers read the snapshot");
    let publish: Vec<&String> = uses(&g, "publish")
        .iter()
        .filter(|m| !["kubeapi", "labels"].contains(&m.as_str()) && !EVERYWHERE.contains(&m.as_str()))
        .collect();
    assert!(publish.is_empty(), "publish uses {publish:?}");
}

#[test]
fn the_leaves_use_no_other_module() {
    let g = nvlabel().graph(&[]);
    for leaf in LEAVES {
        assert!(uses(&g, leaf).is_empty(), "{leaf} is a leaf but uses {:?}", g[*leaf]);
    }
}

/// Only `probe/` and `health/` talk to NVML; the `unsafe` code sits in their raw modules.
#[test]
fn only_probe_and_health_talk_to_nvml() {
    let mut talking = Vec::new();
    for file in nvlabel().files.values() {
        if file.parsed.external.iter().any(|e| e.starts_with("nvml_wrapper")) {
            talking.push(file.rel.clone());
        }
    }
    assert!(talking.iter().any(|f| f == "probe/raw.rs"), "nvml_wrapper was not found: {talking:?}");
    let elsewhere: Vec<&String> =
        talking.iter().filter(|f| !f.starts_with("probe/") && !f.starts_with("health/")).collect();
    assert!(elsewhere.is_empty(), "{elsewhere:?} talk to NVML");
}

/// The fake's exported symbols are the top of that crate: nothing uses `exports.rs`, and
/// `codes.rs` (return codes) uses nothing.
#[test]
fn the_fake_nvml_exports_are_its_top() {
    let g = fake().graph(&[]);
    let users: Vec<&String> = g.iter().filter(|(_, u)| u.contains("exports")).map(|(m, _)| m).collect();
    assert!(users.is_empty(), "{users:?} use exports.rs");
    assert!(uses(&g, "codes").is_empty(), "codes.rs uses {:?}", g["codes"]);
}

/// Every `.rs` file under `src/` is read as production code, declared only for tests, or the
/// binary's `main.rs`: a file left out of the module tree would be silently unchecked.
#[test]
fn every_source_file_is_accounted_for() {
    for (dir, krate, bins) in [(src(), nvlabel(), &["main.rs"][..]), (fake_src(), fake(), &[])] {
        let read: BTreeSet<&str> = krate.files.values().map(|f| f.rel.as_str()).collect();
        let mut stack = vec![dir.clone()];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).unwrap() {
                let p = entry.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                    continue;
                }
                let rel = p.strip_prefix(&dir).unwrap().to_string_lossy().into_owned();
                let known = read.contains(rel.as_str())
                    || krate.test_files.contains(&rel)
                    || bins.contains(&rel.as_str());
                assert!(!rel.ends_with(".rs") || known, "{} is in no module tree", p.display());
            }
        }
    }
}

/// docs/architecture.md names every top-level module, so the map stays the territory.
#[test]
fn the_architecture_page_names_every_module() {
    let doc = std::fs::read_to_string(repo().join("docs/architecture.md")).unwrap();
    let g = nvlabel().graph(&[]);
    assert!(g.len() > 15, "the modules were found: {g:?}");
    let missing: Vec<&String> = g
        .keys()
        .filter(|m| {
            !doc.contains(&format!("src/{m}/"))
                && !doc.contains(&format!("src/{m}.rs"))
                && !doc.contains(&format!("`{m}/`"))
                && !doc.contains(&format!("{m}.rs"))
        })
        .collect();
    assert!(missing.is_empty(), "docs/architecture.md does not name {missing:?}");
}

/// No Rust file of the repository is over 400 lines (CONTRIBUTING.md): a file that grows past it
/// is split where its concerns part, not trimmed of its comments. Held here, not by hand.
#[test]
fn no_rust_file_is_over_400_lines() {
    let mut stack: Vec<PathBuf> =
        ["src", "tests", "crates", "benches"].iter().map(|d| repo().join(d)).collect();
    let mut files = vec![repo().join("build.rs")];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten() {
            let p = entry.unwrap().path();
            match p.is_dir() {
                true => stack.push(p),
                false if p.extension().is_some_and(|e| e == "rs") => files.push(p),
                false => {}
            }
        }
    }
    assert!(files.len() > 100, "the walk found the sources: {}", files.len());
    let mut over: Vec<String> = files
        .iter()
        .filter_map(|p| {
            let lines = std::fs::read_to_string(p).unwrap().lines().count();
            (lines > 400).then(|| format!("{} ({lines} lines)", p.strip_prefix(repo()).unwrap().display()))
        })
        .collect();
    over.sort();
    assert!(over.is_empty(), "over 400 lines: {over:?}");
}
