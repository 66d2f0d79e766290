//! No Rust debug form in a log line: `Some(2)`, `["a", "b"]`, `Foo { x: 1 }` are the code's
//! words, not the operator's. Two nets: every `tracing` macro in `src/` is read, and a `?`
//! field or a `{:?}` in its message is refused (a Debug form reaches the line whatever the
//! value's type, and no test may ever run that line); and every stderr the suite captures through
//! `common::run` and `common::ok` is searched for the forms themselves
//! (`common::assert_no_debug_forms`), which also catches a `{:?}` in a message made elsewhere
//! and logged later (a warning, an error's text).

use crate::common;

use std::path::{Path, PathBuf};

/// The log macros, as `src/` names them.
const MACROS: [&str; 5] = ["info!(", "warn!(", "error!(", "debug!(", "trace!("];

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The arguments of the macro call whose `(` is at `open`: up to its matching `)`, string and
/// char literals skipped whole, so a `)` inside a message does not end it.
fn arguments(text: &str, open: usize) -> &str {
    let b = text.as_bytes();
    let (mut i, mut depth) = (open + 1, 1);
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return &text[open + 1..i];
                }
            }
            _ => {}
        }
        i += 1;
    }
    &text[open + 1..]
}

/// Why `args` (a log macro's arguments) would write a debug form: a `?` sigil before a value
/// (`x = ?v`, `?v`) outside the string literals, or `:?}` / `:#?}` in its message.
fn debug_form(args: &str) -> Option<&'static str> {
    let b = args.as_bytes();
    let mut in_string = false;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' if in_string => i += 1,
            b'"' => in_string = !in_string,
            b'?' if !in_string => {
                let before = args[..i].trim_end();
                let after = b.get(i + 1).copied().unwrap_or(b' ');
                let starts_value = before.is_empty() || before.ends_with('=') || before.ends_with(',');
                if starts_value && (after.is_ascii_alphabetic() || b"_&(".contains(&after)) {
                    return Some("a `?` field");
                }
            }
            _ => {}
        }
        i += 1;
    }
    (args.contains(":?}") || args.contains(":#?}")).then_some("a `{:?}` in the message")
}

#[test]
fn no_log_macro_in_src_writes_a_debug_form() {
    let mut files = Vec::new();
    sources(&common::repo().join("src"), &mut files);
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for name in MACROS {
            for (at, _) in text.match_indices(name) {
                let args = arguments(&text, at + name.len() - 1);
                if let Some(why) = debug_form(args) {
                    let line = text[..at].lines().count();
                    found.push(format!("{}:{line}: {why}: {}", file.display(), args.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "log lines with a Rust debug form (write the value as text):\n{}",
        found.join("\n")
    );
}

/// The scanner itself, on the forms it must and must not refuse.
#[test]
fn the_scanner_tells_a_debug_field_from_text() {
    let refused = [
        r#"flag = ?self.flag, "the count""#,
        r#"?keys, "listed""#,
        r#"error = %e, "keys: {keys:?}""#,
        r#""keys: {:#?}", keys"#,
    ];
    for args in refused {
        assert!(debug_form(args).is_some(), "{args}");
    }
    let allowed = [
        r#"error = %e, retry_in_ms = wait.as_millis() as u64, "why? because""#,
        r#""{}: is it? {x}", a"#,
        r#"count = n, "none (x ?y)""#,
        r#""a, ?b", c"#,
    ];
    for args in allowed {
        assert_eq!(debug_form(args), None, "{args}");
    }
    assert_eq!(arguments(r#"warn!(a, "x)", b) tail"#, 5), r#"a, "x)", b"#);
}

/// The runtime net's patterns, on lines with and without them.
#[test]
fn the_captured_lines_check_knows_the_forms() {
    for line in [
        "WARN expected count flag=Some(2)",
        "selects config x, but /d has no such key (keys: [\"a\", \"b\"])",
        "error=LibloadingError(DlOpen { desc: \"x\" })",
        "ignored={13, 31}",
        "value=None",
    ] {
        assert!(std::panic::catch_unwind(|| common::assert_no_debug_forms(line)).is_err(), "{line}");
    }
    common::assert_no_debug_forms("WARN taint effect None; keys: a, b; \"quoted\" {\"json\":1}");
}
