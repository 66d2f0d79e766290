use super::*;
use crate::probe::pci_ids::Source;

/// The bundled tree of a host passing two H100 PCIe through (see `testdata/make-sysfs.py`).
fn sample_tree() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/platforms/h100-vfio/sys")
}

/// A fake sysfs: plain device directories, drivers as directories the `driver` links lead to.
struct Tree(tempfile::TempDir);

impl Tree {
    fn new() -> Tree {
        let tree = Tree(tempfile::tempdir().unwrap());
        std::fs::create_dir_all(tree.devices()).unwrap();
        tree
    }

    fn root(&self) -> &Path {
        self.0.path()
    }

    fn devices(&self) -> PathBuf {
        self.root().join("bus/pci/devices")
    }

    /// An NVIDIA 3D controller (H100 PCIe) on NUMA node 0, bound to `driver` when given.
    fn gpu(&self, address: &str, driver: Option<&str>) -> PathBuf {
        self.device(address, "0x10de", "0x030200", driver)
    }

    fn device(&self, address: &str, vendor: &str, class: &str, driver: Option<&str>) -> PathBuf {
        let dir = self.devices().join(address);
        std::fs::create_dir_all(&dir).unwrap();
        for (file, value) in [("vendor", vendor), ("class", class), ("device", "0x2331"), ("numa_node", "0")]
        {
            std::fs::write(dir.join(file), format!("{value}\n")).unwrap();
        }
        if let Some(driver) = driver {
            let target = self.root().join("bus/pci/drivers").join(driver);
            std::fs::create_dir_all(&target).unwrap();
            std::os::unix::fs::symlink(format!("../../drivers/{driver}"), dir.join("driver")).unwrap();
        }
        dir
    }

    fn scan(&self) -> (Vec<Gpu>, Vec<Issue>) {
        let Found { gpus, issues } = gpus(self.root(), &PciIds::built_in()).unwrap();
        (gpus, issues)
    }
}

fn addresses(gpus: &[Gpu]) -> Vec<&str> {
    gpus.iter().map(|g| g.pci_bus_id.as_deref().unwrap()).collect()
}

#[test]
fn the_sample_tree_gives_its_two_vfio_h100s() {
    let Found { gpus, issues } = gpus(&sample_tree(), &PciIds::built_in()).unwrap();
    assert_eq!(issues, vec![]);
    let h100 = |index, address: &str, numa| Gpu {
        index,
        name: "GH100 [H100 PCIe]".into(),
        uuid: None,
        pci_bus_id: Some(address.into()),
        pci_device_id: Some(0x2331),
        pci_class: Some(0x030200),
        memory_bytes: None,
        compute_capability: [-1, -1],
        mig: None,
        fabric: None,
        nvlink: None,
        pcie_max_generation: None,
        pcie_max_width: None,
        numa_node: Some(numa),
    };
    assert_eq!(gpus, vec![h100(0, "0000:41:00.0", 0), h100(1, "0000:c1:00.0", 1)]);
}

#[test]
fn gpus_are_indexed_in_bus_address_order() {
    let tree = Tree::new();
    for address in ["0000:c1:00.0", "0001:01:00.0", "0000:02:00.0", "0000:41:00.0", "0000:0a:00.0"] {
        tree.gpu(address, Some("vfio-pci"));
    }
    let (gpus, _) = tree.scan();
    assert_eq!(
        addresses(&gpus),
        ["0000:02:00.0", "0000:0a:00.0", "0000:41:00.0", "0000:c1:00.0", "0001:01:00.0"]
    );
    assert_eq!(gpus.iter().map(|g| g.index).collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
    // go-nvlib's key: the digits as one hex number, 0 for a name that is not one.
    assert_eq!(bus_order("0000:41:00.0"), 0x41000);
    assert_eq!(bus_order("not-an-address"), 0);
}

#[test]
fn only_nvidia_gpus_that_are_not_virtual_functions_and_are_on_vfio_pci_are_kept() {
    let tree = Tree::new();
    tree.gpu("0000:01:00.0", Some("vfio-pci"));
    tree.device("0000:02:00.0", "0x10de", "0x030000", Some("vfio-pci")); // a VGA controller: kept
    tree.device("0000:03:00.0", "0x1002", "0x030200", Some("vfio-pci")); // another vendor's GPU
    tree.device("0000:04:00.0", "0x10de", "0x040300", Some("vfio-pci")); // an audio function
    tree.device("0000:05:00.0", "0x10de", "0x068000", Some("vfio-pci")); // an NVSwitch
    tree.gpu("0000:06:00.0", Some("nvidia")); // kept by the host
    tree.gpu("0000:07:00.0", None); // bound to nothing
    let vf = tree.gpu("0000:01:00.4", Some("vfio-pci"));
    std::os::unix::fs::symlink("../0000:01:00.0", vf.join("physfn")).unwrap();
    let (gpus, issues) = tree.scan();
    assert_eq!(addresses(&gpus), ["0000:01:00.0", "0000:02:00.0"]);
    assert_eq!(issues, vec![]);
}

#[test]
fn a_driver_link_that_leads_nowhere_is_no_driver() {
    let tree = Tree::new();
    let dir = tree.gpu("0000:41:00.0", None);
    std::os::unix::fs::symlink("../../drivers/vfio-pci", dir.join("driver")).unwrap();
    assert_eq!(tree.scan(), (vec![], vec![]), "the link's name is not the driver: it must resolve");
    // A link that cannot be followed at all (a loop) is a fault of that device.
    let looped = tree.gpu("0000:c1:00.0", None);
    std::os::unix::fs::symlink("driver", looped.join("driver")).unwrap();
    let (gpus, issues) = tree.scan();
    assert_eq!(gpus, vec![]);
    assert_eq!(issues.len(), 1);
    assert_eq!(issues[0].function, "sysfs driver");
    assert!(issues[0].error.starts_with(&looped.join("driver").display().to_string()), "{}", issues[0].error);
}

#[test]
fn an_unreadable_numa_node_excludes_only_that_gpu() {
    let tree = Tree::new();
    tree.gpu("0000:41:00.0", Some("vfio-pci"));
    let broken = tree.gpu("0000:81:00.0", Some("vfio-pci"));
    let garbled = tree.gpu("0000:c1:00.0", Some("vfio-pci"));
    let unset = tree.gpu("0000:e1:00.0", Some("vfio-pci"));
    std::fs::remove_file(broken.join("numa_node")).unwrap();
    std::fs::write(garbled.join("numa_node"), "zero\n").unwrap();
    std::fs::write(unset.join("numa_node"), "-1\n").unwrap();
    let (gpus, issues) = tree.scan();
    assert_eq!(addresses(&gpus), ["0000:41:00.0", "0000:e1:00.0"]);
    assert_eq!((gpus[0].numa_node, gpus[1].numa_node), (Some(0), None), "-1 is no node");
    assert_eq!((gpus[0].index, gpus[1].index), (0, 1), "indexes count kept GPUs only");
    assert_eq!(
        issues,
        vec![
            Issue {
                device: Some("0000:81:00.0".into()),
                function: "sysfs numa_node".into(),
                error: format!(
                    "{}: {}",
                    broken.join("numa_node").display(),
                    std::fs::read(broken.join("numa_node")).map_err(|e| e.to_string()).unwrap_err()
                ),
                effect: "GPU excluded from this pass".into(),
                source: Some(crate::snapshot::Source::Vfio),
            },
            Issue {
                device: Some("0000:c1:00.0".into()),
                function: "sysfs numa_node".into(),
                error: format!("{}: \"zero\" is not a 32-bit number", garbled.join("numa_node").display()),
                effect: "GPU excluded from this pass".into(),
                source: Some(crate::snapshot::Source::Vfio),
            },
        ]
    );
}

#[test]
fn an_unreadable_vendor_or_class_skips_the_device_with_an_issue() {
    let tree = Tree::new();
    let no_vendor = tree.gpu("0000:01:00.0", Some("vfio-pci"));
    std::fs::remove_file(no_vendor.join("vendor")).unwrap();
    tree.device("0000:02:00.0", "0x10de", "0x0302zz", Some("vfio-pci"));
    let wide = tree.gpu("0000:03:00.0", Some("vfio-pci"));
    std::fs::write(wide.join("device"), "0x12331\n").unwrap();
    let (gpus, issues) = tree.scan();
    assert_eq!(gpus, vec![]);
    let summary: Vec<(&str, &str, &str)> = issues
        .iter()
        .map(|i| {
            (i.device.as_deref().unwrap(), i.function.strip_prefix("sysfs ").unwrap(), i.effect.as_str())
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("0000:01:00.0", "vendor", "device skipped this pass: it may be an NVIDIA GPU"),
            ("0000:02:00.0", "class", "device skipped this pass: it may be an NVIDIA GPU"),
            ("0000:03:00.0", "device", "GPU excluded from this pass"),
        ]
    );
    assert!(
        issues[1].error.ends_with("/0000:02:00.0/class: \"0x0302zz\" is not a 32-bit number"),
        "{}",
        issues[1].error
    );
    assert!(
        issues[2].error.ends_with("/0000:03:00.0/device: \"0x12331\" is not a 16-bit number"),
        "{}",
        issues[2].error
    );
}

#[test]
fn a_device_id_pci_ids_does_not_know_is_unknown_device() {
    let tree = Tree::new();
    let dir = tree.gpu("0000:41:00.0", Some("vfio-pci"));
    std::fs::write(dir.join("device"), "0xfffe\n").unwrap();
    let (gpus, _) = tree.scan();
    assert_eq!(gpus[0].name, "UNKNOWN_DEVICE");
    assert_eq!(gpus[0].pci_device_id, Some(0xfffe));
}

#[test]
fn names_come_from_the_system_pci_ids_before_the_built_in_one() {
    let tree = Tree::new();
    tree.gpu("0000:41:00.0", Some("vfio-pci"));
    let ids_file = tree.root().join("pci.ids");
    std::fs::write(&ids_file, "10de  NVIDIA Corporation\n\t2331  GH100 [H100 PCIe, newer name]\n").unwrap();
    let ids = PciIds::first_readable(&[tree.root().join("missing.ids"), ids_file.clone()]);
    assert_eq!(ids.source(), &Source::File(ids_file));
    let Found { gpus, .. } = gpus(tree.root(), &ids).unwrap();
    assert_eq!(gpus[0].name, "GH100 [H100 PCIe, newer name]");
}

#[test]
fn a_missing_device_directory_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let e = gpus(dir.path(), &PciIds::built_in()).unwrap_err();
    let path = dir.path().join("bus/pci/devices");
    assert!(
        e.to_string().starts_with(&format!("unable to read PCI bus devices {}: ", path.display())),
        "{e}"
    );
}

#[test]
fn sysfs_numbers_parse_as_go_parses_them() {
    assert_eq!(parse_unsigned("0x10de"), Some(0x10de));
    assert_eq!(parse_unsigned("0X030200"), Some(0x030200));
    assert_eq!(parse_unsigned("12"), Some(12), "no prefix: decimal");
    assert_eq!(parse_unsigned("10de"), None);
    assert_eq!(parse_signed("-1"), Some(-1));
    assert_eq!(parse_signed("3"), Some(3));
    assert_eq!(parse_signed(""), None);
}
