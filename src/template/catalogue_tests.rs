use super::catalogue::{self, CatalogueError};
use super::*;
use crate::labels::extended::model_name;
use crate::labels::MigStrategy;
use crate::sharing::Sharing;
use std::path::Path;

fn golden(machine: &str) -> Snapshot {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("testdata/golden/{machine}.snapshot.yaml"));
    Snapshot::load(&path).unwrap()
}

fn plain() -> LabelConfig {
    LabelConfig {
        mig_strategy: MigStrategy::None,
        sharing: Sharing::default(),
        timestamp: None,
        extended: false,
        profile: Profile::DevicePlugin,
    }
}

/// A bundled machine built for a fault, not for its SKU: its H100s answer no MIG mode, which a
/// real H100 does.
const NOT_A_SKU: &[&str] = &["nvswitch-faulty"];

/// Every bundled machine whose GPUs are of one model, none with MIG on.
fn homogeneous_without_mig() -> Vec<(String, Snapshot)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/golden");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let Some(machine) = name.strip_suffix(".snapshot.yaml") else { continue };
        if NOT_A_SKU.contains(&machine) {
            continue;
        }
        let s = golden(machine);
        let one_model = s.gpus.windows(2).all(|w| w[0].name == w[1].name);
        let mig_on = s.gpus.iter().any(|g| g.mig.as_ref().is_some_and(|m| m.enabled));
        if !s.gpus.is_empty() && one_model && !mig_on {
            out.push((machine.to_string(), s));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn the_catalogue_parses_and_every_figure_says_where_it_was_seen() {
    for e in catalogue::entries() {
        assert!(!e.compute_seen.is_empty(), "{}", e.name);
        assert!(
            e.memory.iter().filter(|m| m.default).count() == usize::from(!e.memory.is_empty()),
            "{}: one default",
            e.name
        );
        assert!(e.memory.iter().all(|m| !m.seen.is_empty()), "{}", e.name);
        assert!(e.mig_profiles.iter().all(|p| !p.seen.is_empty()), "{}", e.name);
        assert_eq!(
            crate::labels::family(e.compute_capability[0], e.compute_capability[1]),
            e.architecture,
            "{}",
            e.name
        );
        assert!(
            e.memory.is_empty() == e.lacks.iter().any(|l| l == "NVML memory total"),
            "{}: says what it lacks",
            e.name
        );
        assert!(
            e.pci_class.is_none() == e.lacks.iter().any(|l| l == "PCI class"),
            "{}: says whether it lacks its PCI class",
            e.name
        );
        assert!(
            (e.mig_capable && e.mig_profiles.is_empty()) == e.lacks.iter().any(|l| l == "MIG profiles"),
            "{}: says whether it lacks its MIG profiles",
            e.name
        );
    }
}

#[test]
fn a_gpu_is_found_by_its_nvml_name_its_model_or_its_pci_id() {
    for q in ["Tesla T4", "tesla t4", "t4", "Tesla-T4", "1eb8", "0x1EB8"] {
        assert_eq!(catalogue::find(q).unwrap().name, "Tesla T4", "{q}");
    }
    // The gpu.product a node of it carries, and its model with the vendor word.
    for q in ["NVIDIA-H100-80GB-HBM3", "h100-80gb-hbm3", "H100 80GB HBM3"] {
        assert_eq!(catalogue::find(q).unwrap().name, "NVIDIA H100 80GB HBM3", "{q}");
    }
    assert_eq!(catalogue::find("tesla-v100-sxm2-16gb").unwrap().name, "Tesla V100-SXM2-16GB");
    // Each entry's model name is its own: a name finds one entry only.
    let mut models: Vec<String> = catalogue::entries().iter().filter_map(|e| model_name(&e.name)).collect();
    let all = models.len();
    models.sort();
    models.dedup();
    assert_eq!(models.len(), all, "two entries share a model name");
    match catalogue::find("25b6") {
        Err(CatalogueError::Ambiguous { names, .. }) => assert!(names.len() >= 2, "{names:?}"),
        other => panic!("25b6 is the A2's and the A16's: {other:?}"),
    }
    match catalogue::find("Tesla T5") {
        Err(CatalogueError::Unknown { closest, .. }) => assert_eq!(closest[0], "\"Tesla T4\""),
        other => panic!("{other:?}"),
    }
}

#[test]
fn counts_outside_one_to_sixty_four_are_refused() {
    let t4 = catalogue::find("t4").unwrap();
    assert_eq!(t4.node(0, None).unwrap_err(), CatalogueError::Count(0));
    assert_eq!(t4.node(65, None).unwrap_err(), CatalogueError::Count(65));
    assert_eq!(t4.node(64, None).unwrap().gpus.len(), 64);
}

#[test]
fn an_entry_without_a_figure_refuses_the_template_that_needs_it() {
    let t4 = catalogue::find("t4").unwrap();
    let no_memory = catalogue::Entry { memory: Vec::new(), ..t4.clone() };
    let no_class = catalogue::Entry { pci_class: None, ..t4.clone() };
    let h200 = catalogue::find("NVIDIA H200").unwrap();
    for (e, what) in [
        (no_memory.node(1, None), "the total memory NVML reports"),
        (no_class.node(1, None), "the PCI class (gpu.mode)"),
        (h200.node(1, Some("all-1g.18gb")), "the memory NVML reports for MIG profile 1g.18gb"),
    ] {
        let e = e.unwrap_err();
        match &e {
            CatalogueError::Lacks { what: got, .. } => assert_eq!(got, what),
            other => panic!("{other:?}"),
        }
        assert!(e.to_string().contains("--snapshot"), "names the way out: {e}");
    }
    // Each entry lacking a figure is refused so, where its lacks say.
    for entry in catalogue::entries().iter().filter(|e| e.lacks.iter().any(|l| l == "PCI class")) {
        assert!(matches!(entry.node(1, None), Err(CatalogueError::Lacks { .. })), "{}", entry.name);
    }
}

#[test]
fn mig_layouts_the_gpu_cannot_have_are_refused() {
    let a100 = catalogue::find("NVIDIA A100-SXM4-40GB").unwrap();
    assert_eq!(a100.node(1, Some("all-1g.5gb")).unwrap().gpus[0].mig.as_ref().unwrap().devices.len(), 7);
    for bad in ["1g.5gb,1g.5gb,1g.5gb,1g.5gb,1g.5gb,1g.5gb,1g.5gb,1g.5gb", "9g.99gb"] {
        assert!(matches!(a100.node(1, Some(bad)), Err(CatalogueError::Layout { .. })), "{bad}");
    }
    // More slices than the GPU has, each profile within its own count; and a profile past its
    // count, within the slices.
    for (bad, why) in [
        ("3g.20gb,3g.20gb,1g.5gb,1g.5gb", "8 slices of a GPU that has 7"),
        ("1g.5gb.me,1g.5gb.me", "2 x 1g.5gb.me, where one GPU holds at most 1"),
    ] {
        match a100.node(1, Some(bad)) {
            Err(CatalogueError::Layout { why: got, .. }) => assert_eq!(got, why, "{bad}"),
            other => panic!("{bad}: {other:?}"),
        }
    }
    let t4 = catalogue::find("t4").unwrap();
    assert!(matches!(t4.node(1, Some("all-1g.5gb")), Err(CatalogueError::Layout { .. })));
}

/// The catalogue's template of every homogeneous bundled machine without MIG is the template of
/// its snapshot: the same labels, byte for byte, where the pool pins the snapshot's driver and
/// machine type.
#[test]
fn the_catalogue_gives_what_a_pass_on_each_bundled_machine_gives() {
    let machines = homogeneous_without_mig();
    assert!(machines.len() >= 10, "{:?}", machines.iter().map(|m| &m.0).collect::<Vec<_>>());
    for (machine, s) in machines {
        let entry = catalogue::find(&s.gpus[0].name).unwrap_or_else(|e| panic!("{machine}: {e}"));
        let pins = Pins {
            driver_version: s.driver_version.clone(),
            cuda_version: s.cuda_driver_version,
            machine_type: s.machine_type.content.clone(),
        };
        let node =
            pins.apply(entry.node(s.gpus.len() as u32, None).unwrap_or_else(|e| panic!("{machine}: {e}")));
        let from_catalogue = of_snapshot(&node, &plain());
        let from_node = of_snapshot(&s, &plain());
        assert_eq!(from_catalogue.labels, from_node.labels, "{machine}");
        assert_eq!(from_catalogue.capacity, from_node.capacity, "{machine}");
    }
}

#[test]
fn versions_that_are_no_versions_are_refused() {
    assert_eq!(Pins::parse(Some("550.54.15"), Some("12.4"), None).unwrap().cuda_version, Some(12040));
    for (d, c) in [
        (Some("550"), None),
        (Some("latest"), None),
        (Some("550.54.x"), None),
        (None, Some("12")),
        (None, Some("12.x")),
        (None, Some("v12.4")),
    ] {
        assert!(Pins::parse(d, c, None).is_err(), "{d:?} {c:?}");
    }
}

#[test]
fn a_catalogue_pool_without_pins_leaves_the_driver_and_machine_labels_out() {
    let node = catalogue::find("t4").unwrap().node(2, None).unwrap();
    let t = of_snapshot(&node, &plain());
    let keys: Vec<&str> = t.left_out.iter().map(|l| l.key.as_str()).collect();
    assert_eq!(keys, ["nvidia.com/cuda.driver*", "nvidia.com/cuda.runtime*", "nvidia.com/gpu.machine"]);
    assert!(!t.labels.contains_key("nvidia.com/gpu.machine"));
    assert_eq!(t.labels["nvidia.com/gpu.count"], "2");
}

/// A MIG pool from the catalogue: eight A100-SXM4-40GB, each 7 x 1g.5gb, is the bundled machine
/// with that layout under the single strategy.
#[test]
fn a_catalogue_mig_layout_gives_what_the_bundled_mig_machine_gives() {
    let s = golden("a100-mig-single");
    let pins = Pins {
        driver_version: s.driver_version.clone(),
        cuda_version: s.cuda_driver_version,
        machine_type: s.machine_type.content.clone(),
    };
    let entry = catalogue::find("NVIDIA A100-SXM4-40GB").unwrap();
    let node = pins.apply(entry.node(s.gpus.len() as u32, Some("all-1g.5gb")).unwrap());
    for strategy in [MigStrategy::Single, MigStrategy::Mixed] {
        let c = LabelConfig { mig_strategy: strategy, ..plain() };
        assert_eq!(of_snapshot(&node, &c).labels, of_snapshot(&s, &c).labels, "{strategy:?}");
        assert_eq!(of_snapshot(&node, &c).capacity, of_snapshot(&s, &c).capacity, "{strategy:?}");
    }
}

#[test]
fn a_template_says_which_memory_figure_it_used_where_the_node_decides() {
    let mut t4 = catalogue::find("t4").unwrap().clone();
    assert_eq!(t4.memory_note(), None, "one figure: nothing to say");
    let seen = vec!["a test".to_string()];
    t4.memory = vec![
        catalogue::Memory { mib: 15360, condition: Some("ECC on".into()), default: true, seen: seen.clone() },
        catalogue::Memory { mib: 16384, condition: Some("ECC off".into()), default: false, seen },
    ];
    assert_eq!(
        t4.memory_note().unwrap(),
        "gpu.memory is 15360 MiB, what NVML reports on Tesla T4's usual nodes (ECC on); it reports 16384 MiB with ECC off: for such a pool give the snapshot of one node"
    );
    assert_eq!(t4.node(1, None).unwrap().gpus[0].memory_bytes, Some(15360 << 20), "the default figure");
}
