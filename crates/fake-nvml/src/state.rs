//! Everything the library keeps between calls, behind one lock: the machine while initialised,
//! the call counts and the event file's effects.

use crate::codes;
use crate::fixture::{self, Fixture};
use crate::live::Live;
use crate::machine::{Handle, Machine, MAX_HANDLES};
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

/// Everything the library keeps between calls.
pub struct Global {
    refcount: u32,
    machine: Option<Machine>,
    calls: BTreeMap<&'static str, u64>,
    /// The event file and its effects (lost GPUs, changed health values, event sets).
    pub live: Live,
}

static GLOBAL: Mutex<Global> =
    Mutex::new(Global { refcount: 0, machine: None, calls: BTreeMap::new(), live: Live::new() });

/// Locks the global state; a panic in an earlier call must not wedge every later one.
pub fn lock() -> MutexGuard<'static, Global> {
    GLOBAL.lock().unwrap_or_else(|p| p.into_inner())
}

impl Global {
    /// Applies what was appended to the event file since the last call.
    pub fn poll_events(&mut self) {
        self.live.poll(self.machine.as_ref());
    }

    /// The GPU of the first device handle among a call's argument addresses, if any.
    pub fn gpu_of(&self, addrs: &[Option<usize>]) -> Option<u32> {
        let m = self.machine.as_ref()?;
        addrs.iter().flatten().find_map(|a| m.resolve(*a)).map(Handle::gpu)
    }

    /// Counts one call of an exported function.
    pub fn count(&mut self, function: &'static str) {
        *self.calls.entry(function).or_insert(0) += 1;
    }

    /// The machine, or `NVML_ERROR_UNINITIALIZED`, without applying any fault.
    pub fn initialised(&mut self) -> Result<&mut Machine, u32> {
        self.machine.as_mut().ok_or(codes::UNINITIALIZED)
    }

    /// The machine, or `NVML_ERROR_UNINITIALIZED`; also applies system-wide faults.
    pub fn machine(&mut self, function: &str) -> Result<&mut Machine, u32> {
        let m = self.machine.as_mut().ok_or(codes::UNINITIALIZED)?;
        match m.fault(function, None) {
            Some(code) => Err(code),
            None => Ok(m),
        }
    }

    /// Resolves a handle for `function`, applying faults aimed at it.
    pub fn handle(&mut self, function: &str, addr: usize) -> Result<(&mut Machine, Handle), u32> {
        let m = self.machine.as_mut().ok_or(codes::UNINITIALIZED)?;
        let h = m.resolve(addr).ok_or(codes::INVALID_ARGUMENT)?;
        if self.live.is_lost(h.gpu()) {
            return Err(codes::GPU_IS_LOST);
        }
        match m.fault(function, Some(h)) {
            Some(code) => Err(code),
            None => Ok((m, h)),
        }
    }

    /// `nvmlInit*`: loads the fixture on the first reference.
    pub fn init(&mut self, function: &str, symbols: &'static [&'static [&'static str]]) -> u32 {
        self.live.start(symbols);
        if self.refcount == 0 {
            let Ok(path) = std::env::var("FAKE_NVML_FIXTURE") else {
                return codes::DRIVER_NOT_LOADED;
            };
            let limits = fixture::Limits { symbols, max_handles: MAX_HANDLES };
            let fixture = match Fixture::load(&path, &limits) {
                Ok(f) => f,
                Err(e) => {
                    eprintln!("fake-nvml: {e}");
                    return codes::UNKNOWN;
                }
            };
            let mut machine = Machine::new(fixture);
            if let Some(code) = machine.fault(function, None) {
                return code;
            }
            self.machine = Some(machine);
        } else if let Some(code) = self.machine.as_mut().and_then(|m| m.fault(function, None)) {
            return code;
        }
        self.refcount += 1;
        codes::SUCCESS
    }

    /// `nvmlShutdown`: drops the machine with the last reference.
    pub fn shutdown(&mut self) -> u32 {
        if self.refcount == 0 {
            return codes::UNINITIALIZED;
        }
        if let Some(code) = self.machine.as_mut().and_then(|m| m.fault("nvmlShutdown", None)) {
            return code;
        }
        self.refcount -= 1;
        if self.refcount == 0 {
            self.machine = None;
            self.live.machine_gone();
            self.write_calls();
        }
        codes::SUCCESS
    }

    /// Writes `FAKE_NVML_CALLS`, one `<symbol> <count>` line per called function, sorted.
    pub fn write_calls(&self) {
        let Ok(path) = std::env::var("FAKE_NVML_CALLS") else {
            return;
        };
        let text: String = self.calls.iter().map(|(f, n)| format!("{f} {n}\n")).collect();
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("fake-nvml: cannot write FAKE_NVML_CALLS file {path}: {e}");
        }
    }
}
