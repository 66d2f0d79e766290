//! nvlabel's own labels (`--extended-labels`), for scheduling and autoscaling on what a node
//! physically has, which GFD's labels do not say steadily: `gpu.product` changes with sharing and
//! the MIG strategy, `gpu.count` and `gpu.memory` change meaning under MIG, and a second GPU model
//! on a node is invisible.
//!
//! - `gpu.model`: the primary model's *model name* (below), the same whatever the sharing, MIG
//!   strategy or MIG layout, and predictable from the NVML name alone.
//! - `gpu.pci-device-id`: its PCI device id, 4 lower-case hex digits (omitted when NVML says 0).
//! - `gpu.physical.count`, `gpu.physical.memory` (MiB per GPU of the primary model),
//!   `gpu.physical.memory-total` (MiB, all GPUs): physical GPUs, never MIG devices or replicas.
//! - `gpu.models.<model>.count` and `.memory` (MiB per GPU) for every model on the node, so a pod
//!   can require "at least 2 × L40S" with `Gt` node affinity.
//!
//! Model name: the NVML name's ASCII letters and digits, lower case, words split at everything
//! else, the vendor words `nvidia` and `tesla` dropped, joined with `-`: `NVIDIA H100 80GB HBM3`
//! → `h100-80gb-hbm3`, `Tesla T4` → `t4`. Names that give the same model name are one model. A
//! name too long for its place is cut and given an 8-digit hash of the whole model name, so it
//! stays deterministic and two models never share it.

use super::resource::primary_model;
use super::{key, Labels};
use crate::snapshot::Gpu;

/// Words that name the vendor or a retired brand, not the model.
const VENDOR_WORDS: [&str; 2] = ["nvidia", "tesla"];

/// The longest model name in `gpu.models.<model>.memory` (63 - "gpu.models." - ".memory").
const MAX_KEY_MODEL: usize = 63 - "gpu.models.".len() - ".memory".len();

/// The model name of an NVML name; `None` when nothing but vendor words and punctuation is left.
pub fn model_name(nvml_name: &str) -> Option<String> {
    let words: Vec<String> = nvml_name
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .filter(|w| !VENDOR_WORDS.contains(&w.as_str()))
        .collect();
    (!words.is_empty()).then(|| words.join("-"))
}

/// `model`, or its first characters and a hash of the whole when it is longer than `max`.
pub fn shortened(model: &str, max: usize) -> String {
    if model.len() <= max {
        return model.to_string();
    }
    let hash = format!("{:08x}", fnv1a(model.as_bytes()));
    // Model names are ASCII; cut, then drop a trailing separator before the hash.
    let head = model[..max - hash.len() - 1].trim_end_matches('-');
    format!("{head}-{hash}")
}

/// 32-bit FNV-1a: small, stable across versions and platforms (the key must never change).
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(*b)).wrapping_mul(0x0100_0193))
}

/// The key part for a model: the model name, shortened to fit every per-model key.
pub fn model_key(model: &str) -> String {
    shortened(model, MAX_KEY_MODEL)
}

/// MiB of a GPU, if known and not 0.
fn mib(g: &Gpu) -> Option<u64> {
    g.memory_bytes.map(|b| b >> 20).filter(|m| *m > 0)
}

/// The extended labels.
pub fn labels(gpus: &[Gpu], warnings: &mut Vec<String>) -> Labels {
    let mut l = Labels::new();
    if gpus.is_empty() {
        return l;
    }
    l.insert(key("gpu.physical.count"), gpus.len().to_string());
    let total: u64 = gpus.iter().filter_map(mib).sum();
    if total > 0 {
        l.insert(key("gpu.physical.memory-total"), total.to_string());
    }
    // Per model, in the order models first appear; names that normalise alike are one model.
    let mut models: Vec<(String, Vec<&Gpu>)> = Vec::new();
    for g in gpus {
        let Some(model) = model_name(&g.name) else {
            warnings.push(format!(
                "no model name for GPU {} ({:?}): no extended model labels for it",
                g.index, g.name
            ));
            continue;
        };
        match models.iter_mut().find(|(m, _)| *m == model) {
            Some((_, of)) => of.push(g),
            None => models.push((model, vec![g])),
        }
    }
    for (model, of) in &models {
        let k = model_key(model);
        l.insert(key(&format!("gpu.models.{k}.count")), of.len().to_string());
        if let Some(m) = of.iter().find_map(|g| mib(g)) {
            l.insert(key(&format!("gpu.models.{k}.memory")), m.to_string());
        }
    }
    // The primary model as GFD's gpu.* labels choose it (by raw name), named the stable way.
    let Some(primary) = primary_model(gpus) else { return l };
    let of_primary: Vec<&Gpu> = gpus.iter().filter(|g| g.name == primary).collect();
    if let Some(model) = model_name(primary) {
        l.insert(key("gpu.model"), shortened(&model, 63));
    }
    if let Some(id) = of_primary.iter().find_map(|g| g.pci_device_id) {
        l.insert(key("gpu.pci-device-id"), format!("{id:04x}"));
    }
    if let Some(m) = of_primary.iter().find_map(|g| mib(g)) {
        l.insert(key("gpu.physical.memory"), m.to_string());
    }
    l
}

/// Models nvlabel knows, for the value catalogue (`docs/models.md`): the NVML name and PCI
/// device id of NVIDIA's data-centre GPUs (public PCI ids), and the bundled fixtures' others.
pub const KNOWN_MODELS: &[(&str, u16)] = &[
    ("Tesla V100-SXM2-16GB", 0x1db1),
    ("Tesla V100-SXM2-32GB", 0x1db5),
    ("Tesla V100-PCIE-16GB", 0x1db4),
    ("Tesla V100-PCIE-32GB", 0x1db6),
    ("Tesla T4", 0x1eb8),
    ("NVIDIA A100-SXM4-40GB", 0x20b0),
    ("NVIDIA A100-SXM4-80GB", 0x20b2),
    ("NVIDIA A100-PCIE-40GB", 0x20f1),
    ("NVIDIA A100 80GB PCIe", 0x20b5),
    ("NVIDIA A30", 0x20b7),
    ("NVIDIA A40", 0x2235),
    ("NVIDIA A10", 0x2236),
    ("NVIDIA A10G", 0x2237),
    ("NVIDIA A2", 0x25b6),
    ("NVIDIA A16", 0x25b6),
    ("NVIDIA L4", 0x27b8),
    ("NVIDIA L40", 0x26b5),
    ("NVIDIA L40S", 0x26b9),
    ("NVIDIA H100 PCIe", 0x2331),
    ("NVIDIA H100 80GB HBM3", 0x2330),
    ("NVIDIA H100 NVL", 0x2321),
    ("NVIDIA H200", 0x2335),
    ("NVIDIA GH200 480GB", 0x2342),
    ("NVIDIA B200", 0x2901),
    ("NVIDIA GeForce RTX 4090", 0x2684),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::test_support::{full, indexed, m, mig_enabled};

    #[test]
    fn model_names() {
        for (nvml, want) in [
            ("NVIDIA H100 80GB HBM3", "h100-80gb-hbm3"),
            ("Tesla T4", "t4"),
            ("NVIDIA A100-SXM4-40GB", "a100-sxm4-40gb"),
            ("NVIDIA GeForce RTX 4090", "geforce-rtx-4090"),
            (
                "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
                "rtx-pro-6000-blackwell-max-q-workstation-edition",
            ),
            ("  nvidia  L40S ", "l40s"),
            ("NVIDIA Größe X", "gr-e-x"),
        ] {
            assert_eq!(model_name(nvml).as_deref(), Some(want), "{nvml}");
        }
        assert_eq!(model_name("NVIDIA"), None);
        assert_eq!(model_name("((()))"), None);
    }

    #[test]
    fn long_names_are_cut_with_a_hash_and_stay_distinct() {
        let a = "rtx-pro-6000-blackwell-max-q-workstation-edition-alpha";
        let b = "rtx-pro-6000-blackwell-max-q-workstation-edition-bravo";
        let (ka, kb) = (model_key(a), model_key(b));
        assert!(ka.len() <= MAX_KEY_MODEL && kb.len() <= MAX_KEY_MODEL);
        assert_ne!(ka, kb);
        assert_eq!(ka, model_key(a), "deterministic");
        assert_eq!(model_key("l40s"), "l40s", "short names are kept");
        assert!(!ka.contains("--"), "{ka}");
    }

    #[test]
    fn extended_labels_describe_the_physical_node() {
        let l40s = |i| Gpu {
            index: i,
            name: "NVIDIA L40S".into(),
            memory_bytes: Some(46068 << 20),
            pci_device_id: Some(0x26b9),
            ..full()
        };
        let t4 = |i, name: &str| Gpu {
            index: i,
            name: name.into(),
            memory_bytes: Some(15360 << 20),
            pci_device_id: Some(0x1eb8),
            ..full()
        };
        // Two spellings of one model are one model; MIG does not change the physical view.
        let gpus =
            vec![l40s(0), t4(1, "Tesla T4"), l40s(2), t4(3, "NVIDIA T4"), mig_enabled(vec![m(1, 1, 5)])];
        let gpus = indexed(gpus);
        let mut w = Vec::new();
        let l = labels(&gpus, &mut w);
        assert_eq!(l["nvidia.com/gpu.physical.count"], "5");
        assert_eq!(l["nvidia.com/gpu.models.l40s.count"], "2");
        assert_eq!(l["nvidia.com/gpu.models.t4.count"], "2");
        assert_eq!(l["nvidia.com/gpu.models.t4.memory"], "15360");
        assert_eq!(l["nvidia.com/gpu.models.mockmodel.count"], "1");
        // Primary by raw name, as gpu.product: two L40S beat one "Tesla T4" and one "NVIDIA T4".
        assert_eq!(l["nvidia.com/gpu.model"], "l40s");
        assert_eq!(l["nvidia.com/gpu.pci-device-id"], "26b9");
        assert_eq!(l["nvidia.com/gpu.physical.memory"], "46068");
        assert!(w.is_empty(), "{w:?}");
        // A name with no model in it: counted, named nowhere, said once.
        let odd = indexed(vec![Gpu { name: "NVIDIA".into(), pci_device_id: None, ..full() }]);
        let l = labels(&odd, &mut w);
        assert_eq!(l["nvidia.com/gpu.physical.count"], "1");
        assert!(!l.keys().any(|k| k.starts_with("nvidia.com/gpu.model")), "{l:?}");
        assert!(!l.contains_key("nvidia.com/gpu.pci-device-id"));
        assert_eq!(w.len(), 1, "{w:?}");
        // No GPUs, no labels.
        assert!(labels(&[], &mut w).is_empty());
    }
}
