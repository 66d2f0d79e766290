//! vfio GPUs named through the whole probe (session, vfio source, pci.ids search) from the
//! system's pci.ids where it names them, and from the built-in copy where it does not or where
//! the system has none: the system search pointed at this test's own files.

use nvlabel::probe::{self, ProbeOptions, Session, Strategy};
use std::path::PathBuf;

/// The bundled vfio host (three H100 PCIe, 10de:2331, bound to vfio-pci), its pci.ids search
/// pointed at `search`.
fn vfio_host(search: Vec<PathBuf>) -> ProbeOptions {
    ProbeOptions {
        strategy: Strategy::Vfio,
        sysfs_root: concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/platforms/h100-vfio/sys").into(),
        pci_ids_search: search,
        ..ProbeOptions::default()
    }
}

fn names(opts: &ProbeOptions) -> Vec<String> {
    let snapshot = probe::probe(&Session::new(), opts).expect("the vfio host probes");
    snapshot.gpus.iter().map(|g| g.name.clone()).collect()
}

#[test]
fn the_systems_copy_names_the_gpus_it_knows() {
    let dir = tempfile::tempdir().unwrap();
    let system = dir.path().join("pci.ids");
    std::fs::write(&system, "10de  NVIDIA Corporation\n\t2331  GH100 [H100 PCIe, system copy]\n").unwrap();
    let opts = vfio_host(vec![dir.path().join("missing.ids"), system]);
    assert!(names(&opts).contains(&"GH100 [H100 PCIe, system copy]".to_string()), "{:?}", names(&opts));
}

#[test]
fn the_built_in_copy_names_what_the_systems_copy_lacks_or_where_there_is_none() {
    let dir = tempfile::tempdir().unwrap();
    let system = dir.path().join("pci.ids");
    std::fs::write(&system, "10de  NVIDIA Corporation\n\t20b0  GA100 [A100 SXM4 40GB]\n").unwrap();
    for search in [vec![system], vec![dir.path().join("missing.ids")]] {
        let got = names(&vfio_host(search.clone()));
        assert!(got.contains(&"GH100 [H100 PCIe]".to_string()), "{search:?}: {got:?}");
        assert!(!got.iter().any(|n| n == "UNKNOWN_DEVICE"), "{search:?}: {got:?}");
    }
}
