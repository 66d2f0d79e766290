//! The rules on names and rooms: no two files of `src/` share a name unless they do the same job
//! for their rooms, and health's rooms keep apart (the judging from what reads and what writes,
//! the writers from both) and health reads the time through one seam, each breach named by its
//! file and the path it uses.

use super::imports::Crate;
use super::{nvlabel, src, uses};
use std::collections::BTreeMap;
use std::path::Path;

/// File names two files of `src/` share because they do the same job, each for its own room;
/// every other name says what its file does, so no two files of different jobs share one.
const SAME_JOB_NAMES: &[&str] = &[
    // The room's own configuration type, which `config/rooms.rs` makes: `daemon/` the loop's
    // `LoopConfig`, `health/` its `HealthConfig`.
    "config.rs",
    // The room's own Prometheus metrics: `daemon/` the labelling loop's, `health/` health's.
    "metrics.rs",
    // When to try again after a failure, on `kubeapi`'s one backoff: `kubeapi/` one API call's
    // retries, `daemon/` the loop's next pass.
    "retry.rs",
    // The topology part of each step of the pipeline: `probe/` reads it, `snapshot/` holds it,
    // `labels/` labels it.
    "topology.rs",
];

/// Every file of `src/` under `dir`, as (file name, path from `src/`): `mod.rs` and the
/// `*_tests.rs` beside a file aside.
fn src_file_names(dir: &Path) -> BTreeMap<String, Vec<String>> {
    let mut names: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if name == "mod.rs" || name.ends_with("_tests.rs") {
                continue;
            }
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            names.entry(name).or_default().push(rel);
        }
    }
    names
}

/// The names `names` gives more than one file, with the files, less the `allowed` ones.
pub fn shared_names(names: &BTreeMap<String, Vec<String>>, allowed: &[&str]) -> Vec<String> {
    names
        .iter()
        .filter(|(name, files)| files.len() > 1 && !allowed.contains(&name.as_str()))
        .map(|(name, files)| {
            let mut files = files.clone();
            files.sort();
            format!("{name}: {}", files.join(", "))
        })
        .collect()
}

/// No two files of `src/` share a name unless they do the same job for their rooms
/// ([`SAME_JOB_NAMES`]): a name says what a file does, wherever it is read.
#[test]
fn no_two_files_of_src_share_a_name() {
    let names = src_file_names(&src());
    assert!(names.len() > 100, "the walk found the sources: {}", names.len());
    let shared = shared_names(&names, SAME_JOB_NAMES);
    assert!(shared.is_empty(), "files of src/ that share a name with a different job: {shared:?}");
    let unused: Vec<&&str> =
        SAME_JOB_NAMES.iter().filter(|n| names.get(**n).is_none_or(|f| f.len() < 2)).collect();
    assert!(unused.is_empty(), "SAME_JOB_NAMES lists names no two files share any more: {unused:?}");
}

/// Health's rooms and what each may not use: module paths of the crate (as named, and the file a
/// re-export leads to) and paths of other crates. The judging is pure decisions: no NVML
/// session, thread, async runtime or API client, and neither what reads nor what writes; the
/// writers take a report and never read NVML or judge.
const HEALTH_ROOM_RULES: &[(&str, &[&str], &[&str])] = &[
    (
        "judging",
        &["health::reading", "health::writing", "probe::session", "kubeapi"],
        &["kube", "k8s_openapi", "tokio", "std::thread"],
    ),
    ("writing", &["health::reading", "health::judging"], &[]),
];

/// Whether `path` is `prefix` (`a::b`) or under it.
fn under(path: &[String], prefix: &str) -> bool {
    let prefix: Vec<&str> = prefix.split("::").collect();
    path.len() >= prefix.len() && path.iter().zip(&prefix).all(|(a, b)| a == b)
}

/// What the files of health's room `room` use that `crate_paths` and `foreign` forbid, each as
/// `file uses path`.
pub fn room_breaches(krate: &Crate, room: &str, crate_paths: &[&str], foreign: &[&str]) -> Vec<String> {
    let mut breaches = Vec::new();
    for (module, file) in &krate.files {
        if !under(module, &format!("health::{room}")) {
            continue;
        }
        for r in &file.parsed.refs {
            let resolved = krate.resolve(r);
            if let Some(p) = crate_paths.iter().find(|p| under(r, p) || under(&resolved, p)) {
                breaches.push(format!("{} uses crate::{} ({p})", file.rel, r.join("::")));
            }
        }
        for f in &file.parsed.foreign {
            if let Some(p) = foreign.iter().find(|p| under(f, p)) {
                breaches.push(format!("{} uses {} ({p})", file.rel, f.join("::")));
            }
        }
    }
    breaches
}

/// Health's rooms keep apart as node-problem-detector's monitors and exporters do: the judging
/// uses neither the reading nor the writing room, nor an NVML session, a thread, tokio or an API
/// client; the writing room uses neither the reading nor the judging room.
#[test]
fn healths_rooms_keep_apart() {
    let krate = nvlabel();
    for (room, crate_paths, foreign) in HEALTH_ROOM_RULES {
        let files = krate.files.keys().filter(|m| under(m, &format!("health::{room}"))).count();
        assert!(files > 3, "health/{room}/ was found: {files} files");
        let breaches = room_breaches(krate, room, crate_paths, foreign);
        assert!(breaches.is_empty(), "health/{room}/ uses what it may not: {breaches:#?}");
    }
    // The rule sees what these rooms do use, so it cannot pass on nothing.
    let health = krate.graph(&["health".to_string()]);
    for (from, to) in [("judging", "values"), ("writing", "values"), ("reading", "values")] {
        assert!(uses(&health, from).contains(to), "health/{from} -> {to} was not found: {health:?}");
    }
    let tokio = krate.files.values().any(|f| f.parsed.foreign.iter().any(|p| under(p, "tokio::time")));
    assert!(tokio, "other crates' paths were read (tokio::time is named in health/)");
}

/// Health reads the time through one seam, `health/mod.rs`'s `now()` and `timestamp()`: no other
/// file of it asks a clock (`Instant::now`, `SystemTime::now`, `Timestamp::now`), so a test that
/// moves tokio's time moves every wait, window and hold of health's.
#[test]
fn health_reads_the_time_through_one_seam() {
    let clocks = ["Instant", "SystemTime", "Timestamp"];
    let mut asking = Vec::new();
    let mut seam = Vec::new();
    for (module, file) in &nvlabel().files {
        if !under(module, "health") {
            continue;
        }
        for path in &file.parsed.foreign {
            let n = path.len();
            if n >= 2 && path[n - 1] == "now" && clocks.contains(&path[n - 2].as_str()) {
                let at = format!("{} uses {}", file.rel, path.join("::"));
                if file.rel == "health/mod.rs" {
                    seam.push(at)
                } else {
                    asking.push(at)
                }
            }
        }
    }
    assert!(!seam.is_empty(), "health/mod.rs's clock was found");
    assert!(asking.is_empty(), "health asks a clock outside its seam: {asking:#?}");
}
