//! Docs equal the binary, for labels: the keys README.md's two label tables ("Label catalog" and
//! "Labels GFD never gave") name are exactly the keys the binary gives on the bundled machines
//! (every golden file, under every MIG strategy, sharing config, extended and DRA profile): no
//! label the binary writes is missing from the tables, and no key the tables name is one the
//! binary never writes. Placeholders (`<P>`, `<model>`, `*`) stand for any text, `{a,b}` for
//! either; a cell's code span starting with `.` continues the one before it.

use crate::common;

use common::*;
use std::collections::BTreeSet;

/// The README section from `heading` to the next `## `.
fn section<'a>(readme: &'a str, heading: &str) -> &'a str {
    let start = readme.find(heading).unwrap_or_else(|| panic!("README has no {heading:?}"));
    let rest = &readme[start + heading.len()..];
    &rest[..rest.find("\n## ").unwrap_or(rest.len())]
}

/// `{a,b}` expanded (one level, several groups).
fn expand(pattern: &str) -> Vec<String> {
    let Some(open) = pattern.find('{') else { return vec![pattern.to_string()] };
    let close = open + pattern[open..].find('}').expect("a closing brace");
    let (head, tail) = (&pattern[..open], &pattern[close + 1..]);
    pattern[open + 1..close].split(',').flat_map(|alt| expand(&format!("{head}{alt}{tail}"))).collect()
}

/// The key patterns of the label tables' first column, `<...>` and `*` written as `*`.
fn documented() -> Vec<String> {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let mut out = Vec::new();
    for heading in ["## Label catalog\n", "## Labels GFD never gave\n"] {
        for row in section(&readme, heading).lines().filter(|l| l.starts_with("| `")) {
            let cell = row.split('|').nth(1).unwrap();
            let mut previous = String::new();
            for span in cell.split('`').skip(1).step_by(2) {
                let full = match span.strip_prefix('.') {
                    Some(rest) => format!("{}.{rest}", previous.rsplit_once('.').unwrap().0),
                    None => span.to_string(),
                };
                previous = full.clone();
                let mut wild = String::new();
                let mut rest = full.as_str();
                while let Some(lt) = rest.find('<') {
                    let gt = lt + rest[lt..].find('>').unwrap();
                    wild.push_str(&rest[..lt]);
                    wild.push('*');
                    rest = &rest[gt + 1..];
                }
                wild.push_str(rest);
                // An example value written in the key column (`mig-1g.5gb.count=7`) is not a key.
                out.extend(expand(&wild).into_iter().filter(|k| !k.contains('=')));
            }
        }
    }
    out
}

/// Whether `key` matches `pattern`, where `*` is any non-empty text.
fn matches(pattern: &str, key: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == key,
        Some((head, tail)) => {
            let Some(rest) = key.strip_prefix(head) else { return false };
            (1..=rest.len()).any(|i| rest.is_char_boundary(i) && matches(tail, &rest[i..]))
        }
    }
}

/// Every key of every golden label file, without the `nvidia.com/` prefix.
fn given() -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for e in std::fs::read_dir(repo().join("testdata/golden")).unwrap().flatten() {
        if !e.file_name().to_string_lossy().ends_with(".labels") {
            continue;
        }
        for line in std::fs::read_to_string(e.path()).unwrap().lines() {
            let key = line.split_once('=').map_or(line, |(k, _)| k);
            keys.insert(key.strip_prefix("nvidia.com/").unwrap_or(key).to_string());
        }
    }
    keys
}

#[test]
fn the_label_tables_name_exactly_the_keys_the_binary_gives() {
    let (patterns, keys) = (documented(), given());
    assert!(patterns.len() > 40 && keys.len() > 40, "{patterns:?} {keys:?}");
    let undocumented: Vec<&String> =
        keys.iter().filter(|k| !patterns.iter().any(|p| matches(p, k))).collect();
    assert!(
        undocumented.is_empty(),
        "labels the binary gives that README's tables do not name: {undocumented:?}"
    );
    // The timestamp and the DMI machine name need a clock and a DMI file the goldens leave out.
    let never: Vec<&String> = patterns
        .iter()
        .filter(|p| !["gfd.timestamp", "gpu.machine"].contains(&p.as_str()))
        .filter(|p| !keys.iter().any(|k| matches(p, k)))
        .collect();
    assert!(never.is_empty(), "keys README's tables name that no bundled machine gets: {never:?}");
}

#[test]
fn patterns_expand_and_match_as_the_tables_mean() {
    assert_eq!(expand("cuda.driver.{major,minor}"), ["cuda.driver.major", "cuda.driver.minor"]);
    assert!(matches("mig-*.count", "mig-1g.5gb.count"));
    assert!(!matches("mig-*.count", "mig-.count"));
    assert!(!matches("gpu.count", "gpu.counts"));
}
