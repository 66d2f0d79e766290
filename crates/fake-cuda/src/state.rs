//! Everything the library keeps between calls, behind one lock: what the first `cuInit` found,
//! whether a `cuInit` succeeded, the faults' hit counts and the call counts.

use crate::codes::{self, CUresult};
use crate::fixture::{Cuda, Fixture};
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

/// Everything the library keeps between calls.
pub struct Global {
    /// What the first `cuInit` found: the machine, or the error every `cuInit` answers from then
    /// on (the real driver does not retry a failed initialisation either).
    loaded: Option<Result<Machine, CUresult>>,
    initialised: bool,
    calls: BTreeMap<&'static str, u64>,
}

/// A loaded fixture and how often each of its faults has matched.
struct Machine {
    fixture: Fixture,
    hits: Vec<u64>,
}

static GLOBAL: Mutex<Global> =
    Mutex::new(Global { loaded: None, initialised: false, calls: BTreeMap::new() });

/// Locks the global state; a panic in an earlier call must not wedge every later one.
pub fn lock() -> MutexGuard<'static, Global> {
    GLOBAL.lock().unwrap_or_else(|p| p.into_inner())
}

impl Machine {
    /// The error an injected fault makes a call of `function` on `device` answer, if any.
    fn fault(&mut self, function: &str, device: Option<u32>) -> Option<CUresult> {
        for (fault, hits) in self.fixture.faults.iter().zip(self.hits.iter_mut()) {
            if fault.function != function || fault.device.is_some_and(|d| Some(d) != device) {
                continue;
            }
            *hits += 1;
            if *hits > fault.after {
                return Some(fault.error);
            }
        }
        None
    }
}

impl Global {
    /// Counts one call of an exported function.
    pub fn count(&mut self, function: &'static str) {
        *self.calls.entry(function).or_insert(0) += 1;
    }

    /// `cuInit`: reads the fixture the first time; `symbols` are those a fault may name.
    pub fn init(&mut self, flags: u32, symbols: &[&str]) -> CUresult {
        let loaded = self.loaded.get_or_insert_with(|| load(symbols));
        let machine = match loaded {
            Ok(m) => m,
            Err(code) => return *code,
        };
        if let Some(code) = machine.fault("cuInit", None) {
            return code;
        }
        if flags != 0 {
            return codes::INVALID_VALUE;
        }
        if machine.fixture.cuda.as_ref().is_none_or(|c| c.devices.is_empty()) {
            return codes::NO_DEVICE;
        }
        self.initialised = true;
        codes::SUCCESS
    }

    /// The machine for a call of `function` after a successful `cuInit`, on the device with
    /// ordinal `device` if it takes one (`CUDA_ERROR_INVALID_DEVICE` when there is none such),
    /// applying the faults that match.
    pub fn checked(&mut self, function: &str, device: Option<i32>) -> Result<&Cuda, CUresult> {
        let (true, Some(Ok(machine))) = (self.initialised, self.loaded.as_mut()) else {
            return Err(codes::NOT_INITIALIZED);
        };
        let count = machine.fixture.cuda.as_ref().map_or(0, |c| c.devices.len());
        let ordinal = match device {
            None => None,
            Some(d) => {
                Some(u32::try_from(d).ok().filter(|d| (*d as usize) < count).ok_or(codes::INVALID_DEVICE)?)
            }
        };
        if let Some(code) = machine.fault(function, ordinal) {
            return Err(code);
        }
        machine.fixture.cuda.as_ref().ok_or(codes::NOT_INITIALIZED)
    }

    /// For the calls that answer before `cuInit`: the faults that match, once a fixture is read.
    pub fn any_time(&mut self, function: &str) -> Result<(), CUresult> {
        match self.loaded.as_mut() {
            Some(Ok(machine)) => machine.fault(function, None).map_or(Ok(()), Err),
            _ => Ok(()),
        }
    }

    /// Writes `FAKE_CUDA_CALLS`, one `<symbol> <count>` line per called function, sorted.
    pub fn write_calls(&self) {
        let Some(path) = std::env::var_os("FAKE_CUDA_CALLS") else {
            return;
        };
        let text: String = self.calls.iter().map(|(f, n)| format!("{f} {n}\n")).collect();
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("fake-cuda: cannot write FAKE_CUDA_CALLS file {}: {e}", path.to_string_lossy());
        }
    }
}

/// Reads `FAKE_NVML_FIXTURE`: no variable is a machine without a GPU, a bad file an unknown error
/// whose reason goes to stderr (the caller sees only the code).
fn load(symbols: &[&str]) -> Result<Machine, CUresult> {
    let Some(path) = std::env::var_os("FAKE_NVML_FIXTURE") else {
        return Err(codes::NO_DEVICE);
    };
    match Fixture::load(std::path::Path::new(&path), symbols) {
        Ok(fixture) => Ok(Machine { hits: vec![0; fixture.faults.len()], fixture }),
        Err(e) => {
            eprintln!("fake-cuda: {e}");
            Err(codes::UNKNOWN)
        }
    }
}
