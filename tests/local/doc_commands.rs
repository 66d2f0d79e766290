//! The samples tell the truth: every `nvlabel` command line of README.md and docs/*.md that needs
//! no cluster, extracted from the docs (never copied here) and run as shown, on every bundled
//! machine, exits as the doc implies; and each bundled machine with its own sysfs tree
//! (`testdata/sysfs-machines/<machine>`) is what its fixture says: healthy (or its GPU lost, where
//! its faults say so), with its golden labels.
//!
//! The extraction rules (tests/README.md repeats them):
//! - a command line is a line of a fenced block marked `sh`, `bash`, `shell` or `console` (a `$ `
//!   prompt and a trailing `\` joined), or one `&&`-part of it, whose first word after `NAME=value`
//!   assignments is `nvlabel`, a path ending in `/nvlabel` (`target/release/nvlabel`), or
//!   `cargo run ... --` (run as `nvlabel`); `cargo build ...` parts are left out (the test built it);
//! - `export`, `mkdir` and `ln` parts of the block are set-up, run before each later command line;
//! - it exits 0 unless a trailing comment says `# exits N`;
//! - it needs a cluster, and is not run, when it publishes or reads the Kubernetes API: `--sink
//!   node`, `--node-name`, `--kubeconfig`, `--from-cluster`, `prune`, or labelling without
//!   `--use-node-feature-api=false` (GFD's default publishes a NodeFeature);
//! - it shows a real node, and is not run, when it names an absolute path outside `/tmp`
//!   (`/etc/...`, `/config/...`); `/tmp/` is the sandbox's own;
//! - a line that sets no `FAKE_NVML_FIXTURE` of its own runs on every bundled machine, NVML and
//!   sysfs given through env (`NVLABEL_NVML_LIBRARY`, `NVLABEL_SYSFS_ROOT`) as a node would have
//!   them.

use crate::common;

use common::*;
use std::path::Path;
use std::process::Command;

/// One command line of the docs: where it is, its block's set-up before it, the line itself.
#[derive(Debug, Clone, PartialEq)]
struct DocCommand {
    place: String,
    setup: Vec<String>,
    line: String,
    exit: i32,
}

/// Splits `text` at `sep` where `sep` is outside quotes.
fn split_unquoted<'a>(text: &'a str, sep: &str) -> Vec<&'a str> {
    let (mut parts, mut start, mut quote) = (Vec::new(), 0, None::<char>);
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (None, '"' | '\'') => quote = Some(c),
            (None, _) if text[i..].starts_with(sep) && i >= start => {
                parts.push(&text[start..i]);
                start = i + sep.len();
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// The words of a part, with `NAME=value` assignments in front skipped.
fn command_words(part: &str) -> Vec<&str> {
    let words: Vec<&str> = part.split_whitespace().collect();
    let assignment = |w: &&str| w.split_once('=').is_some_and(|(n, _)| !n.is_empty() && !n.starts_with('-'));
    words.into_iter().skip_while(assignment).collect()
}

/// `part` as an nvlabel command line (a `cargo run ... --` prefix made `nvlabel`), or `None`.
fn as_nvlabel(part: &str) -> Option<String> {
    let words = command_words(part);
    let first = *words.first()?;
    if first == "nvlabel" || first.ends_with("/nvlabel") {
        return Some(part.trim().to_string());
    }
    if first == "cargo" && words.get(1) == Some(&"run") {
        let (_, rest) = part.split_once(" -- ").unwrap_or((part, ""));
        let assignments = &part[..part.find("cargo").unwrap()];
        return Some(format!("{assignments}nvlabel {rest}").trim().to_string());
    }
    None
}

/// Every command line of a markdown text (see the module's rules).
fn extract(doc: &str, text: &str) -> Vec<DocCommand> {
    let (mut out, mut in_shell, mut in_block, mut setup) = (Vec::new(), false, false, Vec::new());
    let mut pending = String::new();
    for (n, raw) in text.lines().enumerate() {
        if let Some(info) = raw.trim_start().strip_prefix("```") {
            in_shell = !in_block && ["sh", "bash", "shell", "console"].contains(&info.trim());
            in_block = !in_block;
            setup.clear();
            continue;
        }
        if !in_shell {
            continue;
        }
        let line = raw.trim().strip_prefix("$ ").unwrap_or(raw.trim());
        if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head);
            continue;
        }
        let joined = std::mem::take(&mut pending) + line;
        let comment = split_unquoted(&joined, "#");
        let code = comment[0].trim();
        let exit = comment[1..]
            .iter()
            .find_map(|c| c.trim().strip_prefix("exits ")?.trim().parse().ok())
            .unwrap_or(0);
        for part in split_unquoted(code, "&&").into_iter().map(str::trim).filter(|p| !p.is_empty()) {
            match (as_nvlabel(part), command_words(part).first().copied()) {
                (Some(line), _) => {
                    let place = format!("{doc}:{}", n + 1);
                    out.push(DocCommand { place, setup: setup.clone(), line, exit })
                }
                (None, Some("export" | "mkdir" | "ln")) => setup.push(part.to_string()),
                _ => {}
            }
        }
    }
    out
}

/// Why a command line is not run here, if it is not.
fn not_run(c: &DocCommand) -> Option<&'static str> {
    let words = command_words(&c.line);
    let has = |w: &str| words.iter().any(|x| *x == w || x.starts_with(&format!("{w}=")));
    let sub = words
        .get(1)
        .copied()
        .filter(|w| ["probe", "hook", "health", "prune", "help", "template"].contains(w));
    if has("--node-name")
        || has("--kubeconfig")
        || has("--from-cluster")
        || sub == Some("prune")
        || c.line.contains("--sink node")
    {
        return Some("needs a cluster");
    }
    if c.line.contains("--sink=node") || (sub.is_none() && !c.line.contains("--use-node-feature-api=false")) {
        return Some("needs a cluster (publishes to the API)");
    }
    let host_path = words.iter().any(|w| {
        let w = w.trim_matches('"').split_once('=').map_or(w.trim_matches('"'), |(_, v)| v);
        w.starts_with('/') && !w.starts_with("/tmp")
    });
    host_path.then_some("shows a real node's paths")
}

/// Every command line of README.md and docs/*.md.
fn doc_commands() -> Vec<DocCommand> {
    doc_files().iter().flat_map(|d| extract(d, &std::fs::read_to_string(repo().join(d)).unwrap())).collect()
}

/// A directory that looks like the checkout after `cargo build [--release] --workspace` (nvlabel,
/// the fake NVML and the fake CUDA driver), with `nvlabel` on PATH and its own `/tmp`.
fn sandbox(dir: &Path) {
    let bin = Path::new(env!("CARGO_BIN_EXE_nvlabel"));
    for profile in ["debug", "release"] {
        let d = dir.join("target").join(profile);
        std::fs::create_dir_all(&d).unwrap();
        std::os::unix::fs::symlink(bin, d.join("nvlabel")).unwrap();
        std::os::unix::fs::symlink(fake_nvml(), d.join("libnvidia_ml.so")).unwrap();
        std::os::unix::fs::symlink(fake_nvml().with_file_name("libcuda.so"), d.join("libcuda.so")).unwrap();
    }
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    std::os::unix::fs::symlink(bin, dir.join("bin/nvlabel")).unwrap();
    std::os::unix::fs::symlink(repo().join("testdata"), dir.join("testdata")).unwrap();
}

/// Runs `c` in the sandbox `dir`, on `machine` unless it names its own; returns status and output.
fn run_in(dir: &Path, c: &DocCommand, machine: &str) -> (i32, String) {
    let sandboxed = |s: &str| s.replace("/tmp/", &format!("{}/tmp/", dir.display()));
    let script: Vec<String> = c.setup.iter().chain([&c.line]).map(|s| sandboxed(s)).collect();
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(script.join(" && ")).current_dir(dir).env_clear();
    cmd.env("PATH", format!("{}/bin:/usr/bin:/bin", dir.display())).env("HOME", dir);
    cmd.env("RUST_LOG", "warn").env("NVLABEL_NVML_LIBRARY", fake_nvml());
    cmd.env("NVLABEL_SYSFS_ROOT", repo().join("testdata/sysfs-machines").join(machine));
    cmd.env("FAKE_NVML_FIXTURE", fixture(machine)).env("NVLABEL_METRICS_ADDR", "127.0.0.1:0");
    let (code, stdout, stderr) = run(&mut cmd);
    (code, format!("{stdout}{stderr}"))
}

#[test]
fn every_doc_command_that_needs_no_cluster_exits_as_the_doc_implies() {
    let commands = doc_commands();
    let run_here: Vec<&DocCommand> = commands.iter().filter(|c| not_run(c).is_none()).collect();
    assert!(run_here.len() >= 5, "too few doc commands found to run: {commands:#?}");
    assert!(
        run_here.iter().any(|c| command_words(&c.line).get(1) == Some(&"health")),
        "the docs show no `nvlabel health` that runs without a cluster"
    );
    let mut failures = Vec::new();
    for machine in fixtures() {
        let dir = tempfile::tempdir().unwrap();
        sandbox(dir.path());
        for c in &run_here {
            let own_fixture = c.setup.iter().chain([&c.line]).any(|s| s.contains("FAKE_NVML_FIXTURE="));
            if own_fixture && machine != fixtures()[0] {
                continue;
            }
            let (code, out) = run_in(dir.path(), c, &machine);
            if code != c.exit {
                failures.push(format!(
                    "{} on {machine}: exit {code}, the doc implies {}\n  {}\n{out}",
                    c.place, c.exit, c.line
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The NVML calls a health reading makes of each GPU.
const HEALTH_CALLS: [&str; 8] = [
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetRetiredPagesPendingStatus",
    "nvmlDeviceValidateInforom",
    "nvmlDeviceGetFieldValues",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetNvLinkState",
    "nvmlDeviceGetHandleByIndex",
];

/// Whether a fixture's `faults:` answer GPU_IS_LOST to a call health makes.
fn lost_to_health(fixture: &str) -> bool {
    let Some((_, faults)) = fixture.split_once("\nfaults:") else { return false };
    faults.split("- function:").skip(1).any(|entry| {
        let function = entry.split_whitespace().next().unwrap_or_default();
        HEALTH_CALLS.contains(&function) && entry.contains("error: gpu_is_lost")
    })
}

#[test]
fn every_bundled_machine_with_its_own_sysfs_tree_is_as_its_fixture_says_and_labels_as_its_golden() {
    let mut failures = Vec::new();
    for machine in fixtures() {
        let sysfs = format!("testdata/sysfs-machines/{machine}");
        assert!(repo().join(&sysfs).is_dir(), "{sysfs} is missing: run testdata/make-sysfs.py");
        let (code, out, err) = run(nvlabel_in(Some(&machine), &sysfs).arg("health"));
        // Healthy, unless the fixture makes a GPU fall off the bus (`faults:` answering
        // GPU_IS_LOST to a call health makes): then that GPU is lost, as on the node.
        let fixture = std::fs::read_to_string(fixture(&machine)).unwrap();
        let lost = lost_to_health(&fixture);
        let (want, first) = if lost { (1, "GpuLost: ") } else { (0, "GpusHealthy: ") };
        if code != want || !out.starts_with(first) {
            failures.push(format!("nvlabel health on {machine}: exit {code}, not {want}\n{out}{err}"));
        }
        let labels = ok(nvlabel_in(Some(&machine), &sysfs).args(PRINT));
        failures.extend(golden(&format!("{machine}.none.labels"), &labels));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn extraction_follows_the_rules() {
    let doc = "text\n```sh\n# a comment\nexport A=1\ncargo build --release && B=2 target/release/nvlabel \\\n  --oneshot -o \"\" --use-node-feature-api=false\n$ nvlabel health  # exits 1\nhelm install x\n```\n```yaml\nnvlabel: no\n```\n";
    let got = extract("d.md", doc);
    let want = [
        DocCommand {
            place: "d.md:6".into(),
            setup: vec!["export A=1".into()],
            line: "B=2 target/release/nvlabel --oneshot -o \"\" --use-node-feature-api=false".into(),
            exit: 0,
        },
        DocCommand {
            place: "d.md:7".into(),
            setup: vec!["export A=1".into()],
            line: "nvlabel health".into(),
            exit: 1,
        },
    ];
    assert_eq!(got, want);
    let cases = [
        ("nvlabel --oneshot -o \"\" --use-node-feature-api=false", None),
        ("nvlabel --sink node --node-name \"$NODE_NAME\" --health", Some("needs a cluster")),
        ("nvlabel --oneshot -o \"\"", Some("needs a cluster (publishes to the API)")),
        ("nvlabel prune --use-node-feature-api=false", Some("needs a cluster")),
        ("nvlabel --oneshot --use-node-feature-api=false -o /etc/x", Some("shows a real node's paths")),
        ("nvlabel probe --snapshot=/tmp/x", None),
        ("nvlabel health", None),
    ];
    for (line, want) in cases {
        let c = DocCommand { place: String::new(), setup: vec![], line: line.into(), exit: 0 };
        assert_eq!(not_run(&c), want, "{line}");
    }
}
