//! The loaded machine, its handles, injected faults and call counts, behind one lock.

use crate::codes;
use crate::fixture::{self, FaultTarget, Fixture};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};

/// What a handle address stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Handle {
    /// Physical GPU `g`.
    Gpu(u32),
    /// MIG device `m` (position in the fixture) of GPU `g`.
    Mig(u32, u32),
    /// GPU instance `gi_id` of GPU `g`.
    GpuInstance(u32, u32),
    /// Compute instance `ci_id` in GPU instance `gi_id` of GPU `g`.
    ComputeInstance(u32, u32, u32),
}

/// The machine while initialised.
pub struct Machine {
    /// The parsed fixture.
    pub fixture: Fixture,
    handles: HashMap<usize, Handle>,
    by_handle: HashMap<Handle, usize>,
    fault_hits: Vec<u64>,
    /// `nvmlDeviceGetNvLinkState` per GPU and link id, starting from the fixture; events change it.
    pub nvlink_active: Vec<Vec<bool>>,
}

/// Everything the library keeps between calls.
pub struct Global {
    refcount: u32,
    machine: Option<Machine>,
    calls: BTreeMap<&'static str, u64>,
    /// The event file and its effects (lost GPUs, changed health values, event sets).
    pub live: crate::events::Live,
}

static GLOBAL: Mutex<Global> = Mutex::new(Global {
    refcount: 0,
    machine: None,
    calls: BTreeMap::new(),
    live: crate::events::Live::new(),
});

/// Locks the global state; a panic in an earlier call must not wedge every later one.
pub fn lock() -> MutexGuard<'static, Global> {
    GLOBAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Room for this many handles in one machine (GPUs plus MIG devices, GPU and compute instances).
pub const MAX_HANDLES: usize = 1 << 20;

/// Handle addresses point into this table: stable for the library's lifetime, distinct, and
/// never dereferenced. A static table instead of heap records, so repeated init/shutdown cycles
/// allocate nothing that outlives them; untouched `.bss` costs no resident memory.
static SLOTS: [std::sync::atomic::AtomicU8; MAX_HANDLES] =
    [const { std::sync::atomic::AtomicU8::new(0) }; MAX_HANDLES];

/// The address of handle slot `i`.
fn slot_address(i: usize) -> usize {
    SLOTS.as_ptr() as usize + i
}

impl Handle {
    /// The physical GPU this handle belongs to.
    pub fn gpu(self) -> u32 {
        match self {
            Handle::Gpu(g)
            | Handle::Mig(g, _)
            | Handle::GpuInstance(g, _)
            | Handle::ComputeInstance(g, _, _) => g,
        }
    }
}

impl Machine {
    fn new(fixture: Fixture) -> Machine {
        let mut m = Machine {
            fault_hits: vec![0; fixture.faults.len()],
            nvlink_active: fixture
                .gpus
                .iter()
                .map(|g| crate::topology_fixture::link_states(g.nvlink.as_ref()))
                .collect(),
            fixture,
            handles: HashMap::new(),
            by_handle: HashMap::new(),
        };
        let mut all = Vec::new();
        for (g, gpu) in m.fixture.gpus.iter().enumerate() {
            let g = g as u32;
            all.push(Handle::Gpu(g));
            if let Some(mig) = gpu.mig.as_ref().filter(|mig| mig.enabled) {
                for (i, dev) in mig.devices.iter().enumerate() {
                    let gi = dev.gi_id(i);
                    all.push(Handle::Mig(g, i as u32));
                    all.push(Handle::GpuInstance(g, gi));
                    all.push(Handle::ComputeInstance(g, gi, dev.ci_id()));
                }
            }
        }
        for h in all {
            if !m.by_handle.contains_key(&h) {
                let addr = slot_address(m.by_handle.len());
                m.handles.insert(addr, h);
                m.by_handle.insert(h, addr);
            }
        }
        m
    }

    /// Decodes a caller's handle without dereferencing it.
    pub fn resolve(&self, addr: usize) -> Option<Handle> {
        self.handles.get(&addr).copied()
    }

    /// The address of a handle.
    pub fn address(&self, h: Handle) -> usize {
        self.by_handle[&h]
    }

    /// Whether the handle exists (a GI or CI id that is in use).
    pub fn exists(&self, h: Handle) -> bool {
        self.by_handle.contains_key(&h)
    }

    /// The fixture's MIG devices of GPU `g` that live in GPU instance `gi`.
    pub fn migs_in_gi(&self, g: u32, gi: u32) -> impl Iterator<Item = (u32, &fixture::MigDevice)> {
        self.fixture.gpus[g as usize]
            .mig
            .iter()
            .filter(|mig| mig.enabled)
            .flat_map(|mig| mig.devices.iter().enumerate())
            .filter(move |(i, d)| d.gi_id(*i) == gi)
            .map(|(i, d)| (i as u32, d))
    }

    /// Applies injected faults for a call of `function` on `target`: the error to return, if any.
    fn fault(&mut self, function: &str, target: Option<Handle>) -> Option<u32> {
        for (i, fault) in self.fixture.faults.iter().enumerate() {
            if fault.function != function {
                continue;
            }
            let matches = match (fault.target().ok()?, target) {
                (FaultTarget::Any, _) => true,
                (FaultTarget::Gpu(g), Some(Handle::Gpu(h))) => g == h,
                (FaultTarget::Mig(g, m), Some(Handle::Mig(hg, hm))) => g == hg && m == hm,
                // A GPU or compute instance fails for its GPU and for every MIG device inside it.
                (
                    FaultTarget::Gpu(g),
                    Some(Handle::GpuInstance(hg, _) | Handle::ComputeInstance(hg, _, _)),
                ) => g == hg,
                (FaultTarget::Mig(g, m), Some(Handle::GpuInstance(hg, gi))) => {
                    g == hg && self.migs_in_gi(hg, gi).any(|(i, _)| i == m)
                }
                (FaultTarget::Mig(g, m), Some(Handle::ComputeInstance(hg, gi, ci))) => {
                    g == hg && self.migs_in_gi(hg, gi).any(|(i, d)| i == m && d.ci_id() == ci)
                }
                _ => false,
            };
            if matches {
                self.fault_hits[i] += 1;
                if self.fault_hits[i] > fault.after {
                    return codes::by_name(&fault.error);
                }
            }
        }
        None
    }
}

impl Global {
    /// Applies what was appended to the event file since the last call.
    pub fn poll_events(&mut self) {
        self.live.poll(self.machine.as_ref());
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
        self.live.start();
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
