//! The fake NVML's fixture parser: any text gives a fixture or an error, never a panic.
#![no_main]

#[allow(dead_code)]
#[path = "../../crates/fake-nvml/src/codes.rs"]
mod codes;
#[allow(dead_code)]
#[path = "../../crates/fake-nvml/src/fixture.rs"]
mod fixture;
/// The fixture validator checks fault names against the exported symbols.
mod exports {
    pub const SYMBOLS: &[&str] = &["nvmlInit_v2", "nvmlDeviceGetName", "nvmlDeviceGetCudaComputeCapability"];
}
/// The fixture validator bounds the number of handles.
mod state {
    pub const MAX_HANDLES: usize = 1 << 20;
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = fixture::Fixture::parse(text);
    }
});
