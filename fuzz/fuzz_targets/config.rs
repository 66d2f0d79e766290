//! The device-plugin config parser: any bytes give a config or an error, never a panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = nvlabel::config::ConfigFile::from_bytes(std::path::Path::new("fuzz.yaml"), data);
});
