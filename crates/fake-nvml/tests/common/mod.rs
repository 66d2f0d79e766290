//! What the C-client tests share: the library under test and compiling a client.

use std::path::PathBuf;
use std::process::Command;

/// The cdylib cargo built beside this test binary (`target/<profile>/libnvidia_ml.so`).
pub fn library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let lib = exe.parent().unwrap().parent().unwrap().join("libnvidia_ml.so");
    assert!(lib.exists(), "{} is missing: run `cargo build --workspace` before the tests", lib.display());
    lib
}

/// Compiles `tests/c/<name>.c` into the test's temporary directory.
pub fn compile(name: &str) -> PathBuf {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("nvml-c-{name}"));
    let src = format!("{}/tests/c/{name}.c", env!("CARGO_MANIFEST_DIR"));
    let status = Command::new("cc")
        .args(["-std=c99", "-Wall", "-Werror", "-pthread", "-o"])
        .arg(&out)
        .arg(&src)
        .arg("-ldl")
        .status()
        .expect("a C compiler (cc) is needed for this test");
    assert!(status.success(), "compiling {src} failed");
    out
}
