//! The NVML session and what is known of the PCI bus: one value, made by whoever owns the run
//! (the daemon, or a one-shot command) and cloned to its users (labelling, health readings, the
//! event thread). nvmlInit costs 5.5 ms of CPU on a real H100 and a config-space read 24 ms on a
//! VM, against 0.2 ms for a whole pass of NVML reads, so both happen once, not per pass. The
//! session is opened again when NVML says the driver went away or changed, and when the NVIDIA
//! GPUs on the PCI bus change (a hot-added or removed GPU), never merely because NVML's count
//! differs from the bus's (sample trees, vGPU and passthrough differ for good).
//!
//! The session also holds the device source, chosen once ([`Session::device_source`]), and the
//! CUDA driver. No driver is started under the state lock that both sides (labelling, health)
//! take: `nvmlInit` runs with an "opening" mark in the state instead, and a caller that finds
//! the other side's open in progress waits for it at most [`OPEN_WAIT`], then goes without NVML
//! ([`NvmlSourceError::Opening`]); `cuInit` runs under a lock of its own, which only the CUDA source
//! takes. So a hung init stalls only the side that called it.

use super::cuda::{Cuda, CudaOpenError};
use super::pci::PciBus;
use super::pci_ids::{PciIds, PciIdsError};
use super::strategy::{self, Settled, Strategy};
use super::{DeviceSource, NvmlSourceError, ProbeError, ProbeOptions, Source};
use crate::snapshot::VgpuDevice;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a caller waits for an NVML open the other side has in progress before it goes
/// without (an `nvmlInit` takes milliseconds, a few seconds on a large node without persistence
/// mode; a hung one is the other side's).
pub const OPEN_WAIT: Duration = Duration::from_secs(2);

/// One process's NVML session; clones share it.
#[derive(Clone, Default)]
pub struct Session {
    state: Arc<Mutex<State>>,
    /// Told when an open in progress ends.
    opened: Arc<Condvar>,
    /// The CUDA driver, once initialised: kept for the process, as the driver is never unloaded.
    /// A lock of its own: only the CUDA source takes it, so a hung `cuInit` holds no one else.
    cuda: Arc<Mutex<Option<Arc<Cuda>>>>,
    opens: Arc<AtomicU64>,
    lookups: Arc<AtomicU64>,
    calls: super::calls::Calls,
}

#[derive(Default)]
struct State {
    open: Option<Open>,
    /// An NVML open in progress, since when (the state is not locked while it runs).
    opening: Option<Instant>,
    /// The device source, once chosen (again after [`Session::reset`]).
    chosen: Option<Chosen>,
    /// The pci.ids database vfio GPUs are named from, and the `--pci-ids` it was read for.
    pci_ids: Option<ReadIds>,
    bus: Option<PciBus>,
    /// Config-space reads of buses forgotten since (a new sysfs root, SIGHUP).
    earlier_reads: u64,
}

/// The device source chosen, and the strategy it was chosen for.
struct Chosen {
    strategy: Strategy,
    source: Arc<dyn DeviceSource>,
}

/// The pci.ids database, and the `--pci-ids` it was read for.
struct ReadIds {
    file: Option<PathBuf>,
    ids: Arc<PciIds>,
}

/// An initialised NVML and what it was opened against.
struct Open {
    library: PathBuf,
    nvml: Arc<Nvml>,
    /// The NVIDIA GPUs on the bus when it was opened.
    gpus: Option<Vec<String>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("opens", &self.opens()).finish_non_exhaustive()
    }
}

impl State {
    /// The bus under `root` (a new root forgets the old one's facts).
    fn bus(&mut self, root: &Path) -> &mut PciBus {
        if self.bus.as_ref().is_none_or(|b| b.root() != root) {
            self.forget_bus();
            self.bus = Some(PciBus::new(root));
        }
        self.bus.as_mut().expect("just set")
    }

    fn forget_bus(&mut self) {
        self.earlier_reads += self.bus.take().map_or(0, |b| b.config_reads());
    }
}

fn gpus(bus: &PciBus) -> Option<Vec<String>> {
    bus.functions().map(|f| f.iter().filter(|f| f.is_display()).map(|f| f.address.clone()).collect())
}

/// The GPUs' PCI addresses as a log line shows them: comma-separated, or `unknown` where the bus
/// could not be listed.
fn addresses(gpus: &Option<Vec<String>>) -> String {
    gpus.as_ref().map_or_else(|| "unknown".into(), |g| g.join(","))
}

impl Session {
    /// No session yet: the first [`Session::nvml`] opens one.
    pub fn new() -> Session {
        Session::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// NVML for the next reads: the open session, or a new one when there is none, the library
    /// changed, or the NVIDIA GPUs on the bus changed since it was opened. The bus's config space
    /// is read beside `nvmlInit` when it must be read at all. A failed open is not remembered: a
    /// driver that appears later is found by the next call. An open the other side has in
    /// progress is waited for up to [`OPEN_WAIT`], then this call fails
    /// ([`NvmlSourceError::Opening`]) rather than stall behind it.
    pub fn nvml(&self, opts: &ProbeOptions) -> Result<Arc<Nvml>, ProbeError> {
        let mut guard = self.lock();
        if guard.opening.is_some() {
            guard = self
                .opened
                .wait_timeout_while(guard, OPEN_WAIT, |s| s.opening.is_some())
                .unwrap_or_else(|p| p.into_inner())
                .0;
            if let Some(since) = guard.opening {
                return Err(NvmlSourceError::Opening(Duration::from_secs(since.elapsed().as_secs())).into());
            }
        }
        let state = &mut *guard;
        let bus = state.bus(&opts.sysfs_root);
        let changed = bus.refresh();
        let now = gpus(bus);
        if let Some(open) = &state.open {
            if open.library == opts.library && (!changed || open.gpus == now) {
                return Ok(open.nvml.clone());
            }
            tracing::info!(
                before = %addresses(&open.gpus),
                now = %addresses(&now),
                "the NVIDIA GPUs on the PCI bus or the library changed; NVML is initialised again"
            );
            state.open = None;
        }
        let scan = state.bus(&opts.sysfs_root).needs_scan();
        state.opening = Some(Instant::now());
        drop(guard);
        let opening = Opening(self);
        // A thread only when config space must be read: on a VM it costs as much as nvmlInit.
        // The scan takes the state lock (sysfs reads only); nvmlInit runs outside it.
        let nvml = if scan {
            std::thread::scope(|s| {
                let scan = s.spawn(|| {
                    let _ = self.lock().bus(&opts.sysfs_root).vgpu();
                });
                let nvml = self.open(opts);
                let _ = scan.join();
                nvml
            })
        } else {
            self.open(opts)
        };
        let mut state = self.lock();
        opening.end(&mut state);
        let nvml = Arc::new(nvml?);
        self.opens.fetch_add(1, Ordering::Relaxed);
        state.open = Some(Open { library: opts.library.clone(), nvml: nvml.clone(), gpus: now });
        Ok(nvml)
    }

    /// Initialises NVML from `opts.library`, counted as one lookup of the library.
    fn open(&self, opts: &ProbeOptions) -> Result<Nvml, ProbeError> {
        self.lookups.fetch_add(1, Ordering::Relaxed);
        open(opts)
    }

    /// The open session, if there is one, without looking at the bus or opening one (what the
    /// event thread checks between waits).
    pub fn current(&self) -> Option<Arc<Nvml>> {
        self.lock().open.as_ref().map(|o| o.nvml.clone())
    }

    /// Drops the session if `e` says the driver went away or changed, so the next user
    /// initialises NVML again. Returns whether it did.
    pub fn check(&self, e: &NvmlError) -> bool {
        let gone = matches!(
            e,
            NvmlError::Uninitialized | NvmlError::DriverNotLoaded | NvmlError::LibRmVersionMismatch
        );
        if gone && self.lock().open.take().is_some() {
            tracing::warn!(error = %e, "NVML says the driver went away or changed; it is initialised again");
        }
        gone
    }

    /// Forgets the session, the bus and the device source (SIGHUP: look at everything again);
    /// the next user opens NVML, reads the bus and resolves the source anew. CUDA stays
    /// initialised: one `cuInit` per process.
    pub fn reset(&self) {
        let mut state = self.lock();
        state.open = None;
        state.chosen = None;
        state.pci_ids = None;
        state.forget_bus();
    }

    /// The device source for `opts`, resolved as GFD resolves `auto` and chosen once (until a
    /// reset or a new strategy). A resolution that needed NVML and could not start it is not
    /// kept, so a driver that appears later is looked at again.
    pub fn device_source(&self, opts: &ProbeOptions) -> Arc<dyn DeviceSource> {
        if let Some(chosen) = &self.lock().chosen {
            if chosen.strategy == opts.strategy {
                return chosen.source.clone();
            }
        }
        let (source, wsl, keep) = match strategy::settled(opts) {
            Settled::Source { source, wsl } => (source, wsl, true),
            Settled::NoNvml => (Source::Nvml, false, false),
            Settled::AskNvml => match self.nvml(opts) {
                Ok(nvml) => (if integrated(&nvml) { Source::Cuda } else { Source::Nvml }, false, true),
                Err(_) => (Source::Nvml, false, false),
            },
        };
        let chosen = super::implementation(source, wsl);
        if keep {
            let backend = Strategy::of(source).as_str();
            tracing::info!(
                backend,
                driver = source.driver(),
                wsl,
                strategy = opts.strategy.as_str(),
                "device source"
            );
            self.lock().chosen = Some(Chosen { strategy: opts.strategy, source: chosen.clone() });
        }
        chosen
    }

    /// The pci.ids database for `opts.pci_ids`, read once (GFD parses it for every device of
    /// every pass); again after a reset.
    pub fn pci_ids(&self, opts: &ProbeOptions) -> Result<Arc<PciIds>, PciIdsError> {
        let mut state = self.lock();
        if let Some(ReadIds { ids, .. }) = state.pci_ids.as_ref().filter(|read| read.file == opts.pci_ids) {
            return Ok(ids.clone());
        }
        let ids = Arc::new(PciIds::load(opts.pci_ids.as_deref(), &opts.pci_ids_search)?);
        // Said once, where GFD publishes a BAR aperture as the memory (decisions.md).
        tracing::info!(
            pci_ids = %ids.source(),
            "vfio: GPUs are named from pci.ids; gpu.memory and gpu.compute.major/minor are not labelled (no driver answers for a GPU bound to vfio-pci, and a BAR aperture is not its memory)"
        );
        state.pci_ids = Some(ReadIds { file: opts.pci_ids.clone(), ids: ids.clone() });
        Ok(ids)
    }

    /// The CUDA driver from `opts.cuda_library`, initialised on first use and kept; a failed
    /// start is not remembered. Under the CUDA lock only, never the state's.
    pub fn cuda(&self, opts: &ProbeOptions) -> Result<Arc<Cuda>, CudaOpenError> {
        let mut cuda = self.cuda.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(cuda) = cuda.as_ref().filter(|c| c.library() == opts.cuda_library) {
            return Ok(cuda.clone());
        }
        let opened = Arc::new(Cuda::open(&opts.cuda_library)?);
        *cuda = Some(opened.clone());
        Ok(opened)
    }

    /// The vGPU devices under `sysfs_root` (config space read only when the NVIDIA functions
    /// changed since the last scan).
    pub fn vgpu(&self, sysfs_root: &Path) -> Result<Vec<VgpuDevice>, String> {
        self.lock().bus(sysfs_root).vgpu()
    }

    /// NVIDIA GPUs on the PCI bus under `sysfs_root` as [`Session::nvml`] last looked (every
    /// user opens the session first, so the bus is not listed twice); `None` when it cannot be
    /// listed.
    pub fn pci_gpus(&self, sysfs_root: &Path) -> Option<u32> {
        self.lock().bus(sysfs_root).display_gpus()
    }

    /// The PCI class of the NVIDIA function at NVML bus id `bus_id`, as read when the bus last
    /// changed; `None` when it is not known that way (the caller reads the file).
    pub fn pci_class(&self, sysfs_root: &Path, bus_id: &str) -> Option<u32> {
        let address = super::sysfs::sysfs_address(bus_id);
        let mut state = self.lock();
        let functions = state.bus(sysfs_root).functions()?;
        functions.iter().find(|f| f.address == address)?.class
    }

    /// Marks NVML work through this session as in flight until the guard drops (the
    /// labelling pass and health's reading; a wait for events is not work).
    pub fn enter(&self, what: &'static str) -> super::calls::InFlight {
        self.calls.enter(what)
    }

    /// The oldest work in flight called `what` ("labelling pass"), whatever the other side does.
    pub fn oldest_call_of(&self, what: &str) -> Option<super::calls::Oldest> {
        self.calls.oldest_of(what)
    }

    /// The NVML work in flight longest: what, for how long, since when, in which call.
    pub fn oldest_call(&self) -> Option<super::calls::Oldest> {
        self.calls.oldest()
    }

    /// How many times NVML was initialised.
    pub fn opens(&self) -> u64 {
        self.opens.load(Ordering::Relaxed)
    }

    /// How many times NVML's library was looked for (every open tried, failed ones included).
    pub fn nvml_lookups(&self) -> u64 {
        self.lookups.load(Ordering::Relaxed)
    }

    /// How many PCI config-space reads were made.
    pub fn config_reads(&self) -> u64 {
        let state = self.lock();
        state.earlier_reads + state.bus.as_ref().map_or(0, PciBus::config_reads)
    }
}

/// Ends an open in progress (also when it panics), and tells whoever waits for it.
struct Opening<'a>(&'a Session);

impl Opening<'_> {
    /// Ends it under the state lock the caller holds (so no one finds neither an open session
    /// nor one in progress in between).
    fn end(self, state: &mut State) {
        state.opening = None;
        self.0.opened.notify_all();
        std::mem::forget(self);
    }
}

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        self.0.lock().opening = None;
        self.0.opened.notify_all();
    }
}

/// Whether NVML names an integrated GPU (what go-nvlib looks for).
fn integrated(nvml: &Nvml) -> bool {
    let count = nvml.device_count().unwrap_or(0);
    (0..count).any(|i| {
        let name = nvml.device_by_index(i).and_then(|d| d.name());
        name.is_ok_and(|n| strategy::is_integrated_name(&n))
    })
}

/// Initialises NVML from `opts.library` (a new session each call).
pub fn open(opts: &ProbeOptions) -> Result<Nvml, ProbeError> {
    let library = opts.library.display().to_string();
    let nvml = Nvml::builder().lib_path(opts.library.as_os_str()).init().map_err(|e| match e {
        NvmlError::LibloadingError(e) => {
            // The loader's text starts with the path again.
            let text = e.to_string();
            let why = text.strip_prefix(&format!("{library}: ")).unwrap_or(&text);
            NvmlSourceError::NoDriver { detail: format!("cannot load {library}: {why}") }
        }
        NvmlError::DriverNotLoaded => {
            NvmlSourceError::NoDriver { detail: format!("{library}: the driver is not loaded") }
        }
        NvmlError::FailedToLoadSymbol(e) => {
            NvmlSourceError::NoDriver { detail: format!("{library} is not NVML: {e}") }
        }
        source => NvmlSourceError::Init { library: library.clone(), source },
    })?;
    super::raw::keep_loaded(&opts.library);
    Ok(nvml)
}
