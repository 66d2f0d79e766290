//! The NVML session and what is known of the PCI bus: one value, made by whoever owns the run
//! (the daemon, or a one-shot command) and cloned to its users (labelling, health readings, the
//! event thread). nvmlInit costs 5.5 ms of CPU on a real H100 and a config-space read 24 ms on a
//! VM, against 0.2 ms for a whole pass of NVML reads, so both happen once, not per pass. The
//! session is opened again when NVML says the driver went away or changed, and when the NVIDIA
//! GPUs on the PCI bus change (a hot-added or removed GPU), never merely because NVML's count
//! differs from the bus's (sample trees, vGPU and passthrough differ for good).

use super::cuda::{Cuda, CudaOpenError};
use super::pci::PciBus;
use super::pci_ids::{PciIds, PciIdsError};
use super::source::{self, Backend, Strategy};
use super::{ProbeError, ProbeOptions};
use crate::snapshot::VgpuDevice;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// One process's NVML session; clones share it.
#[derive(Clone, Default)]
pub struct Session {
    state: Arc<Mutex<State>>,
    opens: Arc<AtomicU64>,
    calls: super::calls::Calls,
}

#[derive(Default)]
struct State {
    open: Option<Open>,
    /// The device source, once resolved (again after [`Session::reset`]).
    backend: Option<(Strategy, Backend)>,
    /// The CUDA driver, once initialised: kept for the process, as the driver is never unloaded.
    cuda: Option<Arc<Cuda>>,
    /// NVML's library would not load beside CUDA (JetPack 5): not looked for again each pass.
    nvml_absent: bool,
    /// The pci.ids database vfio GPUs are named from, and the `--pci-ids` it was read for.
    pci_ids: Option<(Option<PathBuf>, Arc<PciIds>)>,
    bus: Option<PciBus>,
    /// Config-space reads of buses forgotten since (a new sysfs root, SIGHUP).
    earlier_reads: u64,
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
    /// driver that appears later is found by the next call.
    pub fn nvml(&self, opts: &ProbeOptions) -> Result<Arc<Nvml>, ProbeError> {
        let mut guard = self.lock();
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
        let bus = state.bus(&opts.sysfs_root);
        // A thread only when config space must be read: on a VM it costs as much as nvmlInit.
        let nvml = if bus.needs_scan() {
            std::thread::scope(|s| {
                let scan = s.spawn(|| {
                    let _ = bus.vgpu();
                });
                let nvml = open(opts);
                let _ = scan.join();
                nvml
            })
        } else {
            open(opts)
        }?;
        self.opens.fetch_add(1, Ordering::Relaxed);
        let nvml = Arc::new(nvml);
        state.open = Some(Open { library: opts.library.clone(), nvml: nvml.clone(), gpus: now });
        Ok(nvml)
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
        state.backend = None;
        state.nvml_absent = false;
        state.pci_ids = None;
        state.forget_bus();
    }

    /// The device source for `opts`, resolved as GFD resolves `auto` (once, until a reset or a
    /// new strategy). A resolution that needed NVML and could not start it is not kept, so a
    /// driver that appears later is looked at again.
    pub fn backend(&self, opts: &ProbeOptions) -> Backend {
        if let Some((strategy, backend)) = self.lock().backend {
            if strategy == opts.strategy {
                return backend;
            }
        }
        let (backend, keep) = match opts.strategy {
            Strategy::Nvml => (Backend::Nvml, true),
            Strategy::Tegra => (Backend::Tegra, true),
            Strategy::Vfio => (Backend::Vfio, true),
            Strategy::Auto => self.resolve(opts),
        };
        if keep {
            tracing::info!(backend = backend.as_str(), strategy = opts.strategy.as_str(), "device source");
            self.lock().backend = Some((opts.strategy, backend));
        }
        backend
    }

    /// GFD's platform resolver: WSL, then Tegra files without NVML, then an integrated GPU
    /// named by NVML, then NVML. With nothing at all it is NVML, whose failure to load is
    /// the node's init error.
    fn resolve(&self, opts: &ProbeOptions) -> (Backend, bool) {
        if source::loadable(std::path::Path::new(source::DXCORE_LIBRARY)) {
            return (Backend::Wsl, true);
        }
        let tegra = source::tegra_marker(&opts.host_root, &opts.sysfs_root);
        if !source::loadable(&opts.library) {
            return match tegra {
                Some(marker) => {
                    tracing::debug!(%marker, "a Tegra system without NVML");
                    (Backend::Tegra, true)
                }
                None => (Backend::Nvml, false),
            };
        }
        let Ok(nvml) = self.nvml(opts) else { return (Backend::Nvml, false) };
        let count = nvml.device_count().unwrap_or(0);
        let integrated = (0..count).any(|i| {
            let name = nvml.device_by_index(i).and_then(|d| d.name());
            name.is_ok_and(|n| source::is_integrated_name(&n))
        });
        (if integrated { Backend::Tegra } else { Backend::Nvml }, true)
    }

    /// NVML beside the CUDA source (JetPack 6 and Thor answer it: the driver's version), `None`
    /// where it is absent. A library that does not load is not looked for again until a reset
    /// (a JetPack without NVML gains none without a restart); a driver that does not start is.
    pub fn nvml_beside_cuda(&self, opts: &ProbeOptions) -> Option<Arc<Nvml>> {
        if self.lock().nvml_absent {
            return None;
        }
        match self.nvml(opts) {
            Ok(nvml) => Some(nvml),
            Err(ProbeError::NoDriver { detail }) if !source::loadable(&opts.library) => {
                tracing::debug!(%detail, "no NVML beside CUDA; the driver version labels read unknown");
                self.lock().nvml_absent = true;
                None
            }
            Err(_) => None,
        }
    }

    /// The pci.ids database for `opts.pci_ids`, read once (GFD parses it for every device of
    /// every pass); again after a reset.
    pub fn pci_ids(&self, opts: &ProbeOptions) -> Result<Arc<PciIds>, PciIdsError> {
        let mut state = self.lock();
        if let Some((_, ids)) = state.pci_ids.as_ref().filter(|(path, _)| *path == opts.pci_ids) {
            return Ok(ids.clone());
        }
        let ids = Arc::new(PciIds::load(opts.pci_ids.as_deref(), &opts.pci_ids_search)?);
        // Said once, where GFD publishes a BAR aperture as the memory (decisions.md).
        tracing::info!(
            pci_ids = %ids.source(),
            "vfio: GPUs are named from pci.ids; gpu.memory and gpu.compute.major/minor are not labelled (no driver answers for a GPU bound to vfio-pci, and a BAR aperture is not its memory)"
        );
        state.pci_ids = Some((opts.pci_ids.clone(), ids.clone()));
        Ok(ids)
    }

    /// The CUDA driver from `opts.cuda_library`, initialised on first use and kept; a failed
    /// start is not remembered.
    pub fn cuda(&self, opts: &ProbeOptions) -> Result<Arc<Cuda>, CudaOpenError> {
        let mut state = self.lock();
        if let Some(cuda) = state.cuda.as_ref().filter(|c| c.library() == opts.cuda_library) {
            return Ok(cuda.clone());
        }
        let cuda = Arc::new(Cuda::open(&opts.cuda_library)?);
        state.cuda = Some(cuda.clone());
        Ok(cuda)
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

    /// The NVML work in flight longest, and for how long (a hung driver call shows here).
    pub fn longest_call(&self) -> Option<(&'static str, std::time::Duration)> {
        self.calls.longest()
    }

    /// The NVML work in flight longest: what, for how long, since when, in which call.
    pub fn oldest_call(&self) -> Option<super::calls::Oldest> {
        self.calls.oldest()
    }

    /// How many times NVML was initialised.
    pub fn opens(&self) -> u64 {
        self.opens.load(Ordering::Relaxed)
    }

    /// How many PCI config-space reads were made.
    pub fn config_reads(&self) -> u64 {
        let state = self.lock();
        state.earlier_reads + state.bus.as_ref().map_or(0, PciBus::config_reads)
    }
}

/// Initialises NVML from `opts.library` (a new session each call).
pub fn open(opts: &ProbeOptions) -> Result<Nvml, ProbeError> {
    let library = opts.library.display().to_string();
    let nvml = Nvml::builder().lib_path(opts.library.as_os_str()).init().map_err(|e| match e {
        NvmlError::LibloadingError(e) => {
            // The loader's text starts with the path again.
            let text = e.to_string();
            let why = text.strip_prefix(&format!("{library}: ")).unwrap_or(&text);
            ProbeError::NoDriver { detail: format!("cannot load {library}: {why}") }
        }
        NvmlError::DriverNotLoaded => {
            ProbeError::NoDriver { detail: format!("{library}: the driver is not loaded") }
        }
        NvmlError::FailedToLoadSymbol(e) => {
            ProbeError::NoDriver { detail: format!("{library} is not NVML: {e}") }
        }
        source => ProbeError::Init { library: library.clone(), source },
    })?;
    super::raw::keep_loaded(&opts.library);
    Ok(nvml)
}
