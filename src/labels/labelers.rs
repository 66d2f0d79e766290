//! The labelers in GFD's order: the one list both profiles walk (a later labeler overwrites an
//! earlier one's key), each saying once which profile it runs in and what it needs. A new label
//! is its file and its place in [`ORDER`] (the compiler then asks for its arms here).

use super::{clique, dra, extended, machine, mig_capable, mig_strategy, mode, mps, resource};
use super::{timestamp, topology, version, vgpu, LabelConfig, Labels, Profile};
use crate::sharing::Sharing;
use crate::snapshot::Snapshot;

/// One labeler, by its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Labeler {
    /// `gfd.timestamp`.
    Timestamp,
    /// `gpu.machine`.
    Machine,
    /// The driver and CUDA versions.
    Version,
    /// `mig.capable`.
    MigCapable,
    /// `mps.capable` (the device-plugin profile).
    Mps,
    /// The full-GPU resource labels; in the DRA profile without sharing.
    Resource,
    /// `mig.strategy` and the MIG devices' (the device-plugin profile), then what of the sharing
    /// config matches nothing.
    MigStrategy,
    /// The compute and display modes.
    Mode,
    /// The NVLink clique.
    Clique,
    /// nvlabel's own labels (`--extended-labels`).
    Extended,
    /// The topology labels (`--extended-labels`).
    Topology,
    /// `gpu.present` (the DRA profile).
    Present,
    /// `vgpu.*`, with or without GPUs.
    Vgpu,
}

/// Every labeler in GFD's order: the one list.
pub const ORDER: [Labeler; 13] = [
    Labeler::Timestamp,
    Labeler::Machine,
    Labeler::Version,
    Labeler::MigCapable,
    Labeler::Mps,
    Labeler::Resource,
    Labeler::MigStrategy,
    Labeler::Mode,
    Labeler::Clique,
    Labeler::Extended,
    Labeler::Topology,
    Labeler::Present,
    Labeler::Vgpu,
];

/// What the labelers read: the snapshot, the configuration, and the sharing the labels may
/// promise (none where MPS meets MIG, or in the DRA profile).
pub struct Input<'a> {
    /// The snapshot.
    pub snapshot: &'a Snapshot,
    /// The configuration.
    pub config: &'a LabelConfig,
    /// The sharing the resource labels describe.
    pub sharing: &'a Sharing,
}

impl Labeler {
    /// Whether it runs for `input`: GFD builds no device labels on a node without GPUs; some
    /// belong to one profile, some to `--extended-labels`.
    pub fn runs(self, input: &Input) -> bool {
        let gpus = !input.snapshot.gpus.is_empty();
        let dra = input.config.profile == Profile::Dra;
        match self {
            Labeler::Timestamp | Labeler::Vgpu => true,
            Labeler::Machine | Labeler::Version | Labeler::MigCapable => gpus,
            Labeler::Resource | Labeler::Mode | Labeler::Clique => gpus,
            Labeler::Mps | Labeler::MigStrategy => gpus && !dra,
            Labeler::Extended | Labeler::Topology => gpus && input.config.extended,
            Labeler::Present => gpus && dra,
        }
    }

    /// Its labels, its warnings into `w`.
    pub fn labels(self, input: &Input, w: &mut Vec<String>) -> Labels {
        let (snapshot, config) = (input.snapshot, input.config);
        let gpus = &snapshot.gpus;
        match self {
            Labeler::Timestamp => timestamp::labels(config.timestamp),
            Labeler::Machine => machine::labels(&snapshot.machine_type, w),
            Labeler::Version => version::labels(snapshot, w),
            Labeler::MigCapable => mig_capable::labels(gpus),
            Labeler::Mps => mps::labels(gpus, &config.sharing, w),
            Labeler::Resource if config.profile == Profile::Dra => dra::physical(gpus, w),
            Labeler::Resource => resource::full_gpu_labels(gpus, input.sharing, w),
            Labeler::MigStrategy => {
                let labels = mig_strategy::labels(gpus, config.mig_strategy, input.sharing, w);
                w.extend(config.sharing.matching_nothing(&super::resources(gpus, config.mig_strategy)));
                labels
            }
            Labeler::Mode => mode::labels(gpus, w),
            Labeler::Clique => clique::labels(gpus, w),
            Labeler::Extended => extended::labels(gpus, w),
            Labeler::Topology => topology::labels(snapshot),
            Labeler::Present => dra::present(),
            Labeler::Vgpu => vgpu::labels(snapshot.vgpu.as_deref(), w),
        }
    }
}
