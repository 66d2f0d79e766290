//! The built-in catalogue of NVIDIA GPUs (`gpus.yaml`): for each SKU what NVML reports (the name,
//! total memory in MiB, compute capability, PCI ids, whether MIG is possible and its profiles) and
//! where each figure was seen. `--gpu NAME --count N` makes from an entry the snapshot a node of N
//! such GPUs would give, so its template comes from the same labelers. A figure nobody measured is
//! not in the file: a template that needs it is refused, with the way out (a snapshot of one node).

use crate::labels::extended::model_name;
use crate::snapshot::{Gpu, Mig, MigDevice, Snapshot};
use serde::Deserialize;
use std::sync::OnceLock;

/// The catalogue's text, compiled in.
const TEXT: &str = include_str!("gpus.yaml");
/// The most GPUs a template's node may have.
pub const MAX_COUNT: u32 = 64;

/// The catalogue file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    gpus: Vec<Entry>,
}

/// One SKU.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// `nvmlDeviceGetName`.
    pub name: String,
    /// The PCI device id, 4 lower-case hex digits.
    pub pci_device_id: Option<String>,
    /// The PCI class (`0x030200` a 3D controller, `0x030000` a VGA controller): `gpu.mode`.
    #[serde(default)]
    pub pci_class: Option<Seen<String>>,
    /// GFD's family name.
    pub architecture: String,
    /// CUDA compute capability.
    pub compute_capability: [i32; 2],
    /// Where the capability was seen.
    pub compute_seen: String,
    /// NVML's total memory, each figure with the condition it holds under.
    pub memory: Vec<Memory>,
    /// Whether NVML reports a MIG mode on it.
    pub mig_capable: bool,
    /// Where that was seen.
    #[serde(default)]
    pub mig_seen: Option<String>,
    /// Its GPU-instance profiles, where known.
    #[serde(default)]
    pub mig_profiles: Vec<Profile>,
    /// What is not known about it, in words.
    #[serde(default)]
    pub lacks: Vec<String>,
}

/// A figure and where it was seen.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seen<T> {
    /// The figure.
    pub value: T,
    /// Where.
    pub seen: Vec<String>,
}

/// One total-memory figure.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Memory {
    /// MiB, as NVML reports it.
    pub mib: u64,
    /// When NVML reports this one (`ecc on`), `None` always.
    pub condition: Option<String>,
    /// The figure the SKU's usual nodes report.
    pub default: bool,
    /// Where it was seen.
    pub seen: Vec<String>,
}

/// One MIG GPU-instance profile with its full compute instance.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// As GFD writes it (`1g.10gb`).
    pub profile: String,
    /// `nvidia-smi mig -lgip`'s ID.
    pub gi_profile_id: Option<u32>,
    /// `memorySizeMB`; `None` where no source gives NVML's figure.
    pub memory_mib: Option<u64>,
    /// `multiprocessorCount`.
    pub multiprocessors: u32,
    /// `gpuInstanceSliceCount`.
    pub gpu_instance_slices: u32,
    /// `computeInstanceSliceCount`.
    pub compute_instance_slices: u32,
    /// Copy engines.
    pub copy_engines: u32,
    /// Decoders.
    pub decoders: u32,
    /// Encoders.
    pub encoders: u32,
    /// JPEG decoders.
    pub jpeg_decoders: u32,
    /// Optical-flow accelerators.
    pub ofa: u32,
    /// How many fit on one GPU.
    pub max_instances: u32,
    /// Where it was seen.
    pub seen: Vec<String>,
}

/// Why `--gpu` (with `--count` and `--mig-layout`) makes no node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogueError {
    /// No entry has that name, model or PCI id.
    #[error("--gpu {query:?}: no GPU of the catalogue is called so; the closest: {}", closest.join(", "))]
    Unknown {
        /// What was asked.
        query: String,
        /// The nearest names.
        closest: Vec<String>,
    },
    /// Several SKUs share that PCI device id.
    #[error("--gpu {id}: the PCI device id of {}; name one of them", names.join(" and "))]
    Ambiguous {
        /// The id.
        id: String,
        /// Their names.
        names: Vec<String>,
    },
    /// The count is out of range.
    #[error("--count {0}: a node has 1 to {MAX_COUNT} GPUs")]
    Count(u32),
    /// The entry lacks a figure the template needs.
    #[error("--gpu {name:?}: the catalogue lacks {what}; take the snapshot of one node (`nvlabel probe > node.yaml`) and give --snapshot node.yaml")]
    Lacks {
        /// The SKU.
        name: String,
        /// What is missing.
        what: String,
    },
    /// The MIG layout cannot be had on this GPU.
    #[error("--mig-layout {layout:?}: {why}")]
    Layout {
        /// The layout as given.
        layout: String,
        /// Why not.
        why: String,
    },
}

impl crate::exit::Classify for CatalogueError {
    /// Every one is the command line's.
    fn is_bad_configuration(&self) -> bool {
        true
    }
}

/// Every entry, in the file's order.
pub fn entries() -> &'static [Entry] {
    static ENTRIES: OnceLock<Vec<Entry>> = OnceLock::new();
    ENTRIES.get_or_init(|| {
        crate::yaml::from_str::<File>(TEXT)
            .expect("the built-in catalogue parses (a unit test reads it)")
            .gpus
    })
}

/// The entry `query` names: its NVML name (any case), its `gpu.model`, its `gpu.product` as a
/// node carries it (`NVIDIA-H100-80GB-HBM3`), or its PCI device id. Names are matched by their
/// model name (vendor words, case and punctuation aside), so each of those forms finds the entry.
pub fn find(query: &str) -> Result<&'static Entry, CatalogueError> {
    let q = query.trim();
    let all = entries();
    let model = model_name(q);
    if let Some(e) = all
        .iter()
        .find(|e| e.name.eq_ignore_ascii_case(q) || (model.is_some() && model_name(&e.name) == model))
    {
        return Ok(e);
    }
    let id = q.trim_start_matches("0x").to_ascii_lowercase();
    let by_id: Vec<&Entry> = all.iter().filter(|e| e.pci_device_id.as_deref() == Some(id.as_str())).collect();
    match by_id[..] {
        [one] => Ok(one),
        [] => {
            let mut ranked: Vec<(f64, &str)> = all
                .iter()
                .map(|e| {
                    (
                        strsim::jaro_winkler(&e.name.to_ascii_lowercase(), &q.to_ascii_lowercase()),
                        e.name.as_str(),
                    )
                })
                .collect();
            ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
            let closest = ranked.iter().take(3).map(|(_, n)| format!("{n:?}")).collect();
            Err(CatalogueError::Unknown { query: q.to_string(), closest })
        }
        _ => Err(CatalogueError::Ambiguous { id, names: by_id.iter().map(|e| e.name.clone()).collect() }),
    }
}

impl Entry {
    /// The memory figure the SKU's usual nodes report.
    pub fn default_memory(&self) -> Option<&Memory> {
        self.memory.iter().find(|m| m.default)
    }

    /// Which memory figure a template used, where NVML's figure depends on the node (ECC on or
    /// off, a driver's reservation): said, so a pool of the other kind knows to take a snapshot.
    pub fn memory_note(&self) -> Option<String> {
        let used = self.default_memory().filter(|_| self.memory.len() > 1)?;
        let when = |m: &Memory| m.condition.clone().unwrap_or_else(|| "otherwise".into());
        let others: Vec<String> = self
            .memory
            .iter()
            .filter(|m| !m.default)
            .map(|m| format!("{} MiB with {}", m.mib, when(m)))
            .collect();
        Some(format!(
            "gpu.memory is {} MiB, what NVML reports on {}'s usual nodes ({}); it reports {}: for such a pool give the snapshot of one node",
            used.mib,
            self.name,
            when(used),
            others.join(", ")
        ))
    }

    /// The node of `count` such GPUs; with `layout`, each GPU has MIG on with those profiles.
    pub fn node(&self, count: u32, layout: Option<&str>) -> Result<Snapshot, CatalogueError> {
        if count == 0 || count > MAX_COUNT {
            return Err(CatalogueError::Count(count));
        }
        let lacks = |what: &str| CatalogueError::Lacks { name: self.name.clone(), what: what.to_string() };
        let memory = self.default_memory().ok_or_else(|| lacks("the total memory NVML reports"))?;
        let class = self.pci_class.as_ref().ok_or_else(|| lacks("the PCI class (gpu.mode)"))?;
        let class = u32::from_str_radix(class.value.trim_start_matches("0x"), 16)
            .map_err(|_| lacks("a PCI class that is a hex number"))?;
        let devices = match layout {
            Some(layout) => Some(self.layout(layout)?),
            None => None,
        };
        let gpu = |index: u32| Gpu {
            index,
            name: self.name.clone(),
            uuid: None,
            pci_bus_id: None,
            pci_device_id: self.pci_device_id.as_deref().and_then(|id| u16::from_str_radix(id, 16).ok()),
            pci_class: Some(class),
            memory_bytes: Some(memory.mib << 20),
            compute_capability: self.compute_capability,
            mig: self
                .mig_capable
                .then(|| Mig { enabled: devices.is_some(), devices: devices.clone().unwrap_or_default() }),
            fabric: None,
            nvlink: None,
            pcie_max_generation: None,
            pcie_max_width: None,
            numa_node: None,
        };
        // The PCI scan of a node of the pool finds no vGPU: a guest is a snapshot's to say.
        Ok(Snapshot { gpus: (0..count).map(gpu).collect(), vgpu: Some(Vec::new()), ..Snapshot::default() })
    }

    /// The MIG devices of one GPU for `layout`: comma-separated profiles, or `all-<profile>`.
    fn layout(&self, layout: &str) -> Result<Vec<MigDevice>, CatalogueError> {
        let refuse = |why: String| CatalogueError::Layout { layout: layout.to_string(), why };
        if !self.mig_capable {
            return Err(refuse(format!("{} is not MIG capable", self.name)));
        }
        if self.mig_profiles.is_empty() {
            return Err(CatalogueError::Lacks { name: self.name.clone(), what: "its MIG profiles".into() });
        }
        let profile = |name: &str| {
            self.mig_profiles.iter().find(|p| p.profile == name).ok_or_else(|| {
                let known: Vec<&str> = self.mig_profiles.iter().map(|p| p.profile.as_str()).collect();
                refuse(format!("{} has no MIG profile {name:?}; it has {}", self.name, known.join(", ")))
            })
        };
        let chosen: Vec<&Profile> = match layout.strip_prefix("all-") {
            Some(name) => {
                let p = profile(name)?;
                (0..p.max_instances).map(|_| p).collect()
            }
            None => layout.split(',').map(|n| profile(n.trim())).collect::<Result<_, _>>()?,
        };
        let slices: u32 = chosen.iter().map(|p| p.gpu_instance_slices).sum();
        let total =
            self.mig_profiles.iter().map(|p| p.gpu_instance_slices * p.max_instances).max().unwrap_or(0);
        if slices > total {
            return Err(refuse(format!("{slices} slices of a GPU that has {total}")));
        }
        for p in &chosen {
            let n = chosen.iter().filter(|q| q.profile == p.profile).count() as u32;
            if n > p.max_instances {
                return Err(refuse(format!(
                    "{n} x {}, where one GPU holds at most {}",
                    p.profile, p.max_instances
                )));
            }
        }
        chosen
            .iter()
            .enumerate()
            .map(|(index, p)| {
                let memory_mib = p.memory_mib.ok_or_else(|| CatalogueError::Lacks {
                    name: self.name.clone(),
                    what: format!("the memory NVML reports for MIG profile {}", p.profile),
                })?;
                Ok(MigDevice {
                    index: index as u32,
                    uuid: None,
                    profile: p.profile.clone(),
                    gi_id: index as u32 + 1,
                    ci_id: 0,
                    gi_profile_id: p.gi_profile_id.unwrap_or_default(),
                    ci_profile_id: 0,
                    memory_mib,
                    multiprocessors: p.multiprocessors,
                    gpu_instance_slices: p.gpu_instance_slices,
                    compute_instance_slices: p.compute_instance_slices,
                    copy_engines: p.copy_engines,
                    decoders: p.decoders,
                    encoders: p.encoders,
                    jpeg_decoders: p.jpeg_decoders,
                    ofa: p.ofa,
                })
            })
            .collect()
    }
}
