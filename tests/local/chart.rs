//! The Helm chart (deploy/helm/nvlabel): `helm lint --strict` in every mode, and the static
//! manifests under deploy/ equal to its rendering. Its rendering with many values, and wrong values
//! refused, are in `chart_values.rs`.
//! Needs a Helm binary: `NVLABEL_HELM` (CI sets it from .ci/fetch-helm) or `helm` on PATH;
//! without one each test skips with one line.

use crate::common;

use common::helm::{chart, helm, MODES};
use common::repo;
use std::process::Command;

#[test]
fn helm_lint_strict_is_clean_in_every_mode() {
    let Some(helm) = helm("helm_lint_strict_is_clean_in_every_mode") else { return };
    let with_health = [("node", "true"), ("nfd-nodefeature", "true")];
    for (mode, health) in MODES.map(|m| (m, "false")).into_iter().chain(with_health) {
        let out = Command::new(&helm)
            .args(["lint", "--strict"])
            .arg(chart())
            .args(["--set", &format!("mode={mode}"), "--set", "job.nodeName=gpu-node-1"])
            .args(["--set", &format!("health.enabled={health}")])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{mode} health={health}: {text}");
        assert!(!text.contains("[WARNING]") && !text.contains("[ERROR]"), "{mode} health={health}: {text}");
    }
}

#[test]
fn the_static_manifests_are_the_charts_rendering() {
    let Some(helm) = helm("the_static_manifests_are_the_charts_rendering") else { return };
    let dir = tempfile::tempdir().unwrap();
    let status =
        Command::new(repo().join("deploy/render.sh")).arg(dir.path()).env("HELM", &helm).status().unwrap();
    assert!(status.success());
    let more = ["node-health", "nfd-nodefeature-health", "node-health-dra", "operator-health"];
    for mode in MODES.into_iter().chain(more) {
        let path = format!("{mode}/nvlabel.yaml");
        let fresh = std::fs::read_to_string(dir.path().join(&path)).unwrap();
        let checked_in = std::fs::read_to_string(repo().join("deploy").join(&path)).unwrap();
        assert!(fresh == checked_in, "deploy/{path} is stale: run `deploy/render.sh` and commit the result");
    }
}
