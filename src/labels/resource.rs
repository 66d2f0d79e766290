//! Resource labels: the four base labels every resource gets (`count`, `replicas`,
//! `sharing-strategy`, `product`), the full-GPU extras (memory, compute, family) and the MIG
//! attribute labels.

use super::{key, value, Labels};
use crate::sharing::Sharing;
use crate::snapshot::{Gpu, MigDevice};

/// `nvidia.com/gpu`, the full-GPU (and single-strategy MIG) resource.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// GFD's family table, plus compute 11 (Jetson Thor) as `blackwell`.
pub fn family(major: i32, minor: i32) -> &'static str {
    match major {
        1 => "tesla",
        2 => "fermi",
        3 => "kepler",
        5 => "maxwell",
        6 => "pascal",
        7 if minor < 5 => "volta",
        7 => "turing",
        8 if minor < 9 => "ampere",
        8 => "ada-lovelace",
        9 => "hopper",
        10..=12 => "blackwell",
        13 => "rubin",
        _ => "undefined",
    }
}

/// `count`, `replicas`, `sharing-strategy` and `product` for resource `resource`.
/// `sharing` is `None` where GFD disables sharing (MIG-enabled GPUs in the full-GPU labels).
pub fn base_labels(
    resource: &str,
    model: &str,
    suffix: &[&str],
    count: usize,
    sharing: Option<&Sharing>,
    warnings: &mut Vec<String>,
) -> Labels {
    let entry = sharing.and_then(|s| s.entry(resource));
    let replicas = match (sharing, entry) {
        (None, _) => 0,
        (Some(_), Some(e)) => e.replicas,
        (Some(_), None) => 1,
    };
    let strategy = match sharing {
        Some(s) if replicas > 1 => s.strategy().as_str(),
        _ => "none",
    };
    let shared = entry.is_some_and(|e| e.replicas > 1 && e.rename.as_deref().unwrap_or("").is_empty());
    let mut parts = suffix.to_vec();
    if shared {
        parts.push("SHARED");
    }
    let mut l = Labels::from([
        (format!("{resource}.count"), count.to_string()),
        (format!("{resource}.replicas"), replicas.to_string()),
        (format!("{resource}.sharing-strategy"), strategy.to_string()),
    ]);
    match value::product(model, &parts) {
        Some(p) => {
            l.insert(format!("{resource}.product"), p);
        }
        None => warnings.push(format!("omitting {resource}.product: {model:?} has no valid label value")),
    }
    l
}

/// Full-GPU labels of one representative GPU of a model, counted `count` times.
fn gpu_labels(gpu: &Gpu, count: usize, sharing: Option<&Sharing>, warnings: &mut Vec<String>) -> Labels {
    let mut l = base_labels(GPU_RESOURCE, &gpu.name, &[], count, sharing, warnings);
    let memory_mib = gpu.memory_bytes.unwrap_or(0) / (1 << 20);
    if memory_mib != 0 {
        l.insert(key("gpu.memory"), memory_mib.to_string());
    }
    let [major, minor] = gpu.compute_capability;
    if major < 0 || minor < 0 {
        // A value cannot start with '-', so the numbers are left out; GFD's family for them,
        // `undefined`, is a valid value and stays. -1/-1 is the vfio source's "no driver to
        // ask" (said once where it starts), anything else negative a driver's oddity.
        if [major, minor] != [-1, -1] {
            warnings.push(format!(
                "omitting gpu.compute.major and .minor of GPU {}: compute capability {major}.{minor}",
                gpu.index
            ));
        }
        l.insert(key("gpu.family"), family(major, minor).to_string());
    } else if major != 0 {
        l.insert(key("gpu.compute.major"), major.to_string());
        l.insert(key("gpu.compute.minor"), minor.to_string());
        l.insert(key("gpu.family"), family(major, minor).to_string());
    }
    l
}

/// Models in order of first appearance, with their GPU counts.
fn models(gpus: &[Gpu]) -> Vec<(&str, usize)> {
    let mut models: Vec<(&str, usize)> = Vec::new();
    for g in gpus {
        match models.iter_mut().find(|(n, _)| *n == g.name) {
            Some((_, c)) => *c += 1,
            None => models.push((&g.name, 1)),
        }
    }
    models
}

/// The primary model: most GPUs, ties broken by the lowest index. GFD picks at random.
pub fn primary_model(gpus: &[Gpu]) -> Option<&str> {
    primary(&models(gpus))
}

fn primary<'a>(models: &[(&'a str, usize)]) -> Option<&'a str> {
    // `max_by_key` keeps the last maximum; iterate reversed so the earliest model wins ties.
    models.iter().rev().max_by_key(|(_, c)| *c).map(|(n, _)| *n)
}

/// `nvidia.com/gpu.*` for the primary model: GFD's MIG-enabled labeler (sharing disabled), then
/// its full labeler, each from the last GPU of its kind; the later one wins key by key.
pub fn full_gpu_labels(gpus: &[Gpu], sharing: &Sharing, warnings: &mut Vec<String>) -> Labels {
    let all = models(gpus);
    let Some(model) = primary(&all) else {
        return Labels::new();
    };
    if all.len() > 1 {
        let names: Vec<&str> = all.iter().map(|(n, _)| *n).collect();
        warnings.push(format!(
            "Multiple device types detected: {}; nvidia.com/gpu.* labels describe {model:?}",
            names.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", ")
        ));
    }
    let of_model: Vec<&Gpu> = gpus.iter().filter(|g| g.name == model).collect();
    let mut l = Labels::new();
    if let Some(g) = of_model.iter().rev().find(|g| mig_enabled(g)) {
        l.extend(gpu_labels(g, of_model.len(), None, warnings));
    }
    if let Some(g) = of_model.iter().rev().find(|g| !mig_enabled(g)) {
        l.extend(gpu_labels(g, of_model.len(), Some(sharing), warnings));
    }
    l
}

/// Whether MIG mode is on.
pub fn mig_enabled(g: &Gpu) -> bool {
    g.mig.as_ref().is_some_and(|m| m.enabled)
}

/// Labels of a MIG resource (`nvidia.com/gpu` under single, `nvidia.com/mig-<P>` under mixed).
pub fn mig_labels(
    resource: &str,
    parent: &str,
    dev: &MigDevice,
    count: usize,
    sharing: &Sharing,
    warnings: &mut Vec<String>,
) -> Labels {
    if count == 0 {
        return Labels::new();
    }
    let mut l = base_labels(resource, parent, &["MIG", &dev.profile], count, Some(sharing), warnings);
    for (suffix, v) in [
        ("memory", dev.memory_mib),
        ("multiprocessors", dev.multiprocessors.into()),
        ("slices.gi", dev.gpu_instance_slices.into()),
        ("slices.ci", dev.compute_instance_slices.into()),
        ("engines.copy", dev.copy_engines.into()),
        ("engines.decoder", dev.decoders.into()),
        ("engines.encoder", dev.encoders.into()),
        ("engines.jpeg", dev.jpeg_decoders.into()),
        ("engines.ofa", dev.ofa.into()),
    ] {
        l.insert(format!("{resource}.{suffix}"), v.to_string());
    }
    l
}

#[cfg(test)]
#[path = "resource_tests.rs"]
mod tests;
