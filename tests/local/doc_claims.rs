//! Docs equal the binary: every metric name, flag and subcommand that README.md, docs/*.md and
//! CONTRIBUTING.md name in code (a `code span`, or a line of a fenced block) is checked against the
//! binary:
//! metrics against a scrape of a daemon's `/metrics` (and health's metrics, which need the
//! API, encoded as the daemon registers them), flags against `--help` of every command,
//! subcommands against `nvlabel help`. Other tools' flags are named below with their tool.

use crate::common;

use common::*;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::process::Stdio;

/// Flags of other tools the docs show, each with its tool.
const FOREIGN_FLAGS: &[(&str, &[&str])] = &[
    ("cargo", &["--release", "--workspace", "--all", "--check", "--all-targets", "--no-deps", "--locked"]),
    ("cargo test and bench", &["--bench", "--test", "--soak", "--lib"]),
    ("helm", &["--set", "--set-json", "--create-namespace", "--namespace", "--version", "--strict"]),
    ("helm uninstall", &["--no-hooks"]),
    ("helm template", &["--show-only"]),
    ("helm upgrade", &["--reuse-values"]),
    ("kubectl", &["--subresource", "--type", "--field-selector", "--ignore-daemonsets", "--timeout"]),
    ("kubectl apply", &["--server-side", "--force-conflicts", "--field-manager"]),
    ("kubectl get", &["--show-managed-fields"]),
    ("kubectl drain", &["--delete-emptydir-data"]),
    ("docker buildx, buildah", &["--platform", "--push", "--load", "--target", "--build-context", "--pull"]),
    ("a placeholder for any boolean flag", &["--flag"]),
    ("node-problem-detector", &["--config.custom-plugin-monitor"]),
    ("kube-apiserver", &["--feature-gates", "--runtime-config"]),
];

/// The code of a markdown text: its code spans, and the lines of its fenced blocks.
fn code(text: &str) -> Vec<String> {
    let (mut out, mut fenced) = (Vec::new(), false);
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            out.push(line.to_string());
        } else {
            out.extend(line.split('`').skip(1).step_by(2).map(String::from));
        }
    }
    out
}

/// README.md, docs/*.md and CONTRIBUTING.md (where the development notes moved), by name.
fn docs() -> Vec<(String, Vec<String>)> {
    doc_files()
        .into_iter()
        .chain(["CONTRIBUTING.md".to_string()])
        .map(|n| (n.clone(), code(&std::fs::read_to_string(repo().join(&n)).unwrap())))
        .collect()
}

/// Each word of `code` that starts with `prefix` where a word may start, up to `allowed`'s end.
fn words(code: &str, prefix: &str, allowed: fn(char) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in code.match_indices(prefix) {
        let before = code[..i].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            continue;
        }
        let rest = &code[i + prefix.len()..];
        let end = rest.find(|c: char| !allowed(c)).unwrap_or(rest.len());
        out.push(format!("{prefix}{}", rest[..end].trim_end_matches(['-', '.'])));
    }
    out
}

/// The metric names a reader may write: each family as `# TYPE` declares it, a counter's with
/// `_total` (as samples carry it), a histogram's by its family name.
fn metric_names(exposition: &str) -> BTreeSet<String> {
    exposition
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| {
            let (name, kind) = l.split_once(' ')?;
            Some(if kind == "counter" { format!("{name}_total") } else { name.to_string() })
        })
        .collect()
}

/// A daemon's `/metrics` (a feature-file daemon on the T4), scraped once.
fn scrape() -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gfd");
    let mut child = nvlabel(Some("t4"))
        .args(["--no-timestamp", "--use-node-feature-api=false", "--extended-labels", "-o"])
        .arg(&out)
        .args(["--metrics-addr", "127.0.0.1:0", "--log-format", "json"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = served_addr(&mut lines);
    std::thread::spawn(move || for _ in lines {});
    wait_for_line(&out, "nvidia.com/gpu.count=1");
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    std::io::Write::write_all(&mut s, b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    assert_eq!(stop_with(&mut child, "-TERM").code(), Some(0));
    text
}

#[test]
fn every_metric_the_docs_name_is_served() {
    let mut served = metric_names(&scrape());
    let mut registry = prometheus_client::registry::Registry::default();
    // Health's metrics need `--health` (and so an API); per-GPU families appear once filled.
    let health_metrics = nvlabel::health::metrics::HealthMetrics::default();
    health_metrics.healthy(0, "GPU-0", true);
    health_metrics.xid(0, "GPU-0", 13);
    health_metrics.warning(0, "GPU-0", "GpuThermalSlowdown");
    health_metrics.fault_turn(false, Some(0), "GPU-0", "RemappedRowsPending");
    health_metrics.fault_turn(true, Some(0), "GPU-0", "RemappedRowsPending");
    let writer = nvlabel::health::metrics::WriterLabels { manager: "kubectl-patch".into() };
    health_metrics.condition_overwrites.get_or_create(&writer).inc();
    health_metrics.register(&mut registry);
    let mut health = String::new();
    prometheus_client::encoding::text::encode(&mut health, &registry).unwrap();
    served.extend(metric_names(&health));
    assert!(served.contains("nvlabel_passes_total"), "{served:?}");
    let mut unknown = Vec::new();
    for (doc, code) in docs() {
        for name in code.iter().flat_map(|c| words(c, "nvlabel_", |c| c.is_ascii_alphanumeric() || c == '_'))
        {
            if !served.contains(&name) {
                unknown.push(format!("{doc}: {name}"));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "metrics the docs name that /metrics does not serve: {unknown:?}\nserved: {served:?}"
    );
}

fn help(args: &[&str]) -> String {
    let (code, stdout, stderr) = run(nvlabel(None).args(args));
    assert_eq!(code, 0, "{stderr}");
    stdout
}

/// The subcommands `nvlabel help` lists, `help` left out.
fn subcommands() -> Vec<String> {
    let top = help(&["help"]);
    let listed = top.split("Commands:\n").nth(1).unwrap().split("\n\n").next().unwrap();
    listed
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| *w != "help")
        .map(String::from)
        .collect()
}

#[test]
fn every_flag_the_docs_name_is_in_help() {
    let mut known = BTreeSet::new();
    let mut commands: Vec<Vec<String>> =
        std::iter::once(vec![]).chain(subcommands().into_iter().map(|s| vec![s])).collect();
    // A subcommand's own subcommands (`nvlabel health clear`), as its help lists them.
    for sub in subcommands() {
        let help = help(&[&sub, "--help"]);
        let Some(listed) = help.split("Commands:\n").nth(1) else { continue };
        let nested = listed.split("\n\n").next().unwrap().lines().filter_map(|l| l.split_whitespace().next());
        commands.extend(nested.map(|n| vec![sub.clone(), n.to_string()]));
    }
    assert!(commands.contains(&vec!["health".to_string(), "clear".to_string()]), "{commands:?}");
    for command in commands {
        let args: Vec<&str> = command.iter().map(String::as_str).chain(["--help"]).collect();
        known.extend(words(&help(&args), "--", |c| c.is_ascii_alphanumeric() || c == '-'));
    }
    let foreign: BTreeSet<&str> = FOREIGN_FLAGS.iter().flat_map(|(_, f)| f.iter().copied()).collect();
    let mut unknown = Vec::new();
    for (doc, code) in docs() {
        for flag in
            code.iter().flat_map(|c| words(c, "--", |c| c.is_ascii_alphanumeric() || c == '-' || c == '.'))
        {
            if flag.len() > 3 && !known.contains(&flag) && !foreign.contains(flag.as_str()) {
                unknown.push(format!("{doc}: {flag}"));
            }
        }
    }
    unknown.sort();
    unknown.dedup();
    assert!(unknown.is_empty(), "flags the docs name that no `--help` lists (another tool's? add it to FOREIGN_FLAGS with its tool): {unknown:?}");
}

#[test]
fn every_subcommand_the_docs_name_is_in_nvlabel_help() {
    let subs = subcommands();
    assert!(subs.contains(&"health".to_string()), "{subs:?}");
    let mut wrong = Vec::new();
    for (doc, code) in docs() {
        for c in &code {
            let mut w = c.split_whitespace();
            if !matches!(w.next(), Some(first) if first == "nvlabel" || first.ends_with("/nvlabel")) {
                continue;
            }
            let Some(second) =
                w.next().filter(|s| s.chars().all(|c| c.is_ascii_lowercase() || "[|]".contains(c)))
            else {
                continue;
            };
            if second == "help" {
                // `nvlabel help [a|b]` lists every subcommand.
                if let Some(list) = w.next().and_then(|l| l.strip_prefix('[')?.strip_suffix(']')) {
                    let listed: Vec<String> = list.split('|').map(String::from).collect();
                    if listed != subs {
                        wrong.push(format!("{doc}: `{c}` lists {listed:?}, `nvlabel help` {subs:?}"));
                    }
                }
            } else if !subs.contains(&second.to_string()) {
                wrong.push(format!("{doc}: `{c}`: no subcommand {second}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}
