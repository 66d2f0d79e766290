//! Docs' examples select the nodes nvlabel runs on: every node selector in a YAML example of
//! README.md and docs/*.md that asks for a GPU node by an `nvidia.com/` label's presence
//! (`Exists`, `In ["true"]`, or `"true"` in `matchLabels`/`nodeSelector`) names a label the binary
//! writes on every bundled GPU machine in every profile (device-plugin: every MIG strategy,
//! sharing config and the extended labels; DRA), and on no machine without a GPU. A remediation
//! tool whose selector misses a profile (`nvidia.com/gpu.present` is DRA-only) never acts there.

use crate::common;

use common::*;
use serde_json::Value;
use std::collections::BTreeMap;

/// Every golden label file by name (`<machine>.<profile>.labels`), as its keys and values.
fn goldens() -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(repo().join("testdata/golden")).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".labels") {
            let text = std::fs::read_to_string(e.path()).unwrap();
            let labels = text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.into(), v.into()));
            out.insert(stem.to_string(), labels.collect());
        }
    }
    out
}

/// The YAML blocks of a Markdown text, each with its line.
fn yaml_blocks(text: &str) -> Vec<(usize, String)> {
    let (mut out, mut current) = (Vec::new(), None::<(usize, String)>);
    for (i, line) in text.lines().enumerate() {
        match &mut current {
            None if line.trim_start() == "```yaml" => current = Some((i + 1, String::new())),
            Some(_) if line.trim_start() == "```" => out.push(current.take().unwrap()),
            Some((_, block)) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    out
}

/// The `nvidia.com/` keys a YAML value selects nodes by presence: `(key, how)`.
fn presence_selectors(v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(map) => {
            for (k, inner) in map {
                match (k.as_str(), inner) {
                    ("matchExpressions", Value::Array(exprs)) => {
                        for e in exprs {
                            let key = e["key"].as_str().unwrap_or_default();
                            let op = e["operator"].as_str().unwrap_or_default();
                            let values = e["values"].as_array().cloned().unwrap_or_default();
                            let presence = op == "Exists" || (op == "In" && values == [Value::from("true")]);
                            if presence && key.starts_with("nvidia.com/") {
                                out.push((key.to_string(), format!("{op} {values:?}")));
                            }
                        }
                    }
                    ("matchLabels" | "nodeSelector", Value::Object(labels)) => {
                        for (key, value) in labels {
                            if key.starts_with("nvidia.com/") && value == "true" {
                                out.push((key.clone(), format!("{k} {key}=true")));
                            }
                        }
                    }
                    _ => {}
                }
                presence_selectors(inner, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|i| presence_selectors(i, out)),
        _ => {}
    }
}

/// Why `key` does not select exactly the GPU nodes, if it does not. `no-driver` (a vGPU host
/// whose driver nvlabel cannot read) is neither: nothing is known of its GPUs.
fn misses(key: &str, goldens: &BTreeMap<String, BTreeMap<String, String>>) -> Option<String> {
    let no_gpu = |name: &str| name.starts_with("no-gpus.");
    let gpu = |name: &str| !no_gpu(name) && !name.starts_with("no-driver.");
    let absent: Vec<&String> =
        goldens.iter().filter(|(n, l)| gpu(n) && !l.contains_key(key)).map(|(n, _)| n).collect();
    if !absent.is_empty() {
        let some = &absent[..absent.len().min(6)];
        return Some(format!(
            "not written on {} bundled GPU machines and profiles, e.g. {some:?}",
            absent.len()
        ));
    }
    let present: Vec<&String> =
        goldens.iter().filter(|(n, l)| no_gpu(n) && l.contains_key(key)).map(|(n, _)| n).collect();
    (!present.is_empty()).then(|| format!("written on machines without a GPU: {present:?}"))
}

#[test]
fn node_selectors_in_the_docs_select_every_gpu_node_nvlabel_labels_in_every_profile() {
    let goldens = goldens();
    assert!(goldens.keys().any(|n| n.ends_with(".dra")) && goldens.keys().any(|n| n.starts_with("no-gpus.")));
    let mut found = 0;
    let mut wrong = Vec::new();
    for doc in doc_files() {
        let text = std::fs::read_to_string(repo().join(&doc)).unwrap();
        for (line, block) in yaml_blocks(&text) {
            let Ok(values): Result<Vec<Value>, _> = serde_saphyr::from_str_multiple(&block) else { continue };
            let mut selectors = Vec::new();
            values.iter().for_each(|v| presence_selectors(v, &mut selectors));
            for (key, how) in selectors {
                found += 1;
                if let Some(why) = misses(&key, &goldens) {
                    wrong.push(format!("{doc}:{line}: {how} on {key}: {why}"));
                }
            }
        }
    }
    assert!(found > 0, "no presence selector found in the docs: the extraction is broken");
    assert!(wrong.is_empty(), "examples that select the wrong nodes:\n{}", wrong.join("\n"));
}

#[test]
fn a_selector_of_the_dra_profile_alone_is_caught() {
    let goldens = goldens();
    assert!(misses("nvidia.com/gpu.present", &goldens).is_some_and(|w| w.contains(".none")));
    assert!(misses("nvidia.com/vgpu.present", &goldens).is_some_and(|w| w.contains("without a GPU")));
    assert_eq!(misses("nvidia.com/gpu.product", &goldens), None);
    let mut found = Vec::new();
    let yaml = "spec:\n  selector:\n    matchExpressions:\n      - {key: nvidia.com/gpu.present, operator: Exists}\n      - {key: nvidia.com/gpu.count, operator: Gt, values: ['1']}\n  nodeSelector: {nvidia.com/mig.capable: 'true'}\n";
    presence_selectors(&serde_saphyr::from_str(yaml).unwrap(), &mut found);
    let mut keys: Vec<&str> = found.iter().map(|(k, _)| k.as_str()).collect();
    keys.sort();
    assert_eq!(keys, ["nvidia.com/gpu.present", "nvidia.com/mig.capable"]);
}
