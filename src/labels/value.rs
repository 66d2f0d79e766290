//! Label keys and values: GFD's sanitiser, the Kubernetes validity rules, and how nvlabel
//! repairs what GFD would publish invalid (docs/migration.md, "How nvlabel differs from GFD").

/// Longest label value (and key name) Kubernetes accepts.
pub const MAX_LEN: usize = 63;

/// GFD's sanitiser: drop characters outside `[A-Za-z0-9-_. ]`, then join space-separated words with `-`.
pub fn sanitise(input: &str) -> String {
    let kept: String =
        input.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ' ')).collect();
    kept.split(' ').filter(|w| !w.is_empty()).collect::<Vec<_>>().join("-")
}

/// Kubernetes `IsValidLabelValue`: empty, or ≤ 63 of `[-A-Za-z0-9_.]` starting and ending alphanumeric.
pub fn is_valid_value(v: &str) -> bool {
    v.is_empty() || is_valid_name(v)
}

/// A label key's name part (and a non-empty value): 1–63 characters, alphanumeric at both ends.
fn is_valid_name(v: &str) -> bool {
    let b = v.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_LEN
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// Kubernetes `IsQualifiedName` for a key: optional DNS-subdomain prefix, `/`, and a valid name.
pub fn is_valid_key(k: &str) -> bool {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|seg| {
                let s = seg.as_bytes();
                !s.is_empty()
                    && s[0].is_ascii_alphanumeric()
                    && s[s.len() - 1].is_ascii_alphanumeric()
                    && s.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            })
    });
    prefix_ok && is_valid_name(name)
}

fn trim_non_alnum(s: &str) -> &str {
    s.trim_matches(|c: char| !c.is_ascii_alphanumeric())
}

/// Cuts `s` (ASCII after sanitising) to `max` characters and removes what is left dangling.
fn shorten(s: &str, max: usize) -> &str {
    let cut = if s.len() > max { &s[..max] } else { s };
    trim_non_alnum(cut)
}

/// A free-text value (machine type, vGPU driver strings) made valid: kept as is when valid,
/// else sanitised, trimmed to alphanumeric ends and cut to 63. `None` when nothing is left.
pub fn make_valid(raw: &str) -> Option<String> {
    if is_valid_value(raw) && !raw.is_empty() {
        return Some(raw.to_string());
    }
    let s = sanitise(raw);
    let s = shorten(trim_non_alnum(&s), MAX_LEN);
    (!s.is_empty()).then(|| s.to_string())
}

/// GFD's `getProductName(model..., suffix...)`, made valid by shortening the model part.
///
/// `model` is the NVML name (or parent name for MIG); `suffix` is e.g. `["MIG", "1g.5gb", "SHARED"]`.
/// Where GFD's value is valid it is returned unchanged. Otherwise the model is trimmed and cut so
/// that the suffix survives whole. `None` when no valid value can be made.
pub fn product(model: &str, suffix: &[&str]) -> Option<String> {
    let sanitised_suffix: Vec<String> =
        suffix.iter().filter(|p| !p.is_empty()).map(|p| sanitise(p)).collect();
    let model_s = sanitise(model);
    let mut gfd_parts: Vec<&str> = Vec::new();
    if !model.is_empty() {
        gfd_parts.push(&model_s);
    }
    gfd_parts.extend(sanitised_suffix.iter().map(String::as_str));
    let gfd = gfd_parts.join("-");
    if is_valid_value(&gfd) && !gfd.is_empty() {
        return Some(gfd);
    }
    let tail = trim_non_alnum(&sanitised_suffix.join("-")).to_string();
    let budget = if tail.is_empty() { MAX_LEN } else { MAX_LEN.saturating_sub(tail.len() + 1) };
    let head = shorten(trim_non_alnum(&model_s), budget);
    let value = match (head.is_empty(), tail.is_empty()) {
        (true, _) => tail,
        (false, true) => head.to_string(),
        (false, false) => format!("{head}-{tail}"),
    };
    (is_valid_value(&value) && !value.is_empty()).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitise_matches_gfd_unit_tests() {
        let cases = [
            ("a space separated string", "a-space-separated-string"),
            ("some(thing)else", "somethingelse"),
            ("some ( thing )else", "some-thing-else"),
            ("NVIDIA-TITAN-X-(Pascal)", "NVIDIA-TITAN-X-Pascal"),
            (" input  with multiple   spaces   ", "input-with-multiple-spaces"),
            ("some [ / thing / ]else", "some-thing-else"),
            ("some / thing /else", "some-thing-else"),
            ("some-thing.else_new", "some-thing.else_new"),
        ];
        for (input, want) in cases {
            assert_eq!(sanitise(input), want, "{input:?}");
        }
    }

    #[test]
    fn sanitise_drops_non_ascii_letters() {
        assert_eq!(sanitise("Grafikkarte Größe"), "Grafikkarte-Gre");
    }

    #[test]
    fn validity_rules() {
        assert!(is_valid_value(""));
        assert!(is_valid_value("NVIDIA-A100-SXM4-40GB"));
        assert!(!is_valid_value("To-Be-Filled-By-O.E.M."));
        assert!(!is_valid_value("-1"));
        assert!(!is_valid_value(&"a".repeat(64)));
        assert!(is_valid_value(&"a".repeat(63)));
        assert!(is_valid_key("nvidia.com/mig-1g.5gb.count"));
        assert!(is_valid_key("nvidia.com/gpu.product"));
        assert!(!is_valid_key("NVIDIA.com/gpu.product"));
        assert!(!is_valid_key("nvidia.com/"));
        assert!(!is_valid_key("nvidia.com/mig-1g.5gb+me.count"));
    }

    #[test]
    fn product_is_gfd_where_gfd_is_valid() {
        assert_eq!(product("Tesla T4", &[]).unwrap(), "Tesla-T4");
        assert_eq!(product("NVIDIA A100-SXM4-40GB", &["SHARED"]).unwrap(), "NVIDIA-A100-SXM4-40GB-SHARED");
        assert_eq!(product("MOCKMODEL", &["MIG", "1g.5gb"]).unwrap(), "MOCKMODEL-MIG-1g.5gb");
        assert_eq!(product("MOCKMODEL", &["MIG", "INVALID"]).unwrap(), "MOCKMODEL-MIG-INVALID");
        assert_eq!(product("NVIDIA TITAN X (Pascal)", &[]).unwrap(), "NVIDIA-TITAN-X-Pascal");
        // An empty model is skipped as a part, as GFD does.
        assert_eq!(product("", &["MIG", "1g.5gb"]).unwrap(), "MIG-1g.5gb");
    }

    #[test]
    fn long_products_keep_their_suffix() {
        let name = "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition";
        assert_eq!(sanitise(name).len(), 55);
        let full = product(name, &[]).unwrap();
        assert_eq!(full, "NVIDIA-RTX-PRO-6000-Blackwell-Max-Q-Workstation-Edition");
        let mig = product(name, &["MIG", "1g.24gb"]).unwrap();
        assert_eq!(mig, "NVIDIA-RTX-PRO-6000-Blackwell-Max-Q-Workstation-Edi-MIG-1g.24gb");
        assert_eq!(mig.len(), 63, "the model is cut at 63 - 12 = 51 characters");
        // A cut that ends on a separator drops it.
        assert_eq!(product("Some-Model-Name", &["SHARED"]).unwrap(), "Some-Model-Name-SHARED");
        let dangling = format!("{}-{}", "A".repeat(55), "B".repeat(10));
        assert_eq!(product(&dangling, &["SHARED"]).unwrap(), format!("{}-SHARED", "A".repeat(55)));
        let shared = product(name, &["MIG", "1g.24gb.gfx", "SHARED"]).unwrap();
        assert_eq!(shared, "NVIDIA-RTX-PRO-6000-Blackwell-Max-Q-Work-MIG-1g.24gb.gfx-SHARED");
        assert_eq!(shared.len(), 63);
    }

    #[test]
    fn invalid_products_are_repaired_or_omitted() {
        assert_eq!(product("Foo.", &[]).unwrap(), "Foo");
        assert_eq!(product("((()))", &[]), None);
        assert_eq!(product("()", &["MIG", "1g.5gb"]).unwrap(), "MIG-1g.5gb");
    }

    #[test]
    fn machine_types_are_repaired() {
        assert_eq!(make_valid("To-Be-Filled-By-O.E.M.").unwrap(), "To-Be-Filled-By-O.E.M");
        assert_eq!(make_valid("X9SRA/X9SRA-3").unwrap(), "X9SRAX9SRA-3");
        assert_eq!(make_valid("460.16").unwrap(), "460.16");
        assert_eq!(make_valid(&"x".repeat(70)).unwrap().len(), 63);
        assert_eq!(make_valid("..."), None);
    }
}
