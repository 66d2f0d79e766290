//! The chart's alerts and dashboard in a running Prometheus: a health daemon on the fake NVML
//! and the real API server, scraped every second by a real Prometheus loaded with the rules the
//! chart renders (`for` set short through the chart's values); a GPU fault through the fake's
//! event file brings `NvlabelGpuUnhealthy` to `firing` for that GPU alone, every rule evaluates
//! without error, and every query of the dashboard runs. Needs Helm, Debian's `prometheus`
//! package and `NVLABEL_KUBE_TEST_SERVER`; without any of them the test skips with one line.

use crate::common;

use common::apiserver;
use common::health_daemon::{daemon_on, event_line, logs, until};
use common::helm::helm;
use common::prometheus::{self, dashboard, dashboard_exprs, rule_object, Prometheus};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// The address the daemon logging JSON to `dir` serves `/metrics` on, once it says so.
fn metrics_addr(dir: &Path) -> String {
    let start = Instant::now();
    loop {
        let found = logs(dir).lines().find_map(|l| {
            let v: Value = serde_json::from_str(l).ok()?;
            (v["message"] == "serving /healthz, /readyz and /metrics")
                .then(|| v["addr"].as_str().unwrap().to_string())
        });
        if let Some(addr) = found {
            return addr;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the daemon never served /metrics:\n{}",
            logs(dir)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One scrape and one rule evaluation a second, the daemon labelled with its node as the
/// chart's ServiceMonitor labels it.
fn config(target: &str) -> String {
    format!(
        "global: {{scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}}\n\
         rule_files: [rules.yaml]\n\
         scrape_configs:\n\
         - job_name: nvlabel\n  static_configs:\n  - targets: ['{target}']\n    labels: {{node: gpu-a}}\n"
    )
}

/// The alerts named `name` in `state`.
fn alerts(p: &Prometheus, name: &str, state: &str) -> Vec<Value> {
    p.alerts().into_iter().filter(|a| a["labels"]["alertname"] == name && a["state"] == state).collect()
}

#[tokio::test]
async fn a_gpu_fault_fires_its_alert_in_a_real_prometheus_and_every_dashboard_query_runs() {
    let test = "a_gpu_fault_fires_its_alert_in_a_real_prometheus_and_every_dashboard_query_runs";
    let Some(helm) = helm(test) else { return };
    if !prometheus::present(test) {
        return;
    }
    let Some(server) = apiserver::server(test) else { return };
    let short = ["--set", "metrics.prometheusRule.for.gpuUnhealthy=2s", "--set", "health.expectedGpus=2"];
    let rules = rule_object(&helm, &short)["spec"].to_string();
    let (_, board) = dashboard(&helm, &[]);
    let (admin, dir, _daemon) =
        daemon_on(server, "h100x2", &["--metrics-addr=127.0.0.1:0", "--log-format=json"]).await;
    let d = dir.path();
    let prom = Prometheus::start(&config(&metrics_addr(d)), &rules);
    let daemon_log = || logs(d);

    // Both GPUs scraped healthy, and every rule evaluated at least once without an error.
    let minute = Duration::from_secs(60);
    prom.until(
        "both GPUs scraped healthy",
        minute,
        |p| (p.query("nvlabel_gpu_healthy == 1").ok()?.len() == 2).then_some(()),
        daemon_log,
    );
    prom.until(
        "every rule evaluated",
        minute,
        |p| {
            let groups = p.get("/api/v1/rules", &[])["data"]["groups"].as_array()?.clone();
            let rules: Vec<Value> =
                groups.iter().flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default()).collect();
            for r in &rules {
                assert_ne!(r["health"], "err", "{}: {}", r["name"], r["lastError"]);
            }
            // "unknown" until its first evaluation.
            (rules.len() == 7 && rules.iter().all(|r| r["health"] == "ok")).then_some(())
        },
        daemon_log,
    );
    // A rule evaluated before the first reading saw no GPU yet (the count alert pending): gone
    // at the next evaluation.
    prom.until(
        "no alert on a healthy node",
        minute,
        |p| p.alerts().is_empty().then_some(()),
        || format!("{:?}", prom.alerts()),
    );

    // An Xid the catalog says needs a reboot, on GPU 0.
    event_line(d, "0 xid 79");
    until(&admin, "the fault on the condition", |c| c.0 == "False").await;
    let firing = prom.until(
        "NvlabelGpuUnhealthy firing",
        minute,
        |p| {
            let found = alerts(p, "NvlabelGpuUnhealthy", "firing");
            (!found.is_empty()).then_some(found)
        },
        daemon_log,
    );
    assert_eq!(firing.len(), 1, "{firing:?}");
    let labels = &firing[0]["labels"];
    assert_eq!(
        (&labels["gpu"], &labels["node"], &labels["severity"]),
        (&"0".into(), &"gpu-a".into(), &"critical".into())
    );
    assert_eq!(labels["UUID"], "GPU-a1b2c3d4-0000-4000-8000-000000000000");
    assert_eq!(firing[0]["annotations"]["summary"], "GPU 0 on node gpu-a has a fault");
    let others: Vec<Value> =
        prom.alerts().into_iter().filter(|a| a["labels"]["alertname"] != "NvlabelGpuUnhealthy").collect();
    assert!(others.is_empty(), "one fault, one alert: {others:?}");

    // Every dashboard query, with Grafana's variables as it fills them in, runs in Prometheus.
    let exprs = dashboard_exprs(&board);
    for expr in &exprs {
        let filled = expr.replace("$__rate_interval", "1m").replace("$node", "gpu-a");
        if let Err(e) = prom.query(&filled) {
            panic!("the dashboard's query {filled}: {e}");
        }
    }
    // The node variable lists the node; the node's panels have its GPUs.
    let nodes = prom.get("/api/v1/label/node/values", &[("match[]", "nvlabel_passes_total")]);
    assert_eq!(nodes["data"], serde_json::json!(["gpu-a"]));
    let health =
        exprs.iter().find(|e| e.starts_with("nvlabel_gpu_healthy{")).unwrap().replace("$node", "gpu-a");
    assert_eq!(prom.query(&health).unwrap().len(), 2, "{health}");
}
