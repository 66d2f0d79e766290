//! `nvidia.com/gfd.timestamp`: when the configuration was loaded, not when labels were computed.

use super::{key, Labels};

/// The timestamp label, unless disabled.
pub fn labels(timestamp: Option<u64>) -> Labels {
    timestamp.into_iter().map(|t| (key("gfd.timestamp"), t.to_string())).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn present_only_when_set() {
        assert!(super::labels(None).is_empty());
        assert_eq!(super::labels(Some(1700000000))["nvidia.com/gfd.timestamp"], "1700000000");
    }
}
