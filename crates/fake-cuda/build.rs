// The real driver's SONAME, so that a `libcuda.so.1` link finds us exactly as it finds the driver.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcuda.so.1");
    println!("cargo:rerun-if-changed=build.rs");
}
