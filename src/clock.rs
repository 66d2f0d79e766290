//! The wall clock in whole seconds, a leaf that configuration (`gfd.timestamp` of a load) and the
//! daemon (its last-success metric) both read without importing each other.

/// Seconds since the epoch (0 if the clock is before it).
pub fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}
