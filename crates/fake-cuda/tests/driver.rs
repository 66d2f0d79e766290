//! Loads the built `libcuda.so` with libloading and checks what a CUDA client sees. The library
//! reads its fixture once per process (as the real driver initialises once), so each scenario
//! runs in a child process: this test binary again, running only `child`.

use libloading::Library;
use std::ffi::{c_char, c_int, c_uint, CStr};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

const SCENARIO: &str = "FAKE_CUDA_TEST_SCENARIO";
const TRANSCRIPT: &str = "FAKE_CUDA_TEST_TRANSCRIPT";

/// The cdylib under test. `cargo test` compiles it into `target/<profile>/deps/`, beside this
/// binary (the library is also an rlib, so the tests depend on it), but copies it up to
/// `target/<profile>/libcuda.so` only in `cargo build`; the one beside us is never stale.
fn library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let lib = [deps, deps.parent().unwrap()].map(|d| d.join("libcuda.so")).into_iter().find(|l| l.exists());
    lib.unwrap_or_else(|| panic!("no libcuda.so in {}: run `cargo build -p fake-cuda`", deps.display()))
}

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn tmp(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("fake-cuda-{name}"))
}

/// Runs `scenario` in a child process with `env` (and no inherited fixture): its transcript and
/// its stderr. Each run writes its own transcript: tests run side by side and several run the
/// same scenario, so a name per scenario let one test remove another's file before it was read.
fn run(scenario: &str, env: &[(&str, String)]) -> (String, String) {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, Ordering::Relaxed);
    let transcript = tmp(&format!("{scenario}-{}-{n}.txt", std::process::id()));
    let _ = std::fs::remove_file(&transcript);
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["child", "--exact", "--nocapture", "--test-threads=1"])
        .env_remove("FAKE_NVML_FIXTURE")
        .env_remove("FAKE_CUDA_CALLS")
        .env(SCENARIO, scenario)
        .env(TRANSCRIPT, &transcript)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{scenario} failed: {stderr}");
    (std::fs::read_to_string(&transcript).unwrap(), stderr)
}

/// The library's functions, each answering its return code and what it wrote (-1 or empty where
/// it wrote nothing).
struct Cu(Library);

impl Cu {
    fn sym<T: Copy>(&self, name: &str) -> T {
        unsafe { *self.0.get::<T>(name.as_bytes()).unwrap() }
    }
    fn init(&self, flags: c_uint) -> u32 {
        unsafe { self.sym::<unsafe extern "C" fn(c_uint) -> u32>("cuInit")(flags) }
    }
    /// `cuDriverGetVersion`, `cuDeviceGetCount`: one `int` out.
    fn int(&self, name: &str) -> (u32, c_int) {
        let mut v = -1;
        (unsafe { self.sym::<unsafe extern "C" fn(*mut c_int) -> u32>(name)(&mut v) }, v)
    }
    fn get(&self, ordinal: c_int) -> (u32, c_int) {
        let mut v = -1;
        (
            unsafe {
                self.sym::<unsafe extern "C" fn(*mut c_int, c_int) -> u32>("cuDeviceGet")(&mut v, ordinal)
            },
            v,
        )
    }
    fn name(&self, len: c_int, dev: c_int) -> (u32, String) {
        let mut buf = [b'#' as c_char; 64];
        let f = self.sym::<unsafe extern "C" fn(*mut c_char, c_int, c_int) -> u32>("cuDeviceGetName");
        let r = unsafe { f(buf.as_mut_ptr(), len, dev) };
        let text = if r == 0 {
            unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned()
        } else {
            String::new()
        };
        (r, text)
    }
    fn mem(&self, dev: c_int) -> (u32, c_uint) {
        let mut v = c_uint::MAX - 1;
        (
            unsafe {
                self.sym::<unsafe extern "C" fn(*mut c_uint, c_int) -> u32>("cuDeviceTotalMem")(&mut v, dev)
            },
            v,
        )
    }
    fn mem_v2(&self, dev: c_int) -> (u32, usize) {
        let mut v = 0;
        (
            unsafe {
                self.sym::<unsafe extern "C" fn(*mut usize, c_int) -> u32>("cuDeviceTotalMem_v2")(&mut v, dev)
            },
            v,
        )
    }
    fn attr(&self, attribute: c_int, dev: c_int) -> (u32, c_int) {
        let mut v = -1;
        let f = self.sym::<unsafe extern "C" fn(*mut c_int, c_int, c_int) -> u32>("cuDeviceGetAttribute");
        (unsafe { f(&mut v, attribute, dev) }, v)
    }
    fn uuid(&self, name: &str, dev: c_int) -> (u32, String) {
        let mut v = [0u8; 16];
        let r = unsafe { self.sym::<unsafe extern "C" fn(*mut [u8; 16], c_int) -> u32>(name)(&mut v, dev) };
        (r, v.iter().map(|b| format!("{b:02x}")).collect())
    }
    /// `cuGetErrorName`, `cuGetErrorString`.
    fn text(&self, name: &str, code: u32) -> (u32, Option<String>) {
        let mut p: *const c_char = c"untouched".as_ptr();
        let r =
            unsafe { self.sym::<unsafe extern "C" fn(u32, *mut *const c_char) -> u32>(name)(code, &mut p) };
        (r, (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()))
    }
    /// Calls a `(pointer, device)` function with a null pointer for device 0.
    fn null(&self, name: &str) -> u32 {
        unsafe { self.sym::<unsafe extern "C" fn(*mut u8, c_int) -> u32>(name)(std::ptr::null_mut(), 0) }
    }
    /// Calls a `(pointer)` function with a null pointer.
    fn null_only(&self, name: &str) -> u32 {
        unsafe { self.sym::<unsafe extern "C" fn(*mut c_int) -> u32>(name)(std::ptr::null_mut()) }
    }
    fn null_name(&self) -> u32 {
        let f = self.sym::<unsafe extern "C" fn(*mut c_char, c_int, c_int) -> u32>("cuDeviceGetName");
        unsafe { f(std::ptr::null_mut(), 64, 0) }
    }
}

/// Not a test of its own: the body of each child process `run` starts; nothing in the parent.
#[test]
fn child() {
    let Ok(scenario) = std::env::var(SCENARIO) else { return };
    let cu = Cu(unsafe { Library::new(library()) }.unwrap());
    let mut t = Vec::<String>::new();
    macro_rules! say { ($($a:tt)*) => { t.push(format!($($a)*)) } }
    match scenario.as_str() {
        "uninitialised" => {
            say!("count {:?}", cu.int("cuDeviceGetCount"));
            say!("init {}, again {}", cu.init(0), cu.init(0));
            say!("count {:?}, version {:?}", cu.int("cuDeviceGetCount"), cu.int("cuDriverGetVersion"));
            say!("{:?} {:?}", cu.text("cuGetErrorName", 100), cu.text("cuGetErrorString", 100));
        }
        "machine" => {
            say!(
                "before init: version {:?}, get {:?}, name {:?}",
                cu.int("cuDriverGetVersion"),
                cu.get(0),
                cu.name(64, 0)
            );
            say!("{:?} {:?}", cu.text("cuGetErrorName", 3), cu.text("cuGetErrorString", 3));
            say!("init(1) {}, count {:?}", cu.init(1), cu.int("cuDeviceGetCount"));
            say!("init {}, again {}", cu.init(0), cu.init(0));
            say!("version {:?}, count {:?}", cu.int("cuDriverGetVersion"), cu.int("cuDeviceGetCount"));
            say!("get {:?} {:?} {:?} {:?}", cu.get(0), cu.get(1), cu.get(2), cu.get(-1));
            say!("name {:?} {:?} {:?} {:?}", cu.name(64, 0), cu.name(3, 0), cu.name(1, 0), cu.name(0, 0));
            say!("name {:?} {:?}", cu.name(64, 1), cu.name(64, 2));
            say!("mem {:?} {:?} {:?}", cu.mem(0), cu.mem(1), cu.mem(2));
            say!("mem_v2 {:?} {:?} {:?}", cu.mem_v2(0), cu.mem_v2(1), cu.mem_v2(2));
            for dev in [0, 1] {
                let a: Vec<_> = [75, 76, 16, 18, 17].into_iter().map(|a| cu.attr(a, dev)).collect();
                say!("attributes {dev} {a:?}");
            }
            say!("attribute of 2 {:?}", cu.attr(75, 2));
            say!("uuid {:?} {:?}", cu.uuid("cuDeviceGetUuid", 0), cu.uuid("cuDeviceGetUuid_v2", 0));
            say!("uuid {:?} {:?}", cu.uuid("cuDeviceGetUuid", 1), cu.uuid("cuDeviceGetUuid_v2", 2));
            let nulls = ["cuDeviceTotalMem", "cuDeviceTotalMem_v2", "cuDeviceGetUuid", "cuDeviceGet"];
            say!(
                "null {:?} {:?} {}",
                ["cuDriverGetVersion", "cuDeviceGetCount"].map(|n| cu.null_only(n)),
                nulls.map(|n| cu.null(n)),
                cu.null_name()
            );
            say!(
                "unknown code {:?} {:?}",
                cu.text("cuGetErrorName", 12345),
                cu.text("cuGetErrorString", 12345)
            );
            let f = cu.sym::<unsafe extern "C" fn(u32, *mut *const c_char) -> u32>("cuGetErrorName");
            say!("error name into null {}", unsafe { f(3, std::ptr::null_mut()) });
            std::thread::scope(|s| {
                let all: Vec<_> =
                    (0..8).map(|_| s.spawn(|| (0..50).map(|_| cu.attr(16, 0)).collect::<Vec<_>>())).collect();
                let ok = all.into_iter().flat_map(|h| h.join().unwrap()).filter(|r| *r == (0, 16)).count();
                say!("threads {ok}");
            });
        }
        "faults" => {
            say!("init {}", cu.init(0));
            say!(
                "name {:?} {:?} {:?} {:?} {:?}",
                cu.name(64, 0),
                cu.name(64, 1),
                cu.name(64, 1),
                cu.name(64, 1),
                cu.name(64, 0)
            );
            say!("mem {:?}", cu.mem_v2(1));
        }
        "init fails" => {
            say!("init {}, again {}", cu.init(0), cu.init(0));
            say!("count {:?}", cu.int("cuDeviceGetCount"));
            say!("{:?}", cu.text("cuGetErrorName", 999));
        }
        other => panic!("no scenario {other}"),
    }
    std::fs::write(std::env::var(TRANSCRIPT).unwrap(), t.join("\n") + "\n").unwrap();
    // Unloaded only at exit, so FAKE_CUDA_CALLS is written as it is for a real client.
    std::mem::forget(cu);
}

#[test]
fn without_a_fixture_or_its_cuda_block_there_is_no_device_and_nothing_is_initialised() {
    let expected = "\
count (3, -1)
init 100, again 100
count (3, -1), version (3, -1)
(0, Some(\"CUDA_ERROR_NO_DEVICE\")) (0, Some(\"no CUDA-capable device is detected\"))
";
    assert_eq!(run("uninitialised", &[]).0, expected);
    let nvml_only = tmp("nvml-only.yaml");
    std::fs::write(&nvml_only, "driver_version: \"550.54.15\"\ncuda_driver_version: 12040\ngpus: []\n")
        .unwrap();
    let (transcript, stderr) =
        run("uninitialised", &[("FAKE_NVML_FIXTURE", nvml_only.display().to_string())]);
    assert_eq!(transcript, expected, "{stderr}");
}

#[test]
fn a_client_sees_the_fixture_with_cuda_h_semantics_and_calls_are_counted_at_exit() {
    let calls = tmp("calls.txt");
    let _ = std::fs::remove_file(&calls);
    let (transcript, stderr) = run(
        "machine",
        &[("FAKE_NVML_FIXTURE", fixture("jetson.yaml")), ("FAKE_CUDA_CALLS", calls.display().to_string())],
    );
    let expected = "\
before init: version (3, -1), get (3, -1), name (3, \"\")
(0, Some(\"CUDA_ERROR_NOT_INITIALIZED\")) (0, Some(\"initialization error\"))
init(1) 1, count (3, -1)
init 0, again 0
version (0, 12060), count (0, 2)
get (0, 0) (0, 1) (101, -1) (101, -1)
name (0, \"Orin\") (0, \"Or\") (0, \"\") (1, \"\")
name (0, \"NVIDIA Tegra X1\") (101, \"\")
mem (0, 4294967295) (0, 4156276736) (101, 4294967294)
mem_v2 (0, 65890410496) (0, 4156276736) (101, 0)
attributes 0 [(0, 8), (0, 7), (0, 16), (0, 1), (1, -1)]
attributes 1 [(0, 5), (0, 3), (0, 1), (0, 1), (1, -1)]
attribute of 2 (101, -1)
uuid (0, \"0a1b2c3d4e5f60718293a4b5c6d7e8f9\") (0, \"0a1b2c3d4e5f60718293a4b5c6d7e8f9\")
uuid (0, \"6b5a0001fa4e40008000000000000001\") (101, \"00000000000000000000000000000000\")
null [1, 1] [1, 1, 1, 1] 1
unknown code (1, None) (1, None)
error name into null 1
threads 400
";
    assert_eq!(transcript, expected, "{stderr}");
    let counts = std::fs::read_to_string(&calls).unwrap();
    let lines: Vec<&str> = counts.lines().collect();
    for line in ["cuDeviceGetAttribute 411", "cuInit 3", "cuGetErrorName 3", "cuDeviceGetUuid_v2 2"] {
        assert!(lines.contains(&line), "{line} in {counts}");
    }
    let mut sorted = lines.clone();
    sorted.sort();
    assert_eq!(lines, sorted, "sorted by symbol");
    assert_eq!(lines.len(), 12, "every export was called once at least: {counts}");
}

#[test]
fn faults_aim_at_one_ordinal_after_n_calls_and_nvml_keys_are_ignored() {
    let (transcript, stderr) = run("faults", &[("FAKE_NVML_FIXTURE", fixture("orin-jetpack6.yaml"))]);
    let expected = "\
init 0
name (0, \"Orin\") (0, \"Orin\") (1, \"\") (1, \"\") (0, \"Orin\")
mem (0, 65890410496)
";
    assert_eq!(transcript, expected, "{stderr}");
}

const INIT_FAILS: &str = "\
init 999, again 999
count (3, -1)
(0, Some(\"CUDA_ERROR_UNKNOWN\"))
";

/// A copy of `jetson.yaml` with `from` replaced by `to`, and what a client sees with it.
fn with_fixture(name: &str, from: &str, to: &str) -> (String, String, PathBuf) {
    let path = tmp(name);
    let text = std::fs::read_to_string(fixture("jetson.yaml")).unwrap();
    assert!(text.contains(from), "{from}");
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    let (transcript, stderr) = run("init fails", &[("FAKE_NVML_FIXTURE", path.display().to_string())]);
    (transcript, stderr, path)
}

#[test]
fn a_fault_on_cuinit_is_a_broken_driver() {
    let fault = "cuda:\n";
    let (transcript, stderr, _) =
        with_fixture("init-fault.yaml", fault, "faults: [{function: cuInit, error: unknown}]\ncuda:\n");
    assert_eq!(transcript, INIT_FAILS, "{stderr}");
    assert!(!stderr.contains("fake-cuda"), "a fault is no invalid fixture: {stderr}");
}

#[test]
fn an_invalid_fixture_fails_init_with_unknown_and_says_why() {
    for (name, from, to, reason) in [
        ("typo.yaml", "total_memory_bytes", "total_memory", "total_memory"),
        (
            "bad-fault.yaml",
            "cuda:\n",
            "faults: [{function: cuDeviceGetNam, error: unknown}]\ncuda:\n",
            "faults[0].function",
        ),
        (
            "bad-error.yaml",
            "cuda:\n",
            "faults: [{function: cuInit, error: gpu_is_lost}]\ncuda:\n",
            "faults[0].error",
        ),
    ] {
        let (transcript, stderr, path) = with_fixture(name, from, to);
        assert_eq!(transcript, INIT_FAILS, "{name}: {stderr}");
        assert!(stderr.contains(reason), "{name}: the reason: {stderr}");
        assert!(stderr.contains(&path.display().to_string()), "{name}: the file: {stderr}");
    }
    let missing = tmp("no-such-fixture.yaml").display().to_string();
    let (transcript, stderr) = run("init fails", &[("FAKE_NVML_FIXTURE", missing.clone())]);
    assert_eq!(transcript, INIT_FAILS, "{stderr}");
    assert!(stderr.contains(&format!("cannot read {missing}")), "{stderr}");
}
