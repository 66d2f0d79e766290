//! The `FAKE_NVML_EVENTS` file the library follows, and what its lines have done: Xids and ECC
//! errors queued for the event sets, lost GPUs, changed health values, and calls made to hang.
//!
//! The file is read from its size at the first init, at every exported call and, while a client
//! waits for an event (or a call hangs), every few milliseconds, so a line is seen at most 50 ms
//! after it is appended. Events go to every set that registered their type on that GPU, in file
//! order.

use crate::machine::Machine;
use nvml_wrapper_sys::bindings::*;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::{Read, Seek, SeekFrom};
use std::time::Duration;

/// How often a waiting client (or a hung call) looks at the file: well inside the 50 ms the spec
/// allows.
pub const WAIT_STEP: Duration = Duration::from_millis(10);

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
    /// `recovery_action` (field 230).
    RecoveryAction,
    /// `inforom_valid`.
    InforomValid,
    /// `pcie.replay_counter` (field 94).
    PcieReplayCounter,
    /// `clock_event_reasons`, as its bit mask.
    ClockEventReasons,
}

/// One pending event, as `nvmlEventData_t` carries it.
#[derive(Debug, Clone, Copy)]
pub struct Event {
    /// The GPU it happened on.
    pub gpu: u32,
    /// `eventType`.
    pub kind: u64,
    /// `eventData` (the Xid).
    pub data: u64,
    /// `gpuInstanceId`.
    pub gi: u32,
    /// `computeInstanceId`.
    pub ci: u32,
}

/// One event set: what it registered per GPU, and what waits to be read.
#[derive(Debug, Default)]
pub struct Set {
    /// The event types registered per GPU.
    pub registered: BTreeMap<u32, u64>,
    /// The events not read yet.
    pub queue: VecDeque<Event>,
}

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
    /// The event sets by address.
    pub sets: BTreeMap<usize, Set>,
    /// The exported symbols, the names a `hang` line may use.
    symbols: &'static [&'static [&'static str]],
    /// `hang` lines in force: function and GPU (`None` for `-`, every call) to how long it blocks.
    hangs: BTreeMap<(&'static str, Option<u32>), Duration>,
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
            symbols: &[],
            hangs: BTreeMap::new(),
        }
    }

    /// At the first init: remember the event file and start from its current size, and which
    /// functions exist (`symbols`) for `hang` lines.
    pub fn start(&mut self, symbols: &'static [&'static [&'static str]]) {
        if self.started {
            return;
        }
        self.started = true;
        self.symbols = symbols;
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

    /// How long a call of `function` on `gpu` (`None`: no device handle among its arguments)
    /// blocks now, if a `hang` line holds it: the longer of the GPU's and the `-` line's.
    pub fn hang_for(&self, function: &'static str, gpu: Option<u32>) -> Option<Duration> {
        let any = self.hangs.get(&(function, None));
        let this = gpu.and_then(|g| self.hangs.get(&(function, Some(g))));
        any.max(this).copied()
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
        if what == "hang" {
            return self.hang(m, target, args);
        }
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

    /// `<gpu> hang <function> <seconds>`: from now on every call of `function` on that GPU (`-`:
    /// every call) blocks that long before it answers; 0 ends it, for calls already blocked too.
    fn hang(&mut self, m: &Machine, target: &str, args: &[&str]) -> Result<(), String> {
        let [function, seconds] = args else {
            return Err("expected `<gpu or -> hang <nvml function> <seconds>`".into());
        };
        let gpu = match target {
            "-" => None,
            t => match parse_target(m, t)? {
                (g, None) => Some(g),
                (g, Some(_)) => return Err(format!("hang applies to GPU {g} or `-`, not a MIG device")),
            },
        };
        let name = self
            .symbols
            .iter()
            .flat_map(|list| list.iter())
            .find(|s| *s == function)
            .ok_or_else(|| format!("{function:?} is not a function this library exports"))?;
        let time = seconds
            .parse::<f64>()
            .ok()
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
            .ok_or_else(|| format!("hang takes seconds (0 ends it), not {seconds:?}"))?;
        if time.is_zero() {
            self.hangs.remove(&(name, gpu));
        } else {
            self.hangs.insert((name, gpu), time);
        }
        Ok(())
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
        "inforom_valid" => (Key::InforomValid, gpu.inforom_valid.is_some(), true),
        "pcie.replay_counter" => {
            (Key::PcieReplayCounter, gpu.pcie.as_ref().is_some_and(|p| p.replay_counter.is_some()), false)
        }
        "clock_event_reasons" => {
            let mask = crate::health_fixture::ClockEventReason::parse_list(value)?;
            return match gpu.clock_event_reasons {
                Some(_) => Ok((Key::ClockEventReasons, mask)),
                None => Err(format!("GPU {g} has no `clock_event_reasons` in the fixture")),
            };
        }
        "recovery_action" => {
            let names = crate::health_fixture::RecoveryAction::NAMES;
            let Some(v) = names.iter().position(|n| *n == value) else {
                return Err(format!("recovery_action takes one of {}, not {value:?}", names.join(", ")));
            };
            return match gpu.recovery_action {
                Some(_) => Ok((Key::RecoveryAction, v as u64)),
                None => Err(format!("GPU {g} has no `recovery_action` in the fixture")),
            };
        }
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
        // `pcie.replay_counter` needs the key itself, not only its section.
        let section = if k == Key::PcieReplayCounter { key } else { key.split('.').next().unwrap_or(key) };
        return Err(format!("GPU {g} has no `{section}` in the fixture"));
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
