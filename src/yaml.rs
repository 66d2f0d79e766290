//! YAML input errors as one line: where (line and column) and what, without the parser's source
//! snippet or its `<input>` placeholder. The caller names the file.

use serde::de::DeserializeOwned;

/// The parser's message and where it points.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", match (line, column) { (Some(l), Some(c)) => format!("line {l}, column {c}: "), _ => String::new() })]
pub struct YamlError {
    /// 1-based line, when the parser knows it.
    pub line: Option<u64>,
    /// 1-based column, when the parser knows it.
    pub column: Option<u64>,
    /// What is wrong, on one line.
    pub message: String,
}

impl From<serde_saphyr::Error> for YamlError {
    fn from(e: serde_saphyr::Error) -> YamlError {
        let plain = e.without_snippet();
        let location = plain.location().filter(|l| l.line() > 0);
        let mut message = plain.render_with_formatter(&serde_saphyr::UserMessageFormatter);
        if let Some(l) = location {
            // The formatter appends the location; it is said once, first.
            let suffix = format!(" at line {}, column {}", l.line(), l.column());
            if let Some(stripped) = message.strip_suffix(&suffix) {
                message = stripped.to_string();
            }
        }
        let message = message.split_whitespace().collect::<Vec<_>>().join(" ");
        YamlError { line: location.map(|l| l.line()), column: location.map(|l| l.column()), message }
    }
}

/// Whether YAML text holds no document content: only whitespace, comments and document markers
/// (`---`, `...`).
pub fn is_blank(text: &str) -> bool {
    text.lines().map(str::trim).all(|l| l.is_empty() || l.starts_with('#') || l == "---" || l == "...")
}

/// Parses YAML (or JSON) into `T`.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, YamlError> {
    serde_saphyr::from_str(text).map_err(YamlError::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        from_str::<serde_json::Value>(text).unwrap_err().to_string()
    }

    #[test]
    fn a_syntax_error_is_one_line_with_line_and_column() {
        let cases = [
            ("misplaced colon", "a:\n  b: [1\n  c: x\n", "line 3, column 4: "),
            ("unclosed bracket", "gpus: [\n", "line 1, column 7: unclosed bracket '['"),
        ];
        for (name, text, start) in cases {
            let e = error(text);
            assert!(e.starts_with(start), "{name}: {e}");
            assert!(!e.contains('\n') && !e.contains("<input>") && !e.contains("error:"), "{name}: {e}");
        }
    }
}
