//! The fake NVML's fixture parser: any text gives a fixture or an error, never a panic.
#![no_main]

use nvidia_ml::fixture;

/// What the fixture is checked against: the library's own symbols and a large handle table.
const LIMITS: fixture::Limits = fixture::Limits { symbols: nvidia_ml::exports::SYMBOLS, max_handles: 1 << 20 };

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = fixture::Fixture::parse(text, &LIMITS);
    }
});
