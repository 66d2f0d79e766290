//! `nvidia.com/gpu.clique`: `<cluster UUID>.<clique id>` of fabric-attached (IMEX) GPUs.

use super::{key, Labels};
use crate::snapshot::Gpu;

/// `NVML_GPU_FABRIC_STATE_COMPLETED`.
const STATE_COMPLETED: u8 = 3;
const ZERO_UUID: &str = "00000000-0000-0000-0000-000000000000";

/// The clique label: only when every attached GPU agrees on one cluster and one clique.
pub fn labels(gpus: &[Gpu], warnings: &mut Vec<String>) -> Labels {
    let attached = gpus
        .iter()
        .filter_map(|g| g.fabric.as_ref())
        .filter(|f| f.state == STATE_COMPLETED && f.status == 0 && f.cluster_uuid != ZERO_UUID);
    let mut uuids: Vec<&str> = Vec::new();
    let mut cliques: Vec<u32> = Vec::new();
    for f in attached {
        if !uuids.contains(&f.cluster_uuid.as_str()) {
            uuids.push(&f.cluster_uuid);
        }
        if !cliques.contains(&f.clique_id) {
            cliques.push(f.clique_id);
        }
    }
    match (uuids.as_slice(), cliques.as_slice()) {
        ([uuid], [clique]) => Labels::from([(key("gpu.clique"), format!("{uuid}.{clique}"))]),
        ([], _) => Labels::new(),
        (u, c) => {
            if u.len() > 1 {
                warnings.push(format!("Cluster UUIDs are non-unique: {u:?}"));
            } else {
                warnings.push(format!("Clique IDs are non-unique: {c:?}"));
            }
            Labels::new()
        }
    }
}
