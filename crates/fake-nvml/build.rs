// The real driver's SONAME, so that a `libnvidia-ml.so.1` link finds us exactly as it finds NVML.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libnvidia-ml.so.1");
    println!("cargo:rerun-if-changed=build.rs");
}
