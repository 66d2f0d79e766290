//! The Helm binary for the chart tests, and `helm template` of the chart.
#![allow(dead_code)]

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

/// The chart's `mode` values.
pub const MODES: [&str; 4] = ["nfd-nodefeature", "nfd-file", "node", "job"];

/// The Helm binary: `NVLABEL_HELM` (CI sets it from .ci/fetch-helm) or `helm` on PATH; `None`
/// after a one-line skip (once per test binary).
pub fn helm(test: &str) -> Option<PathBuf> {
    let from_env = std::env::var_os("NVLABEL_HELM").filter(|v| !v.is_empty()).map(PathBuf::from);
    let found = from_env.or_else(|| {
        let ok = Command::new("helm").arg("version").output().is_ok_and(|o| o.status.success());
        ok.then(|| PathBuf::from("helm"))
    });
    static SAID: std::sync::Once = std::sync::Once::new();
    if found.is_none() {
        SAID.call_once(|| {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "skipping the chart tests ({test} and the rest): no helm (set NVLABEL_HELM; .ci/fetch-helm fetches the pinned one)"
            );
        });
    }
    found
}

/// deploy/helm/nvlabel.
pub fn chart() -> PathBuf {
    super::repo().join("deploy/helm/nvlabel")
}

/// `helm template` of the chart: the documents, or helm's error message.
pub fn template(helm: &PathBuf, release: &str, args: &[&str]) -> Result<Vec<Value>, String> {
    let out = Command::new(helm)
        .args(["template", release])
        .arg(chart())
        .args(["--namespace", "default"])
        .args(args)
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = String::from_utf8(out.stdout).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_str_multiple(&text).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}
