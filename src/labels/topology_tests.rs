//! One test per rule of the topology labels.

use super::*;
use crate::snapshot::{ConfCompute, Fabric, GpuDirect, NvLink, NvLinkLink};

/// An H100 at bus `0x10 + i`, with the given NVLink, PCIe Gen5 x16, on NUMA node `i / 4`.
fn gpu(i: u32, nvlink: Option<NvLink>) -> Gpu {
    Gpu {
        index: i,
        name: "NVIDIA H100 80GB HBM3".into(),
        uuid: None,
        pci_bus_id: Some(bus(i)),
        pci_device_id: None,
        pci_class: Some(0x030200),
        memory_bytes: Some(80 << 30),
        compute_capability: [9, 0],
        mig: None,
        fabric: None,
        nvlink,
        pcie_max_generation: Some(5),
        pcie_max_width: Some(16),
        numa_node: Some(i / 4),
    }
}

fn bus(i: u32) -> String {
    format!("00000000:{:02X}:00.0", 0x10 + i)
}

fn switch(n: usize) -> Vec<NvLinkLink> {
    vec![NvLinkLink { active: true, remote: NvLinkRemote::Switch, remote_pci_bus_id: None }; n]
}

/// An active direct link to the GPU at `peer`, addressed as sysfs writes it (4-digit domain).
fn to_gpu(peer: u32) -> NvLinkLink {
    let address = format!("0000:{:02x}:00.0", 0x10 + peer);
    NvLinkLink { active: true, remote: NvLinkRemote::Gpu, remote_pci_bus_id: Some(address) }
}

fn nvlink(version: u32, links: Vec<NvLinkLink>) -> Option<NvLink> {
    Some(NvLink { version: Some(version), links: Some(links) })
}

fn node(gpus: Vec<Gpu>) -> Snapshot {
    Snapshot { gpus, ..Snapshot::default() }
}

fn get<'a>(l: &'a Labels, k: &str) -> Option<&'a str> {
    l.get(&format!("nvidia.com/{k}")).map(String::as_str)
}

#[test]
fn nvswitch_node() {
    let l = labels(&node((0..8).map(|i| gpu(i, nvlink(6, switch(18)))).collect()));
    assert_eq!(get(&l, "gpu.nvlink.version"), Some("4.0"));
    assert_eq!(get(&l, "gpu.nvlink.links"), Some("18"));
    assert_eq!(get(&l, "gpu.nvlink.nvswitch"), Some("true"));
    assert_eq!(get(&l, "gpu.p2p"), Some("nvlink"));
    assert_eq!(get(&l, "gpu.pcie.generation"), Some("5"));
    assert_eq!(get(&l, "gpu.pcie.width"), Some("16"));
    assert_eq!(get(&l, "gpu.numa-nodes"), Some("2"));
}

#[test]
fn direct_links_between_every_pair_are_nvlink_p2p() {
    // Four GPUs, each linked to every other (links to 1 from 0 seen from either side suffice).
    let gpus = (0..4).map(|i| gpu(i, nvlink(4, (0..4).filter(|&p| p > i).map(to_gpu).collect())));
    let mut gpus: Vec<Gpu> = gpus.collect();
    gpus[3].nvlink = nvlink(4, vec![to_gpu(0)]);
    let l = labels(&node(gpus));
    assert_eq!(get(&l, "gpu.p2p"), Some("nvlink"));
    assert_eq!(get(&l, "gpu.nvlink.nvswitch"), Some("false"));
    assert_eq!(get(&l, "gpu.nvlink.links"), Some("1"), "the minimum over the GPUs");
}

#[test]
fn hybrid_mesh_and_bridged_pairs_are_pcie() {
    // Bridged in pairs: 0-1 and 2-3.
    let pairs = [to_gpu(1), to_gpu(0), to_gpu(3), to_gpu(2)];
    let l = labels(&node((0..4).map(|i| gpu(i, nvlink(4, vec![pairs[i as usize].clone(); 4]))).collect()));
    assert_eq!(get(&l, "gpu.p2p"), Some("pcie"));
    assert_eq!(get(&l, "gpu.nvlink.links"), Some("4"));
}

#[test]
fn inactive_links_do_not_count() {
    let mut links = switch(12);
    for l in &mut links[8..] {
        l.active = false;
    }
    let mut gpus: Vec<Gpu> = (0..2).map(|i| gpu(i, nvlink(4, switch(12)))).collect();
    gpus[1].nvlink = nvlink(4, links);
    assert_eq!(get(&labels(&node(gpus.clone())), "gpu.nvlink.links"), Some("8"));
    // With every link of one GPU down it reaches the other over PCIe only.
    for l in gpus[1].nvlink.as_mut().unwrap().links.as_mut().unwrap() {
        l.active = false;
    }
    let l = labels(&node(gpus));
    assert_eq!(get(&l, "gpu.p2p"), Some("pcie"));
    assert_eq!(get(&l, "gpu.nvlink.links"), Some("0"));
    assert_eq!(get(&l, "gpu.nvlink.nvswitch"), Some("false"));
}

#[test]
fn a_peer_not_on_the_node_does_not_count() {
    let stranger = NvLinkLink { remote_pci_bus_id: Some("0000:99:00.0".into()), ..to_gpu(0) };
    let gpus = vec![
        gpu(0, nvlink(4, vec![to_gpu(1), stranger.clone()])),
        gpu(1, nvlink(4, vec![to_gpu(0), stranger])),
    ];
    let l = labels(&node(gpus));
    assert_eq!(get(&l, "gpu.nvlink.links"), Some("1"));
    assert_eq!(get(&l, "gpu.p2p"), Some("nvlink"));
}

#[test]
fn one_gpu_has_no_p2p() {
    let l = labels(&node(vec![gpu(0, nvlink(6, switch(18)))]));
    assert_eq!(get(&l, "gpu.p2p"), None);
    assert_eq!(get(&l, "gpu.nvlink.links"), Some("18"));
}

#[test]
fn pcie_only_gpus_have_p2p_pcie_and_no_nvlink_labels() {
    let l =
        labels(&node((0..4).map(|i| gpu(i, Some(NvLink { version: None, links: Some(vec![]) }))).collect()));
    assert_eq!(get(&l, "gpu.p2p"), Some("pcie"));
    for k in ["gpu.nvlink.version", "gpu.nvlink.links", "gpu.nvlink.nvswitch"] {
        assert_eq!(get(&l, k), None, "{k}");
    }
}

#[test]
fn mixed_models_describe_the_primary_model_only() {
    // Four H100s on switches, two L4s on PCIe: the H100s are the primary model.
    let mut gpus: Vec<Gpu> = (0..4).map(|i| gpu(i, nvlink(6, switch(18)))).collect();
    for i in 4..6 {
        gpus.push(Gpu {
            name: "NVIDIA L4".into(),
            pcie_max_generation: Some(4),
            ..gpu(i, Some(NvLink { version: None, links: Some(vec![]) }))
        });
    }
    let l = labels(&node(gpus));
    assert_eq!(get(&l, "gpu.p2p"), Some("nvlink"));
    assert_eq!(get(&l, "gpu.pcie.generation"), Some("5"));
    assert_eq!(get(&l, "gpu.numa-nodes"), Some("1"));
}

#[test]
fn one_unknown_gpu_leaves_the_labels_it_feeds_out() {
    let mut gpus: Vec<Gpu> = (0..4).map(|i| gpu(i, nvlink(6, switch(18)))).collect();
    gpus[2].nvlink = None;
    gpus[1].pcie_max_width = None;
    gpus[3].numa_node = None;
    let l = labels(&node(gpus));
    for k in ["gpu.nvlink.links", "gpu.nvlink.nvswitch", "gpu.p2p", "gpu.pcie.width", "gpu.numa-nodes"] {
        assert_eq!(get(&l, k), None, "{k}");
    }
    assert_eq!(get(&l, "gpu.pcie.generation"), Some("5"), "the other facts stay");
    assert_eq!(get(&l, "gpu.nvlink.version"), None, "nothing known about GPU 2's NVLink");
    // Links that could not be read lose the labels they feed, not the version.
    let mut gpus: Vec<Gpu> = (0..4).map(|i| gpu(i, nvlink(6, switch(18)))).collect();
    gpus[2].nvlink.as_mut().unwrap().links = None;
    let l = labels(&node(gpus));
    assert_eq!(get(&l, "gpu.nvlink.version"), Some("4.0"));
    for k in ["gpu.nvlink.links", "gpu.nvlink.nvswitch", "gpu.p2p"] {
        assert_eq!(get(&l, k), None, "{k}");
    }
    // A link whose far end is unknown cannot make the node pcie.
    let mut gpus: Vec<Gpu> = (0..2).map(|i| gpu(i, nvlink(4, vec![]))).collect();
    gpus[0].nvlink = nvlink(4, vec![NvLinkLink { remote_pci_bus_id: None, ..to_gpu(1) }]);
    gpus[1].nvlink = nvlink(4, vec![NvLinkLink { active: false, ..to_gpu(0) }]);
    assert_eq!(get(&labels(&node(gpus)), "gpu.p2p"), None);
}

#[test]
fn the_version_is_the_lowest_and_unknown_codes_are_dropped() {
    let gpus = vec![gpu(0, nvlink(6, switch(2))), gpu(1, nvlink(4, switch(2)))];
    assert_eq!(get(&labels(&node(gpus)), "gpu.nvlink.version"), Some("3.0"));
    for code in [0, 8] {
        assert_eq!(get(&labels(&node(vec![gpu(0, nvlink(code, switch(2)))])), "gpu.nvlink.version"), None);
    }
}

#[test]
fn fabric_state_is_the_least_advanced() {
    let fabric = |state| Some(Fabric { cluster_uuid: "x".into(), clique_id: 1, state, status: 0 });
    let with = |states: &[u8]| {
        let gpus = states.iter().enumerate().map(|(i, s)| Gpu { fabric: fabric(*s), ..gpu(i as u32, None) });
        get(&labels(&node(gpus.collect())), "gpu.fabric.state").map(String::from)
    };
    assert_eq!(with(&[3, 3]).as_deref(), Some("completed"));
    assert_eq!(with(&[3, 2]).as_deref(), Some("in-progress"));
    assert_eq!(with(&[1, 3]).as_deref(), Some("not-started"));
    assert_eq!(with(&[3, 0]), None, "a GPU without fabric support");
}

#[test]
fn node_facts() {
    let mut s = node(vec![gpu(0, None)]);
    s.gpudirect = Some(GpuDirect { rdma: Some(true), storage: Some(false), gdrcopy: None });
    s.confidential_compute = Some(ConfCompute { cpu_caps: 3, gpus_capable: true });
    let l = labels(&s);
    assert_eq!(get(&l, "gpudirect.rdma"), Some("true"));
    assert_eq!(get(&l, "gpudirect.storage"), Some("false"));
    assert_eq!(get(&l, "gpudirect.gdrcopy"), None);
    assert_eq!(get(&l, "cc.capable"), Some("true"));
    for (cpu_caps, gpus_capable) in [(0, true), (3, false)] {
        s.confidential_compute = Some(ConfCompute { cpu_caps, gpus_capable });
        assert_eq!(get(&labels(&s), "cc.capable"), Some("false"));
    }
    s.gpus.clear();
    assert!(labels(&s).is_empty(), "no GPU, no labels");
}

#[test]
fn mig_strategy_and_sharing_do_not_change_them() {
    use crate::labels::{LabelConfig, MigStrategy};
    use crate::sharing::Sharing;
    use crate::snapshot::Mig;
    let mut gpus: Vec<Gpu> = (0..4).map(|i| gpu(i, nvlink(6, switch(18)))).collect();
    gpus[0].mig = Some(Mig { enabled: true, devices: vec![] });
    gpus[1].mig = Some(Mig { enabled: false, devices: vec![] });
    let mut s = node(gpus);
    s.gpudirect = Some(GpuDirect { rdma: Some(true), storage: Some(true), gdrcopy: Some(false) });
    let want = labels(&s);
    assert_eq!(want.len(), 10, "{want:?}");
    for mig_strategy in [MigStrategy::None, MigStrategy::Single, MigStrategy::Mixed] {
        for sharing in [
            Sharing::default(),
            Sharing::time_slicing(&[("nvidia.com/gpu", 4)]),
            Sharing::mps(&[("nvidia.com/gpu", 10)]),
        ] {
            let config = LabelConfig {
                mig_strategy,
                sharing,
                timestamp: None,
                extended: true,
                profile: Default::default(),
            };
            let out = crate::labels::compute(&s, &config).labels;
            let got: Labels = want.keys().filter_map(|k| Some((k.clone(), out.get(k)?.clone()))).collect();
            assert_eq!(got, want, "{mig_strategy:?}");
            let plain = crate::labels::compute(&s, &LabelConfig { extended: false, ..config }).labels;
            assert!(want.keys().all(|k| !plain.contains_key(k)), "only with --extended-labels");
        }
    }
}

#[test]
fn links_with_an_unknown_far_end_give_no_count() {
    // GPU 0's links to GPU 1 have no address; GPU 1's links to GPU 0 do, and prove the pair.
    let unnamed = NvLinkLink { remote_pci_bus_id: None, ..to_gpu(1) };
    let gpus = vec![gpu(0, nvlink(4, vec![unnamed; 12])), gpu(1, nvlink(4, vec![to_gpu(0); 12]))];
    let l = labels(&node(gpus));
    assert_eq!(get(&l, "gpu.p2p"), Some("nvlink"));
    assert_eq!(get(&l, "gpu.nvlink.links"), None, "not 0");
    assert_eq!(get(&l, "gpu.nvlink.nvswitch"), None);
    let unknown_type = NvLinkLink { active: true, remote: NvLinkRemote::Unknown, remote_pci_bus_id: None };
    let gpus = vec![gpu(0, nvlink(6, switch(18))), gpu(1, nvlink(6, vec![unknown_type; 18]))];
    let l = labels(&node(gpus));
    for k in ["gpu.nvlink.links", "gpu.nvlink.nvswitch", "gpu.p2p"] {
        assert_eq!(get(&l, k), None, "{k}");
    }
}

#[test]
fn one_gpu_without_nvlink_among_nvlink_gpus_gives_no_p2p() {
    let mut gpus: Vec<Gpu> = (0..4).map(|i| gpu(i, nvlink(6, switch(18)))).collect();
    gpus[1].nvlink = Some(NvLink { version: None, links: Some(vec![]) });
    let l = labels(&node(gpus));
    for k in ["gpu.p2p", "gpu.nvlink.links", "gpu.nvlink.version", "gpu.nvlink.nvswitch"] {
        assert_eq!(get(&l, k), None, "{k}");
    }
}
