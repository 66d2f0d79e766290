//! The extended resources a node of the pool will advertise, as the device plugin gives them:
//! one per resource its MIG strategy makes (`nvidia.com/gpu`, or `nvidia.com/mig-<profile>` under
//! mixed), each device counted once per replica the sharing config gives it, under the name the
//! config renames it to (`renameByDefault`: `nvidia.com/gpu.shared`).

use crate::labels::{self, LabelConfig, Labels};
use crate::snapshot::Snapshot;
use std::collections::BTreeMap;

/// Each extended resource and how many a node advertises, sorted by name.
pub type Capacity = BTreeMap<String, u64>;

/// The capacity of a node like `snapshot` labelled `labels` under `config`: the device counts
/// are the device plugin's, the replicas those the labels say (so MPS on MIG, which the labels
/// refuse to share, is not shared here either).
pub fn of(snapshot: &Snapshot, config: &LabelConfig, labels: &Labels) -> Capacity {
    let mut out = Capacity::new();
    for (resource, devices) in labels::advertised(&snapshot.gpus, config.mig_strategy) {
        let replicas = labels
            .get(&format!("{resource}.replicas"))
            .and_then(|r| r.parse::<u64>().ok())
            .unwrap_or(1)
            .max(1);
        let name = config
            .sharing
            .entry(&resource)
            .filter(|_| replicas > 1)
            .and_then(|e| e.rename.clone())
            .filter(|r| !r.is_empty())
            .unwrap_or(resource);
        *out.entry(name).or_default() += devices as u64 * replicas;
    }
    out.retain(|_, n| *n > 0);
    out
}
