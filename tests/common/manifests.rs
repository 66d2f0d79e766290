//! The manifests under deploy/, rendered the way kustomize renders them (resources, then inline
//! JSON6902 patches), for the static checks and the real-API tier.
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};

/// The overlays a user can apply.
pub const MODES: [&str; 4] = ["nfd-file", "nfd-nodefeature", "node", "job"];

/// The overlays with GPU health on (the chart with health.enabled=true), and their modes.
pub const HEALTH: [(&str, &str); 2] =
    [("node-health", "node"), ("nfd-nodefeature-health", "nfd-nodefeature")];

/// The overlays of DRA nodes (the chart with allocationMode=dra, health on), and their modes.
pub const DRA: [(&str, &str); 1] = [("node-health-dra", "node")];

/// `deploy/`.
pub fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy")
}

pub fn yaml_docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let docs: Vec<Value> =
        serde_saphyr::from_str_multiple(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// Renders a kustomization directory: its resources (files, or directories rendered in turn),
/// then its patches.
pub fn render(dir: &Path) -> Vec<Value> {
    let k = yaml_docs(&dir.join("kustomization.yaml")).remove(0);
    for key in k.as_object().unwrap().keys() {
        assert!(
            ["apiVersion", "kind", "resources", "patches"].contains(&key.as_str()),
            "{}: the renderer does not know `{key}`",
            dir.display()
        );
    }
    let mut out = Vec::new();
    for r in k["resources"].as_array().into_iter().flatten() {
        let path = dir.join(r.as_str().unwrap());
        if path.is_dir() {
            out.extend(render(&path));
        } else {
            out.extend(yaml_docs(&path));
        }
    }
    patch(dir, &k, &mut out);
    out
}

/// Applies a kustomization's inline JSON6902 patches.
fn patch(dir: &Path, k: &Value, out: &mut [Value]) {
    for p in k["patches"].as_array().into_iter().flatten() {
        let target = &p["target"];
        let ops: Value =
            serde_saphyr::from_str(p["patch"].as_str().expect("an inline JSON6902 patch")).unwrap();
        let ops: json_patch::Patch = serde_json::from_value(ops).unwrap();
        let mut hits = 0;
        for doc in
            out.iter_mut().filter(|d| d["kind"] == target["kind"] && d["metadata"]["name"] == target["name"])
        {
            json_patch::patch(doc, &ops).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            hits += 1;
        }
        assert_eq!(hits, 1, "{}: a patch must hit exactly one object: {target}", dir.display());
    }
}
