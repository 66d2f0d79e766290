//! The chart's alerts and dashboard (`metrics.prometheusRule`, `metrics.dashboard`) as a real
//! Prometheus reads them: `promtool check rules` on the rules the chart renders, `promtool test
//! rules` with cases for every alert (testdata/alerts/rules_test.yaml: each fires when it should,
//! with its text, and stays silent when it should), every metric name they use one nvlabel
//! serves, and the objects where the Prometheus Operator and Grafana's sidecar look for them. The
//! live run (a daemon scraped until an alert fires) is `alerts_live.rs`. Needs Helm and Debian's
//! `prometheus` package; without either each test skips with one line.

use crate::common;

use common::deploy_checks::{check_locked_down, check_policy, check_rbac_exact, typed};
use common::helm::{helm, template};
use common::prometheus::{self, dashboard, dashboard_exprs, promtool, rule_object, rules_of};
use serde_json::Value;
use std::collections::BTreeSet;

/// Runs promtool in a directory holding `spec` as rules.yaml (JSON, which YAML reads) and
/// testdata/alerts' files.
fn promtool_on(spec: &Value, args: &[&str]) -> (bool, String) {
    promtool_naming(spec, args, "GPUHealthy")
}

/// [`promtool_on`] with the cases' texts naming the condition type `condition` where they name
/// the chart's default (the rules rendered with that `health.conditionType`).
fn promtool_naming(spec: &Value, args: &[&str], condition: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rules.yaml"), spec.to_string()).unwrap();
    for e in std::fs::read_dir(common::repo().join("testdata/alerts")).unwrap() {
        let e = e.unwrap();
        let text = std::fs::read_to_string(e.path()).unwrap();
        std::fs::write(dir.path().join(e.file_name()), text.replace("GPUHealthy", condition)).unwrap();
    }
    promtool(dir.path(), args)
}

#[test]
fn promtool_accepts_the_rules_the_chart_renders() {
    let test = "promtool_accepts_the_rules_the_chart_renders";
    let Some(helm) = helm(test) else { return };
    if !prometheus::present(test) {
        return;
    }
    let renderings: [(&[&str], usize); 3] = [
        (&[], 6),
        (&["--set", "health.expectedGpus=8"], 7),
        (
            &[
                "--set",
                "metrics.prometheusRule.for.xidStorm=90s",
                "--set",
                "metrics.prometheusRule.xidStorm.window=1h",
            ],
            6,
        ),
    ];
    for (args, count) in renderings {
        let spec = &rule_object(&helm, args)["spec"];
        let (ok, said) = promtool_on(spec, &["check", "rules", "rules.yaml"]);
        assert!(ok, "{args:?}: {said}");
        assert!(said.contains(&format!("SUCCESS: {count} rules found")), "{args:?}: {said}");
    }
}

#[test]
fn each_alert_fires_and_stays_silent_as_its_promtool_test_says() {
    let test = "each_alert_fires_and_stays_silent_as_its_promtool_test_says";
    let Some(helm) = helm(test) else { return };
    if !prometheus::present(test) {
        return;
    }
    let spec = &rule_object(&helm, &["--set", "health.expectedGpus=2"])["spec"];
    let (ok, said) = promtool_on(spec, &["test", "rules", "rules_test.yaml"]);
    assert!(ok, "promtool test rules:\n{said}");
    // Another condition type: the texts name it, as Prometheus renders them.
    let other = "example.com/AcceleratedHardwareReady";
    let renamed = format!("health.conditionType={other}");
    let other_spec = &rule_object(&helm, &["--set", "health.expectedGpus=2", "--set", &renamed])["spec"];
    let (ok, said) = promtool_naming(other_spec, &["test", "rules", "rules_test.yaml"], other);
    assert!(ok, "promtool test rules, the condition {other}:\n{said}");
    // Every alert has its group of cases, with a time it fires and a time it stays silent.
    let cases: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(common::repo().join("testdata/alerts/rules_test.yaml")).unwrap(),
    )
    .unwrap();
    for rule in rules_of(spec) {
        let name = rule["alert"].as_str().unwrap();
        let group = cases["tests"].as_array().unwrap().iter().find(|t| t["name"] == name);
        let checks =
            group.and_then(|g| g["alert_rule_test"].as_array()).unwrap_or_else(|| panic!("{name}: no cases"));
        let ours: Vec<&Value> = checks.iter().filter(|c| c["alertname"] == name).collect();
        let fires = ours.iter().any(|c| c["exp_alerts"].as_array().is_some_and(|a| !a.is_empty()));
        let silent = ours.iter().any(|c| c["exp_alerts"].as_array().is_some_and(|a| a.is_empty()));
        assert!(fires && silent, "{name}: a case where it fires and one where it stays silent");
    }
}

/// The metric names nvlabel serves, each as its samples carry it: the daemon's and health's
/// families, each with a series (a family without one is not encoded), as the daemon registers
/// them.
fn served() -> BTreeSet<String> {
    use nvlabel::health::metrics::{GpuLabels, HealthMetrics};
    let mut registry = prometheus_client::registry::Registry::default();
    let daemon = nvlabel::daemon::metrics::Metrics::default();
    daemon.publish_failed("node", nvlabel::publish::FailureReason::Server);
    daemon.source_failed(nvlabel::probe::Source::Nvml, "nvmlInit");
    let _ =
        daemon.sharing_mismatch.get_or_create(&nvlabel::daemon::metrics::Resource { resource: "r".into() });
    daemon.register(&mut registry);
    let health = HealthMetrics::default();
    health.healthy(0, "GPU-0", true);
    health.xid(0, "GPU-0", 13);
    health.warning(0, "GPU-0", "GpuThermalSlowdown");
    let gpu = GpuLabels { gpu: "0".into(), UUID: "GPU-0".into() };
    for family in [
        &health.sbe_volatile,
        &health.dbe_volatile,
        &health.retired_pending,
        &health.remapped_correctable,
        &health.remapped_uncorrectable,
        &health.remap_pending,
        &health.remap_failure,
        &health.pcie_replays,
        &health.clock_events,
    ] {
        family.get_or_create(&gpu).set(0);
    }
    health.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let mut names = BTreeSet::new();
    for (name, kind) in text.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.split_once(' ')) {
        match kind {
            "counter" => drop(names.insert(format!("{name}_total"))),
            "histogram" => names.extend(["_bucket", "_sum", "_count"].map(|s| format!("{name}{s}"))),
            _ => drop(names.insert(name.to_string())),
        }
    }
    names
}

/// The metric names an expression uses (nvlabel's own and the dcgm-exporter names it serves).
fn names_in(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    for prefix in ["nvlabel_", "DCGM_FI_"] {
        for (i, _) in expr.match_indices(prefix) {
            if expr[..i].chars().next_back().is_some_and(ident) {
                continue;
            }
            let rest = &expr[i..];
            out.push(rest[..rest.find(|c: char| !ident(c)).unwrap_or(rest.len())].to_string());
        }
    }
    out
}

#[test]
fn the_alerts_and_the_dashboard_use_only_metrics_nvlabel_serves() {
    let Some(helm) = helm("the_alerts_and_the_dashboard_use_only_metrics_nvlabel_serves") else { return };
    let served = served();
    let spec = &rule_object(&helm, &["--set", "health.expectedGpus=2"])["spec"];
    let mut exprs: Vec<(String, String)> = rules_of(spec)
        .iter()
        .map(|r| (r["alert"].to_string(), r["expr"].as_str().unwrap().to_string()))
        .collect();
    let (_, json) = dashboard(&helm, &[]);
    exprs.extend(dashboard_exprs(&json).into_iter().map(|e| ("the dashboard".to_string(), e)));
    let variables = json["templating"]["list"].as_array().unwrap();
    exprs.extend(
        variables.iter().filter_map(|v| Some(("a variable".into(), v["definition"].as_str()?.into()))),
    );
    let mut used = 0;
    for (what, expr) in &exprs {
        for name in names_in(expr) {
            assert!(
                served.contains(&name),
                "{what}: {name} is no metric nvlabel serves ({expr})\nserved: {served:?}"
            );
            used += 1;
        }
    }
    assert!(used > 30, "{used} names found: the search finds the names");
}

#[test]
fn the_rule_and_the_dashboard_are_where_the_operator_and_grafana_look() {
    let Some(helm) = helm("the_rule_and_the_dashboard_are_where_the_operator_and_grafana_look") else {
        return;
    };
    // Off by default, in every mode; never for the one-shot Job, which serves no metrics.
    let both = ["--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.dashboard.enabled=true"];
    let kinds = |args: &[&str]| -> Vec<String> {
        let docs = template(&helm, "nvlabel", args).unwrap();
        docs.iter().map(|d| format!("{}/{}", d["kind"], d["metadata"]["name"].as_str().unwrap())).collect()
    };
    let plain = kinds(&[]);
    assert!(!plain.iter().any(|k| k.contains("PrometheusRule") || k.ends_with("-dashboard")), "{plain:?}");
    let job = [&both[..], &["--set", "mode=job", "--set", "job.nodeName=n"]].concat();
    assert!(!kinds(&job).iter().any(|k| k.contains("PrometheusRule") || k.ends_with("-dashboard")));
    // The deploy checks still hold with both.
    let docs = template(&helm, "nvlabel", &[&both[..], &["--set", "health.enabled=true"]].concat()).unwrap();
    let r = typed("with alerts and dashboard", &docs);
    check_locked_down("with alerts and dashboard", &r);
    check_rbac_exact("with alerts and dashboard", &r);
    check_policy("with alerts and dashboard", &r);

    // The PrometheusRule: kube-prometheus-stack's ruleSelector label, its namespace, the values.
    let rule = rule_object(
        &helm,
        &[
            "--set",
            "metrics.prometheusRule.labels.release=kube-prometheus-stack",
            "--set",
            "metrics.prometheusRule.namespace=monitoring",
            "--set",
            "metrics.prometheusRule.additionalRuleLabels.team=gpu",
            "--set",
            "metrics.prometheusRule.for.gpuUnhealthy=7m",
            "--set",
            "metrics.prometheusRule.xidStorm.count=25",
            "--set",
            "health.expectedGpus=8",
            "--set",
            "metrics.prometheusRule.expectedGpus=4",
        ],
    );
    assert_eq!(rule["metadata"]["labels"]["release"], "kube-prometheus-stack");
    assert_eq!(rule["metadata"]["namespace"], "monitoring");
    let rules = rules_of(&rule["spec"]);
    let by_name = |n: &str| rules.iter().find(|r| r["alert"] == n).unwrap_or_else(|| panic!("{n}")).clone();
    assert_eq!(by_name("NvlabelGpuUnhealthy")["for"], "7m");
    assert!(by_name("NvlabelXidStorm")["expr"].as_str().unwrap().ends_with(">= 25"));
    assert!(
        by_name("NvlabelGpuCountBelowExpected")["expr"].as_str().unwrap().ends_with("< 4"),
        "the rule's own count wins"
    );
    assert!(rules.iter().all(|r| r["labels"]["team"] == "gpu" && r["labels"]["severity"].is_string()));
    let default = rule_object(&helm, &[]);
    assert_eq!(default["metadata"]["namespace"], "nvlabel", "the chart's namespace");
    let names: Vec<String> =
        rules_of(&default["spec"]).iter().map(|r| r["alert"].as_str().unwrap().to_string()).collect();
    assert_eq!(
        names,
        [
            "NvlabelGpuUnhealthy",
            "NvlabelNvmlHung",
            "NvlabelGpuMissing",
            "NvlabelXidStorm",
            "NvlabelLabelsNotPublished",
            "NvlabelApiFailures"
        ],
        "no count to compare with: no count alert"
    );

    // The dashboard: the sidecar's label (its default, or another), namespace, folder annotation.
    let (map, json) = dashboard(&helm, &[]);
    assert_eq!(map["metadata"]["labels"]["grafana_dashboard"], "1");
    assert_eq!(map["metadata"]["namespace"], "nvlabel");
    let (map, _) = dashboard(
        &helm,
        &[
            "--set",
            "metrics.dashboard.label=my_dashboards",
            "--set",
            "metrics.dashboard.labelValue=yes",
            "--set",
            "metrics.dashboard.namespace=grafana",
            "--set",
            "metrics.dashboard.annotations.grafana_folder=GPUs",
        ],
    );
    assert_eq!(map["metadata"]["labels"]["my_dashboards"], "yes");
    assert!(map["metadata"]["labels"].get("grafana_dashboard").is_none());
    assert_eq!(
        (&map["metadata"]["namespace"], &map["metadata"]["annotations"]["grafana_folder"]),
        (&"grafana".into(), &"GPUs".into())
    );
    // Fleet panels, then one node's: every query of the second row names the `node` variable.
    let vars: Vec<&Value> = json["templating"]["list"].as_array().unwrap().iter().collect();
    assert!(vars
        .iter()
        .any(|v| v["name"] == "node" && v["definition"] == "label_values(nvlabel_passes_total, node)"));
    let rows: Vec<usize> = json["panels"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(_, p)| p["type"] == "row")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(rows.len(), 2, "a fleet row and a node row");
    for p in &json["panels"].as_array().unwrap()[rows[1] + 1..] {
        for t in p["targets"].as_array().unwrap() {
            assert!(t["expr"].as_str().unwrap().contains("node=\"$node\""), "{}: {}", p["title"], t["expr"]);
        }
    }
    // The ServiceMonitor gives every series the `node` label all of this groups by.
    let docs = template(&helm, "nvlabel", &["--set", "metrics.serviceMonitor.enabled=true"]).unwrap();
    let monitor = docs.iter().find(|d| d["kind"] == "ServiceMonitor").unwrap();
    let relabel = &monitor["spec"]["endpoints"][0]["relabelings"][0];
    assert_eq!(
        (&relabel["sourceLabels"][0], &relabel["targetLabel"]),
        (&"__meta_kubernetes_pod_node_name".into(), &"node".into())
    );
}

/// The alerts' and the dashboard's texts name the condition the daemons write
/// (`health.conditionType`), whatever it is; nothing names the default then.
#[test]
fn the_texts_name_the_condition_type_the_daemons_write() {
    let Some(helm) = helm("the_texts_name_the_condition_type_the_daemons_write") else { return };
    for condition in ["GPUHealthy", "AcceleratedHardwareReady", "example.com/GpuReady"] {
        let set = format!("health.conditionType={condition}");
        let args = ["--set", &set];
        let rule = rule_object(&helm, &args);
        let rules = rules_of(&rule["spec"]);
        let text = |name: &str| {
            let r = rules.iter().find(|r| r["alert"] == name).unwrap_or_else(|| panic!("{name}"));
            r["annotations"]["description"].as_str().unwrap().to_string()
        };
        let unhealthy = format!("its node's {condition} condition and Warning Events name it");
        assert!(text("NvlabelGpuUnhealthy").contains(&unhealthy), "{}", text("NvlabelGpuUnhealthy"));
        let hung = format!("its node's {condition} condition is Unknown (NvmlUnresponsive)");
        assert!(text("NvlabelNvmlHung").contains(&hung), "{}", text("NvlabelNvmlHung"));
        let (_, json) = dashboard(&helm, &args);
        let panels = json["panels"].as_array().unwrap();
        let table = panels.iter().find(|p| p["title"] == "Unhealthy GPUs" && p["type"] == "table").unwrap();
        let says = format!(
            "Each GPU with a recorded fault; the node's {condition} condition says which and what to do"
        );
        assert_eq!(table["description"], says.as_str());
        if condition != "GPUHealthy" {
            let (rule, json) = (rule.to_string(), json.to_string());
            assert!(!rule.contains("GPUHealthy") && !json.contains("GPUHealthy"), "{rule}\n{json}");
        }
    }
}
