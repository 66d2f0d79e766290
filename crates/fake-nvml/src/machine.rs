//! The loaded machine: the fixture, the handle addresses handed out for it, and the injected
//! faults it applies. No locking here; [`crate::state`] keeps the one machine behind the lock.

use crate::codes;
use crate::fixture::{self, FaultTarget, Fixture};
use std::collections::HashMap;

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
    /// The machine `fixture` describes, every handle given its address.
    pub fn new(fixture: Fixture) -> Machine {
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
    pub fn fault(&mut self, function: &str, target: Option<Handle>) -> Option<u32> {
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
