//! Kubernetes' label rules, written again from the documentation ("Labels and Selectors",
//! "Object Names and IDs") for the tests, independently of `nvlabel::labels::value`, so that a
//! mistake in nvlabel's own checks cannot hide a mistake in its labelers.
//!
//! - A key is an optional prefix and a name, separated by `/`. The prefix is a DNS subdomain: at
//!   most 253 characters, dot-separated parts of 1 to 63 lower-case letters, digits and `-`, each
//!   part starting and ending with a letter or digit. The name is 1 to 63 characters of letters,
//!   digits, `-`, `_` and `.`, starting and ending with a letter or digit.
//! - A value is empty, or 1 to 63 characters like a name.
#![allow(dead_code)]

fn alnum(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_uppercase() || c.is_ascii_digit()
}

/// The name part of a key, or a non-empty value.
fn name_ok(s: &str) -> bool {
    let chars: Vec<char> = s.chars().collect();
    if chars.is_empty() || chars.len() > 63 {
        return false;
    }
    let (first, last) = (chars[0], chars[chars.len() - 1]);
    alnum(first) && alnum(last) && chars.iter().all(|&c| alnum(c) || c == '-' || c == '_' || c == '.')
}

fn dns_subdomain_ok(s: &str) -> bool {
    if s.is_empty() || s.len() > 253 {
        return false;
    }
    s.split('.').all(|part| {
        let b = part.as_bytes();
        !b.is_empty()
            && b.len() <= 63
            && part.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && b[0] != b'-'
            && b[b.len() - 1] != b'-'
    })
}

/// Whether `key` is a valid label key.
pub fn key_ok(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => dns_subdomain_ok(prefix) && name_ok(name),
        None => name_ok(key),
    }
}

/// Whether `value` is a valid label value.
pub fn value_ok(value: &str) -> bool {
    value.is_empty() || name_ok(value)
}

#[test]
fn the_documented_examples() {
    for good in ["nvidia.com/gpu.count", "app", "a.b-c/x_y.z", "k8s.io/A1"] {
        assert!(key_ok(good), "{good}");
    }
    for bad in ["", "/x", "Nvidia.com/x", "nvidia.com/", "nvidia.com/-x", "a/b/c", "-.com/x", "x..y/z"] {
        assert!(!key_ok(bad), "{bad}");
    }
    for good in ["", "a", "Tesla-T4", "1.2.3", "a_b"] {
        assert!(value_ok(good), "{good}");
    }
    for bad in ["-1", "x.", "a b", "ü", &"x".repeat(64)] {
        assert!(!value_ok(bad), "{bad}");
    }
}
