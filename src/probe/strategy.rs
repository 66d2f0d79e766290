//! Which device source a node has (`--device-discovery-strategy`), resolved as GFD resolves it:
//! WSL (a loadable `libdxcore.so`) is NVML; Tegra files without NVML, or an NVML device that is
//! an integrated GPU, is CUDA; a loadable NVML is NVML; vfio is only ever asked for. Resolved
//! once per session (again after SIGHUP or for another strategy), so a pass does not look again:
//! what files and libraries settle here ([`settled`]), what needs NVML in `session.rs`.

use super::ProbeOptions;
use crate::snapshot::Source;
use std::path::Path;

/// `--device-discovery-strategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Strategy {
    /// As GFD's platform resolver decides.
    #[default]
    Auto,
    /// NVML.
    Nvml,
    /// The CUDA driver API (integrated GPUs: Jetson, IGX, Thor).
    Tegra,
    /// GPUs bound to `vfio-pci`, from sysfs.
    Vfio,
}

impl Strategy {
    /// Every strategy, in the flag's order.
    pub const ALL: [Strategy; 4] = [Strategy::Auto, Strategy::Nvml, Strategy::Tegra, Strategy::Vfio];

    /// From its flag spelling; `None` for anything else.
    pub fn parse(s: &str) -> Option<Strategy> {
        <Strategy as clap::ValueEnum>::from_str(s, false).ok()
    }

    /// The strategy that asks for `source`: the one place a source meets its flag value (and how
    /// logs name the source), so a new source without one does not compile.
    pub fn of(source: Source) -> Strategy {
        match source {
            Source::Nvml => Strategy::Nvml,
            Source::Cuda => Strategy::Tegra,
            Source::Vfio => Strategy::Vfio,
        }
    }

    /// The source this strategy asks for; `None` for `auto`, which the node decides.
    pub fn source(self) -> Option<Source> {
        Source::ALL.into_iter().find(|source| Strategy::of(*source) == self)
    }

    /// The flag spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Auto => "auto",
            Strategy::Nvml => "nvml",
            Strategy::Tegra => "tegra",
            Strategy::Vfio => "vfio",
        }
    }
}

/// What files and libraries settle of the source `opts` asks for, before any driver starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// This source (`wsl`: NVML under WSL), kept for the session.
    Source {
        /// The source.
        source: Source,
        /// NVML under WSL (no PCI function in sysfs).
        wsl: bool,
    },
    /// NVML, whose library does not load: its failure is the node's init error, and it is not
    /// kept, so a driver that appears later is looked at again.
    NoNvml,
    /// NVML loads: whether it names an integrated GPU decides, which needs the driver.
    AskNvml,
}

/// GFD's platform resolver as far as it goes without a driver: an explicit strategy, then WSL,
/// then Tegra files without NVML.
pub fn settled(opts: &ProbeOptions) -> Settled {
    let source = match opts.strategy.source() {
        Some(source) => source,
        None if loadable(Path::new(DXCORE_LIBRARY)) => {
            return Settled::Source { source: Source::Nvml, wsl: true }
        }
        None if loadable(&opts.library) => return Settled::AskNvml,
        None => match tegra_marker(&opts.host_root, &opts.sysfs_root) {
            Some(marker) => {
                tracing::debug!(%marker, "a Tegra system without NVML");
                Source::Cuda
            }
            None => return Settled::NoNvml,
        },
    };
    Settled::Source { source, wsl: false }
}

/// Whether this is an integrated-GPU node without NVML (JetPack 5 and earlier), told from files
/// and libraries alone: nothing that may touch a driver (what health asks at start, on the
/// runtime's thread).
pub fn cuda_without_nvml(opts: &ProbeOptions) -> bool {
    !loadable(&opts.library) && matches!(settled(opts), Settled::Source { source: Source::Cuda, .. })
}

/// The library whose presence means WSL (searched as the loader searches).
pub const DXCORE_LIBRARY: &str = "libdxcore.so";
/// The file whose presence means a Tegra (Jetson, IGX) system, under the host root.
pub const TEGRA_RELEASE: &str = "etc/nv_tegra_release";
/// The SoC family file under sysfs; `tegra…` on a Tegra system (Thor included).
pub const SOC_FAMILY: &str = "devices/soc0/family";

/// NVML device names of integrated GPUs (what go-nvlib looks for).
pub fn is_integrated_name(name: &str) -> bool {
    name.contains("(nvgpu)") || name.contains("NVIDIA Thor")
}

/// Whether a shared object `name` (or path) can be loaded here.
pub fn loadable(name: &Path) -> bool {
    #[allow(unsafe_code)]
    // SAFETY: loading runs the library's initialisers; these are the driver libraries (or
    // WSL's dxcore) that the node's own GPU programs load the same way. The handle is closed
    // at once, as go-nvlib's check does.
    let lib = unsafe { libloading::Library::new(name.as_os_str()) };
    lib.is_ok()
}

/// What the Tegra files say: which one marks this a Tegra system, if any.
pub fn tegra_marker(host_root: &Path, sysfs_root: &Path) -> Option<String> {
    let release = host_root.join(TEGRA_RELEASE);
    if release.exists() {
        return Some(release.display().to_string());
    }
    let family = sysfs_root.join(SOC_FAMILY);
    let text = crate::limits::read(&family, crate::limits::SYSFS_FILE).ok()?;
    let text = String::from_utf8_lossy(&text);
    text.trim()
        .to_ascii_lowercase()
        .starts_with("tegra")
        .then(|| format!("{} ({})", family.display(), text.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategies_round_trip_and_nothing_else_parses() {
        for s in ["auto", "nvml", "tegra", "vfio"] {
            assert_eq!(Strategy::parse(s).unwrap().as_str(), s);
        }
        assert_eq!(Strategy::parse("Tegra"), None);
        for source in Source::ALL {
            assert_eq!(Strategy::of(source).source(), Some(source), "{source:?}");
        }
        assert_eq!(Strategy::Auto.source(), None);
        assert_eq!(Strategy::parse(""), None);
    }

    #[test]
    fn integrated_gpus_are_named_as_go_nvlib_finds_them() {
        assert!(is_integrated_name("Orin (nvgpu)"));
        assert!(is_integrated_name("NVIDIA Thor"));
        assert!(!is_integrated_name("Orin"));
        assert!(!is_integrated_name("NVIDIA H100 80GB HBM3"));
    }

    #[test]
    fn tegra_files_under_moved_roots() {
        let host = tempfile::tempdir().unwrap();
        let sys = tempfile::tempdir().unwrap();
        assert_eq!(tegra_marker(host.path(), sys.path()), None);
        std::fs::create_dir_all(sys.path().join("devices/soc0")).unwrap();
        std::fs::write(sys.path().join(SOC_FAMILY), "jetson\n").unwrap();
        assert_eq!(tegra_marker(host.path(), sys.path()), None, "only tegra counts");
        std::fs::write(sys.path().join(SOC_FAMILY), "Tegra\n").unwrap();
        assert!(tegra_marker(host.path(), sys.path()).unwrap().contains("(Tegra)"), "any case");
        std::fs::remove_file(sys.path().join(SOC_FAMILY)).unwrap();
        std::fs::create_dir_all(host.path().join("etc")).unwrap();
        std::fs::write(host.path().join(TEGRA_RELEASE), "# R36 (release)\n").unwrap();
        assert!(tegra_marker(host.path(), sys.path()).unwrap().ends_with(TEGRA_RELEASE));
    }
}
