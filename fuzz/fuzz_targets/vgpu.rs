//! The vGPU PCI-config parser: any config space bytes are walked without panic or endless loop.
#![no_main]

use nvlabel::probe::sysfs::{host_driver, is_vgpu, vendor_capability};

libfuzzer_sys::fuzz_target!(|config: &[u8]| {
    if let Some(cap) = vendor_capability(config) {
        if is_vgpu(cap) {
            let _ = host_driver(cap);
        }
    }
});
