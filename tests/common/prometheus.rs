//! A real Prometheus for the alert tests: Debian's `prometheus` package (`prometheus` and
//! `promtool` on PATH; `.ci/run` installs it). Without them the tests skip with one line. A
//! server runs on loopback (a free port it picks itself) with its storage in a temporary
//! directory, and is killed when dropped; its API is read with plain HTTP/1.0 requests. Also
//! the chart's rules and dashboard as they are rendered for it.
#![allow(dead_code)]

use serde_json::Value;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The PrometheusRule rendered with `args` (and `metrics.prometheusRule.enabled`).
pub fn rule_object(helm: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--set", "metrics.prometheusRule.enabled=true"];
    all.extend(args);
    let docs = super::helm::template(&helm.to_path_buf(), "nvlabel", &all)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    docs.into_iter()
        .find(|d| d["kind"] == "PrometheusRule")
        .unwrap_or_else(|| panic!("{args:?}: no PrometheusRule"))
}

/// Every rule of a spec.
pub fn rules_of(spec: &Value) -> Vec<Value> {
    spec["groups"].as_array().unwrap().iter().flat_map(|g| g["rules"].as_array().unwrap().clone()).collect()
}

/// The dashboard rendered with `args` (dashboard enabled): the ConfigMap and its JSON.
pub fn dashboard(helm: &Path, args: &[&str]) -> (Value, Value) {
    let mut all = vec!["--set", "metrics.dashboard.enabled=true"];
    all.extend(args);
    let docs = super::helm::template(&helm.to_path_buf(), "nvlabel", &all).unwrap();
    let map = docs.into_iter().find(|d| d["metadata"]["name"] == "nvlabel-dashboard").expect("the dashboard");
    let json =
        serde_json::from_str(map["data"]["nvlabel.json"].as_str().unwrap()).expect("the dashboard is JSON");
    (map, json)
}

/// Every query of the dashboard: each panel's targets' `expr`.
pub fn dashboard_exprs(json: &Value) -> Vec<String> {
    let panels = json["panels"].as_array().unwrap();
    let targets = panels.iter().flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default());
    targets.map(|t| t["expr"].as_str().unwrap().to_string()).collect()
}

/// Whether `prometheus` and `promtool` run; says once per test binary why not.
pub fn present(test: &str) -> bool {
    let runs = |tool: &str| Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success());
    let found = runs("promtool") && runs("prometheus");
    static SAID: std::sync::Once = std::sync::Once::new();
    if !found {
        SAID.call_once(|| {
            let _ = writeln!(
                std::io::stderr(),
                "skipping the Prometheus tests ({test} and the rest): no prometheus and promtool on PATH (Debian's prometheus package; .ci/run installs it)"
            );
        });
    }
    found
}

/// `promtool ARGS` run in `dir`: whether it succeeded, and what it said.
pub fn promtool(dir: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new("promtool").args(args).current_dir(dir).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), said)
}

/// A running Prometheus.
pub struct Prometheus {
    child: Child,
    /// Its `host:port`.
    pub addr: String,
    dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    /// Starts Prometheus on `config` (a prometheus.yml; `rules.yaml` beside it holds `rules`),
    /// waiting (bounded, 30 s) until it listens.
    pub fn start(config: &str, rules: &str) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
        std::fs::write(dir.path().join("rules.yaml"), rules).unwrap();
        let log = dir.path().join("log");
        let child = Command::new("prometheus")
            .current_dir(dir.path())
            .args([
                "--config.file=prometheus.yml",
                "--storage.tsdb.path=data",
                "--web.listen-address=127.0.0.1:0",
            ])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let start = Instant::now();
        let addr = loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let listening = text.lines().filter(|l| l.contains("msg=\"Listening on\"")).find_map(|l| {
                let addr = l.split("address=").nth(1)?.split_whitespace().next()?;
                (!addr.ends_with(":0")).then(|| addr.to_string())
            });
            if let Some(addr) = listening {
                break addr;
            }
            assert!(start.elapsed() < Duration::from_secs(30), "Prometheus never listened:\n{text}");
            std::thread::sleep(Duration::from_millis(50));
        };
        let prometheus = Prometheus { child, addr, dir };
        // It listens before its storage is open, answering 503 until it is ready.
        while !prometheus.raw("/-/ready").starts_with("HTTP/1.0 200") {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "Prometheus never got ready:\n{}",
                prometheus.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        prometheus
    }

    /// The whole answer to `GET target`, status line and headers included.
    fn raw(&self, target: &str) -> String {
        let mut s = std::net::TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        // HTTP/1.0: the body is neither chunked nor kept open.
        write!(s, "GET {target} HTTP/1.0\r\nHost: prometheus\r\n\r\n").unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        text
    }

    /// Prometheus' own log so far, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    /// `GET path?params` of the HTTP API: the JSON it answers, whatever its status.
    pub fn get(&self, path: &str, params: &[(&str, &str)]) -> Value {
        let query: Vec<String> = params.iter().map(|(k, v)| format!("{}={}", encode(k), encode(v))).collect();
        let text = self.raw(&format!("{path}?{}", query.join("&")));
        let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{path} {params:?}: {e}: {text}"))
    }

    /// An instant query: its result, or Prometheus' error.
    pub fn query(&self, expr: &str) -> Result<Vec<Value>, String> {
        let answer = self.get("/api/v1/query", &[("query", expr)]);
        match answer["status"].as_str() {
            Some("success") => Ok(answer["data"]["result"].as_array().cloned().unwrap_or_default()),
            _ => Err(format!("{}: {}", answer["errorType"], answer["error"])),
        }
    }

    /// The alerts as `/api/v1/alerts` lists them (pending and firing).
    pub fn alerts(&self) -> Vec<Value> {
        self.get("/api/v1/alerts", &[])["data"]["alerts"].as_array().cloned().unwrap_or_default()
    }

    /// Polls (every 100 ms, bounded by `limit`) until `found` gives something; panics naming
    /// `what` and showing `state()` when the deadline passes.
    pub fn until<T>(
        &self,
        what: &str,
        limit: Duration,
        mut found: impl FnMut(&Prometheus) -> Option<T>,
        state: impl Fn() -> String,
    ) -> T {
        let start = Instant::now();
        loop {
            if let Some(t) = found(self) {
                return t;
            }
            assert!(
                start.elapsed() < limit,
                "{what} never happened within {limit:?}:\n{}\n{}",
                state(),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Percent-encodes a query component: everything but RFC 3986's unreserved characters.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
