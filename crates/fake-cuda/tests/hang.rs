//! `- hang cuInit <s>` lines of the event file (`FAKE_NVML_EVENTS`), from a threaded client that
//! loads the built `libcuda.so`: a hung `cuInit` blocks without the library's lock, so another
//! thread's calls answer meanwhile; `- hang cuInit 0` ends it; the file is read at each `cuInit`.
//! The order is checked, never an upper bound on a duration: the child goes on once the parent
//! has read the library's "hangs for" line on its stderr. In a child process, as in `driver.rs`:
//! the library reads its fixture once per process.

use libloading::Library;
use std::ffi::{c_char, c_int, c_uint, CStr};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Set in the child: the file whose existence says the parent saw the hang begin.
const GO: &str = "FAKE_CUDA_TEST_GO";
/// A bound on each wait, far above what any step takes: a hang that never ends fails the test.
const LIMIT: Duration = Duration::from_secs(60);

/// The cdylib under test, as `driver.rs` finds it.
fn library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let lib = [deps, deps.parent().unwrap()].map(|d| d.join("libcuda.so")).into_iter().find(|l| l.exists());
    lib.unwrap_or_else(|| panic!("no libcuda.so in {}: run `cargo build -p fake-cuda`", deps.display()))
}

fn append(file: &Path, line: &str) {
    writeln!(std::fs::OpenOptions::new().append(true).open(file).unwrap(), "{line}").unwrap();
}

fn init(cu: &Library) -> u32 {
    unsafe { cu.get::<unsafe extern "C" fn(c_uint) -> u32>(b"cuInit").unwrap()(0) }
}

fn count(cu: &Library) -> (u32, c_int) {
    let mut n = -1;
    (unsafe { cu.get::<unsafe extern "C" fn(*mut c_int) -> u32>(b"cuDeviceGetCount").unwrap()(&mut n) }, n)
}

fn error_name(cu: &Library, code: u32) -> (u32, String) {
    let mut p: *const c_char = std::ptr::null();
    let f =
        unsafe { cu.get::<unsafe extern "C" fn(u32, *mut *const c_char) -> u32>(b"cuGetErrorName").unwrap() };
    let r = unsafe { f(code, &mut p) };
    (r, if p.is_null() { String::new() } else { unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned() })
}

#[test]
fn a_hung_cuinit_blocks_only_itself_until_its_hang_ends() {
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("fake-cuda-hang-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (events, go) = (dir.join("events"), dir.join("go"));
    // NVML's lines and a `hang cuInit` line this library cannot use (reported once) beside it.
    std::fs::write(&events, "0 xid 79\n- hang nvmlInit_v2 5\n0 hang cuInit 9\n- hang cuInit 300\n").unwrap();
    let fixture = format!("{}/tests/fixtures/orin-jetpack6.yaml", env!("CARGO_MANIFEST_DIR"));
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["hang_child", "--exact", "--nocapture", "--test-threads=1"])
        .env_remove("FAKE_CUDA_CALLS")
        .env("FAKE_NVML_FIXTURE", fixture)
        .env("FAKE_NVML_EVENTS", &events)
        .env(GO, &go)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, lines) = mpsc::channel();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || stderr.lines().map_while(Result::ok).try_for_each(|l| tx.send(l)));
    let mut said = Vec::new();
    while !said.iter().any(|l: &String| l == "fake-cuda: cuInit hangs for 300 s") {
        let line = lines.recv_timeout(LIMIT).unwrap_or_else(|_| panic!("cuInit never hung: {said:#?}"));
        assert!(!line.contains("cuInit returned"), "cuInit returned instead of hanging: {said:#?} {line}");
        said.push(line);
    }
    std::fs::write(&go, "").unwrap();
    let waited = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if waited.elapsed() > LIMIT {
            let _ = child.kill();
            panic!("the client is stuck behind the hung cuInit: {said:#?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    said.extend(lines.iter());
    assert!(status.success(), "the client failed: {said:#?}");
    let bad = said.iter().filter(|l| l.contains("skipping line \"0 hang cuInit 9\"")).count();
    assert_eq!(bad, 1, "the unusable line is reported once however often the file is read: {said:#?}");
    assert!(!said.iter().any(|l| l.contains("nvmlInit_v2") || l.contains("xid")), "{said:#?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Not a test of its own: the client the test above starts; nothing without its variable.
#[test]
fn hang_child() {
    let Some(go) = std::env::var_os(GO).map(PathBuf::from) else { return };
    let events = PathBuf::from(std::env::var_os("FAKE_NVML_EVENTS").unwrap());
    let cu = std::sync::Arc::new(unsafe { Library::new(library()) }.unwrap());
    let (tx, inited) = mpsc::channel();
    let hung = cu.clone();
    std::thread::spawn(move || {
        let r = init(&hung);
        eprintln!("cuInit returned {r}");
        let _ = tx.send(r);
    });
    let asked = Instant::now();
    while !go.exists() {
        assert!(asked.elapsed() < LIMIT, "the parent never saw the hang begin");
        std::thread::sleep(Duration::from_millis(10));
    }
    // cuInit is blocked in its hang: other calls answer meanwhile, and it has not returned.
    assert_eq!(error_name(&cu, 100), (0, "CUDA_ERROR_NO_DEVICE".into()));
    assert_eq!(count(&cu), (3, -1), "not initialised while cuInit hangs");
    assert!(inited.try_recv().is_err(), "cuInit returned during its hang");
    // `- hang cuInit 0` ends it, for the call already blocked.
    append(&events, "- hang cuInit 0");
    assert_eq!(inited.recv_timeout(LIMIT).expect("`hang cuInit 0` ended the hang"), 0);
    assert_eq!(count(&cu), (0, 2));
    // The file is read at each cuInit: a later line holds the next one, as long as it says.
    append(&events, "- hang cuInit 0.3");
    let again = Instant::now();
    assert_eq!(init(&cu), 0);
    assert!(again.elapsed() >= Duration::from_millis(300), "{:?}", again.elapsed());
}
