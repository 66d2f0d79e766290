//! What happens to the machine while a client runs: the `FAKE_NVML_EVENTS` file the library
//! follows (Xids, ECC errors, lost GPUs, changed health values) and the NVML event API that
//! delivers them (`nvmlEventSetCreate`, `nvmlDeviceRegisterEvents`, `nvmlEventSetWait*`, ...).
//!
//! The file is read from its size at the first init, at every exported call and, while a client
//! waits for an event, every few milliseconds, so a line is seen at most 50 ms after it is
//! appended. Events go to every set that registered their type on that GPU, in file order.

use crate::answers::out;
use crate::codes::{self, *};
use crate::exports::{export, Call};
use crate::state::{lock, Handle, Machine};
use nvml_wrapper_sys::bindings::*;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ffi::{c_uint, c_ulonglong};
use std::io::{Read, Seek, SeekFrom};
use std::time::{Duration, Instant};

/// A health value the event file can change (the `set` keys, plus the counters `dbe`/`sbe` move).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Key {
    /// `retired_pages_pending`.
    RetiredPagesPending,
    /// `remapped_rows.pending`.
    RemappedPending,
    /// `remapped_rows.failure`.
    RemappedFailure,
    /// `remapped_rows.uncorrectable`.
    RemappedUncorrectable,
    /// `remapped_rows.correctable` (not settable; read through field 142).
    RemappedCorrectable,
    /// `ecc.uncorrected_volatile`.
    EccUncorrectedVolatile,
    /// `ecc.corrected_volatile` (moved by `sbe`).
    EccCorrectedVolatile,
    /// `ecc.uncorrected_aggregate` (not settable).
    EccUncorrectedAggregate,
    /// `ecc.corrected_aggregate` (not settable).
    EccCorrectedAggregate,
    /// `nvlink.<link>.active`.
    NvlinkActive(u32),
}

/// One pending event, as `nvmlEventData_t` carries it.
#[derive(Debug, Clone, Copy)]
struct Event {
    gpu: u32,
    kind: u64,
    data: u64,
    gi: u32,
    ci: u32,
}

/// One event set: what it registered per GPU, and what waits to be read.
#[derive(Debug, Default)]
struct Set {
    registered: BTreeMap<u32, u64>,
    queue: VecDeque<Event>,
}

/// Event sets get addresses in this table, as device handles do in the state's.
static SET_SLOTS: [std::sync::atomic::AtomicU8; 4096] = [const { std::sync::atomic::AtomicU8::new(0) }; 4096];

/// NVML's "no such id" for the GPU- and compute-instance fields of a non-MIG event.
const NO_ID: u32 = u32::MAX;

/// The event file and what it has done; lives as long as the library (a re-init keeps a lost
/// GPU lost and a changed value changed, as a real driver does until the node reboots).
#[derive(Debug)]
pub struct Live {
    started: bool,
    path: Option<String>,
    offset: u64,
    partial: Vec<u8>,
    lost: BTreeSet<u32>,
    set_values: BTreeMap<(u32, Key), u64>,
    increments: BTreeMap<(u32, Key), u64>,
    sets: BTreeMap<usize, Set>,
}

impl Live {
    /// Nothing seen yet (const, for the library's static state).
    pub const fn new() -> Live {
        Live {
            started: false,
            path: None,
            offset: 0,
            partial: Vec::new(),
            lost: BTreeSet::new(),
            set_values: BTreeMap::new(),
            increments: BTreeMap::new(),
            sets: BTreeMap::new(),
        }
    }

    /// At the first init: remember the event file and start from its current size.
    pub fn start(&mut self) {
        if self.started {
            return;
        }
        self.started = true;
        self.path = std::env::var("FAKE_NVML_EVENTS").ok().filter(|p| !p.is_empty());
        if let Some(p) = &self.path {
            self.offset = std::fs::metadata(p).map_or(0, |m| m.len());
        }
    }

    /// Whether GPU `g` was reported lost.
    pub fn is_lost(&self, g: u32) -> bool {
        self.lost.contains(&g)
    }

    /// The value of `key` on GPU `g`, given the fixture's `base`: a `set` replaces it, `dbe`/`sbe`
    /// add to it.
    pub fn adjust(&self, g: u32, key: Key, base: u64) -> u64 {
        let v = self.set_values.get(&(g, key)).copied().unwrap_or(base);
        v.saturating_add(self.increments.get(&(g, key)).copied().unwrap_or(0))
    }

    /// The event sets die with the machine (after the last shutdown).
    pub fn machine_gone(&mut self) {
        self.sets.clear();
    }

    /// Reads what was appended to the event file and applies each complete line.
    pub fn poll(&mut self, machine: Option<&Machine>) {
        let (Some(path), Some(m)) = (self.path.clone(), machine) else { return };
        let Ok(mut file) = std::fs::File::open(&path) else { return };
        let len = file.metadata().map_or(0, |md| md.len());
        if len < self.offset {
            // Truncated or replaced: follow the new file from its start.
            self.offset = 0;
            self.partial.clear();
        }
        if len == self.offset || file.seek(SeekFrom::Start(self.offset)).is_err() {
            return;
        }
        // Bounded per call, so a runaway writer cannot exhaust memory; the rest comes next call.
        let mut chunk = Vec::new();
        let Ok(n) = file.take(1 << 20).read_to_end(&mut chunk) else { return };
        self.offset += n as u64;
        self.partial.extend_from_slice(&chunk);
        while let Some(end) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            if let Err(e) = self.apply(m, line.trim()) {
                eprintln!("fake-nvml: {path}: skipping line {:?}: {e}", line.trim());
            }
        }
    }

    fn apply(&mut self, m: &Machine, line: &str) -> Result<(), String> {
        if line.is_empty() || line.starts_with('#') {
            return Ok(());
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let (target, what, args) = match words.as_slice() {
            [t, w, rest @ ..] => (*t, *w, rest),
            _ => return Err("expected `<gpu> <what> [value]`".into()),
        };
        let (g, mig) = parse_target(m, target)?;
        let gpu = &m.fixture.gpus[g as usize];
        let no_ecc = || format!("GPU {g} has no `ecc` in the fixture");
        let (kind, data, gi, ci) = match (what, args) {
            ("xid", [n]) => {
                let n: u64 = n.parse().map_err(|_| format!("xid {n:?} is not a number"))?;
                let (gi, ci) = mig.unwrap_or((NO_ID, NO_ID));
                (nvmlEventTypeXidCriticalError, n, gi, ci)
            }
            ("dbe" | "sbe", []) => {
                gpu.ecc.as_ref().ok_or_else(no_ecc)?;
                let (kind, key) = if what == "dbe" {
                    (nvmlEventTypeDoubleBitEccError, Key::EccUncorrectedVolatile)
                } else {
                    (nvmlEventTypeSingleBitEccError, Key::EccCorrectedVolatile)
                };
                *self.increments.entry((g, key)).or_insert(0) += 1;
                (kind, 0, NO_ID, NO_ID)
            }
            ("lost", []) => {
                self.lost.insert(g);
                (nvmlEventTypeGpuUnavailableError, 0, NO_ID, NO_ID)
            }
            ("set", [key, value]) => {
                let (key, v) = parse_set(m, g, key, value)?;
                self.set_values.insert((g, key), v);
                return Ok(());
            }
            _ => return Err(format!("unknown event {what:?} or wrong number of values")),
        };
        if mig.is_some() && what != "xid" {
            return Err(format!("{what} applies to a GPU, not a MIG device"));
        }
        let event = Event { gpu: g, kind: u64::from(kind), data, gi, ci };
        for set in self.sets.values_mut() {
            if set.registered.get(&g).is_some_and(|mask| mask & event.kind != 0) {
                set.queue.push_back(event);
            }
        }
        Ok(())
    }
}

impl Call {
    /// Starts an exported call: takes the lock, counts the call, and applies what the event file
    /// says happened since the last one (so a lost GPU or a changed value shows in this call).
    pub(crate) fn begin(name: &'static str) -> Call {
        let mut c = Call { g: lock(), name };
        c.g.count(name);
        c.g.poll_events();
        c
    }
}

/// `<gpu>` or `<gpu>:<mig index>`: the GPU and, for a MIG device, its GPU- and compute-instance ids.
fn parse_target(m: &Machine, t: &str) -> Result<(u32, Option<(u32, u32)>), String> {
    let num = |s: &str| s.parse::<u32>().map_err(|_| format!("{t:?} is not `<gpu>` or `<gpu>:<mig>`"));
    let (g, mig) = match t.split_once(':') {
        None => (num(t)?, None),
        Some((g, i)) => (num(g)?, Some(num(i)?)),
    };
    let gpu = m.fixture.gpus.get(g as usize).ok_or_else(|| format!("no GPU {g} in the fixture"))?;
    let Some(i) = mig else { return Ok((g, None)) };
    let dev = gpu
        .mig
        .as_ref()
        .filter(|mig| mig.enabled)
        .and_then(|mig| mig.devices.get(i as usize))
        .ok_or_else(|| format!("GPU {g} has no MIG device {i}"))?;
    Ok((g, Some((dev.gi_id(i as usize), dev.ci_id()))))
}

/// `set <key> <value>`: the key, checked against the fixture section it changes, and its value.
fn parse_set(m: &Machine, g: u32, key: &str, value: &str) -> Result<(Key, u64), String> {
    let gpu = &m.fixture.gpus[g as usize];
    let (k, has, boolean) = match key {
        "retired_pages_pending" => (Key::RetiredPagesPending, gpu.retired_pages_pending.is_some(), true),
        "remapped_rows.pending" => (Key::RemappedPending, gpu.remapped_rows.is_some(), true),
        "remapped_rows.failure" => (Key::RemappedFailure, gpu.remapped_rows.is_some(), true),
        "remapped_rows.uncorrectable" => (Key::RemappedUncorrectable, gpu.remapped_rows.is_some(), false),
        "ecc.uncorrected_volatile" => (Key::EccUncorrectedVolatile, gpu.ecc.is_some(), false),
        _ => match key.strip_prefix("nvlink.").and_then(|r| r.strip_suffix(".active")) {
            Some(link) => {
                let link = link.parse().map_err(|_| format!("{key:?}: link {link:?} is not a number"))?;
                let links = crate::topology_fixture::link_states(gpu.nvlink.as_ref()).len();
                if gpu.nvlink.is_some() && link as usize >= links {
                    return Err(format!("GPU {g} has no NVLink {link} (the fixture lists {links})"));
                }
                (Key::NvlinkActive(link), gpu.nvlink.is_some(), true)
            }
            None => return Err(format!("unknown key {key:?}")),
        },
    };
    if !has {
        return Err(format!("GPU {g} has no `{}` in the fixture", key.split('.').next().unwrap_or(key)));
    }
    let v = if boolean {
        match value {
            "true" => 1,
            "false" => 0,
            _ => return Err(format!("{key} takes true or false, not {value:?}")),
        }
    } else {
        value.parse().map_err(|_| format!("{key} takes a count, not {value:?}"))?
    };
    Ok((k, v))
}

/// The event types GPU `g` supports: ECC and unavailability where it has ECC, Xids everywhere.
fn supported(m: &Machine, g: u32) -> u64 {
    let xid = u64::from(nvmlEventTypeXidCriticalError);
    if m.fixture.gpus[g as usize].ecc.is_some() {
        xid | u64::from(
            nvmlEventTypeSingleBitEccError
                | nvmlEventTypeDoubleBitEccError
                | nvmlEventTypeGpuUnavailableError,
        )
    } else {
        xid
    }
}

/// The event set behind an address, or `INVALID_ARGUMENT`.
fn set_mut(c: &mut Call, set: nvmlEventSet_t) -> Result<&mut Set, u32> {
    c.g.initialised()?;
    c.g.live.sets.get_mut(&(set as usize)).ok_or(INVALID_ARGUMENT)
}

export! { EVENT_SYMBOLS = [];
    fn nvmlEventSetCreate(set: *mut nvmlEventSet_t) |c| {
        c.g.initialised()?;
        if set.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        let live = &mut c.g.live;
        let addr = (0..SET_SLOTS.len())
            .map(|i| SET_SLOTS.as_ptr() as usize + i)
            .find(|a| !live.sets.contains_key(a))
            .ok_or(codes::by_name("memory").unwrap_or(UNKNOWN))?;
        live.sets.insert(addr, Set::default());
        out(set, addr as nvmlEventSet_t)
    }
    fn nvmlDeviceGetSupportedEventTypes(device: nvmlDevice_t, types: *mut c_ulonglong) |c| {
        let (m, h) = c.handle(device)?;
        let Handle::Gpu(g) = h else { return Err(NOT_SUPPORTED) };
        let mask = supported(m, g);
        out(types, mask)
    }
    fn nvmlDeviceRegisterEvents(device: nvmlDevice_t, types: c_ulonglong, set: nvmlEventSet_t) |c| {
        let (m, h) = c.handle(device)?;
        let Handle::Gpu(g) = h else { return Err(NOT_SUPPORTED) };
        if types & !supported(m, g) != 0 {
            return Err(NOT_SUPPORTED);
        }
        *set_mut(&mut c, set)?.registered.entry(g).or_insert(0) |= types;
        Ok(())
    }
    fn nvmlEventSetFree(set: nvmlEventSet_t) |c| {
        c.g.initialised()?;
        c.g.live.sets.remove(&(set as usize)).map(|_| ()).ok_or(INVALID_ARGUMENT)
    }
}

/// How often a waiting client looks at the file: well inside the 50 ms the spec allows.
const WAIT_STEP: Duration = Duration::from_millis(10);

/// Shared body of `nvmlEventSetWait` and `_v2`: the next event, waiting at most `timeout_ms`
/// without holding the lock, so other threads' calls go on meanwhile. `v2` also fills the GPU-
/// and compute-instance ids (the v1 struct ends before them).
unsafe fn wait(
    name: &'static str,
    set: nvmlEventSet_t,
    data: *mut nvmlEventData_t,
    timeout_ms: c_uint,
    v2: bool,
) -> u32 {
    lock().count(name);
    let deadline = Instant::now() + Duration::from_millis(u64::from(timeout_ms));
    loop {
        let found = {
            let mut c = Call { g: lock(), name };
            c.g.poll_events();
            match set_mut(&mut c, set) {
                Err(code) => return code,
                Ok(s) => {
                    s.queue.pop_front().map(|e| (e, c.g.initialised().map(|m| m.address(Handle::Gpu(e.gpu)))))
                }
            }
        };
        if let Some((e, Ok(device))) = found {
            if data.is_null() {
                return INVALID_ARGUMENT;
            }
            let d = &mut *data;
            d.device = device as nvmlDevice_t;
            d.eventType = e.kind;
            d.eventData = e.data;
            if v2 {
                d.gpuInstanceId = e.gi;
                d.computeInstanceId = e.ci;
            }
            return SUCCESS;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return TIMEOUT;
        }
        std::thread::sleep(left.min(WAIT_STEP));
    }
}

/// `nvmlEventSetWait`: the pre-MIG form.
///
/// # Safety
/// `data` must be null or valid for writing the three fields of the v1 `nvmlEventData_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlEventSetWait(
    set: nvmlEventSet_t,
    data: *mut nvmlEventData_t,
    timeout_ms: c_uint,
) -> nvmlReturn_t {
    std::panic::catch_unwind(|| wait("nvmlEventSetWait", set, data, timeout_ms, false)).unwrap_or(UNKNOWN)
}

/// `nvmlEventSetWait_v2`.
///
/// # Safety
/// `data` must be null or valid for writing an `nvmlEventData_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlEventSetWait_v2(
    set: nvmlEventSet_t,
    data: *mut nvmlEventData_t,
    timeout_ms: c_uint,
) -> nvmlReturn_t {
    std::panic::catch_unwind(|| wait("nvmlEventSetWait_v2", set, data, timeout_ms, true)).unwrap_or(UNKNOWN)
}

/// The wait symbols, which are written by hand (they must not hold the lock while waiting).
pub const WAIT_SYMBOLS: &[&str] = &["nvmlEventSetWait", "nvmlEventSetWait_v2"];
