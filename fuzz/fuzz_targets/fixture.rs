//! The fake NVML's fixture parser: any text gives a fixture or an error, never a panic.
#![no_main]

#[allow(dead_code)]
#[path = "../../crates/fake-nvml/src/codes.rs"]
mod codes;
#[allow(dead_code)]
#[path = "../../crates/fake-nvml/src/fixture.rs"]
mod fixture;
/// What the fixture is checked against (the library passes its own symbols and handle table).
const LIMITS: fixture::Limits = fixture::Limits {
    symbols: &["nvmlInit_v2", "nvmlDeviceGetName", "nvmlDeviceGetCudaComputeCapability"],
    max_handles: 1 << 20,
};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = fixture::Fixture::parse(text, &LIMITS);
    }
});
