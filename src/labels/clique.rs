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
                warnings.push(format!("Cluster UUIDs are non-unique: {}", u.join(", ")));
            } else {
                warnings.push(format!(
                    "Clique IDs are non-unique: {}",
                    c.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
                ));
            }
            Labels::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::test_support::full;
    use crate::snapshot::Fabric;

    fn fabric(uuid: &str, clique: u32) -> Option<Fabric> {
        Some(Fabric { cluster_uuid: uuid.into(), clique_id: clique, state: 3, status: 0 })
    }

    #[test]
    fn one_cluster_and_one_clique_or_nothing() {
        const U1: &str = "7b968a6d-c8aa-45e1-9e07-e1e51be99c31";
        const U2: &str = "11111111-c8aa-45e1-9e07-e1e51be99c31";
        let with = |fabrics: Vec<Option<Fabric>>| {
            let gpus: Vec<Gpu> = fabrics.into_iter().map(|fabric| Gpu { fabric, ..full() }).collect();
            let mut w = Vec::new();
            (labels(&gpus, &mut w).get("nvidia.com/gpu.clique").cloned(), w)
        };
        assert_eq!(with(vec![fabric(U1, 1), fabric(U1, 1)]).0.unwrap(), format!("{U1}.1"));
        assert_eq!(with(vec![None, fabric(U1, 7)]).0.unwrap(), format!("{U1}.7"));
        let (label, w) = with(vec![fabric(U1, 1), fabric(U2, 1)]);
        assert_eq!(label, None);
        assert!(w[0].starts_with("Cluster UUIDs are non-unique"), "{w:?}");
        let (label, w) = with(vec![fabric(U1, 1), fabric(U1, 2)]);
        assert_eq!(label, None);
        assert!(w[0].starts_with("Clique IDs are non-unique"), "{w:?}");
        let in_progress = Some(Fabric { state: 2, ..fabric(U1, 1).unwrap() });
        assert_eq!(with(vec![in_progress]).0, None);
        let failed = Some(Fabric { status: 999, ..fabric(U1, 1).unwrap() });
        assert_eq!(with(vec![failed]).0, None);
        assert_eq!(with(vec![fabric("00000000-0000-0000-0000-000000000000", 1)]).0, None);
        assert_eq!(with(vec![None]).0, None);
    }
}
