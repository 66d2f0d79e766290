//! The house stays without a circle: no top-level module of `src/` uses one that uses it back,
//! directly or through others, and the lower layers never reach up into the configuration, the
//! daemon or health. Read from the source (every `crate::` path outside test code), so a new
//! import that closes a circle fails here, not in a review.

mod common;

use std::collections::{BTreeMap, BTreeSet};

/// Top-level module -> the top-level modules its non-test code names.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let src = common::repo().join("src");
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path.strip_prefix(&src).unwrap().to_string_lossy().to_string();
            if !rel.ends_with(".rs") || rel.ends_with("_tests.rs") || rel == "main.rs" || rel == "lib.rs" {
                continue;
            }
            let top = rel.split('/').next().unwrap().trim_end_matches(".rs").to_string();
            let text = std::fs::read_to_string(&path).unwrap();
            // Test modules may reach anywhere; they sit after the code they test.
            let code = text.split("#[cfg(test)]").next().unwrap();
            let uses = g.entry(top.clone()).or_default();
            for (i, _) in code.match_indices("crate::") {
                let name: String =
                    code[i + 7..].chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
                if !name.is_empty() && name != top {
                    uses.insert(name);
                }
            }
        }
    }
    g
}

/// A path from `from` back to `to`, if there is one.
fn path(
    g: &BTreeMap<String, BTreeSet<String>>,
    from: &str,
    to: &str,
    seen: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
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

#[test]
fn no_module_uses_one_that_uses_it_back() {
    let g = graph();
    assert!(g.len() > 10, "the source was read: {g:?}");
    for (module, uses) in &g {
        for used in uses {
            if let Some(back) = path(&g, used, module, &mut BTreeSet::new()) {
                panic!("a circle: {module} -> {}", back.join(" -> "));
            }
        }
    }
}

#[test]
fn the_lower_layers_never_reach_up() {
    let g = graph();
    let upper = ["config", "daemon", "health", "pass", "http"];
    for lower in
        ["publish", "kubeapi", "probe", "labels", "snapshot", "sharing", "conditions", "limits", "logging"]
    {
        let reached: Vec<&String> =
            g.get(lower).into_iter().flatten().filter(|m| upper.contains(&m.as_str())).collect();
        assert!(reached.is_empty(), "{lower} uses {reached:?}");
    }
}

/// docs/architecture.md names every top-level module, so the map stays the territory.
#[test]
fn the_architecture_page_names_every_module() {
    let doc = std::fs::read_to_string(common::repo().join("docs/architecture.md")).unwrap();
    let missing: Vec<String> = graph()
        .into_keys()
        .filter(|m| {
            !doc.contains(&format!("src/{m}/"))
                && !doc.contains(&format!("src/{m}.rs"))
                && !doc.contains(&format!("`{m}/`"))
                && !doc.contains(&format!("{m}.rs"))
        })
        .collect();
    assert!(missing.is_empty(), "docs/architecture.md does not name {missing:?}");
}
