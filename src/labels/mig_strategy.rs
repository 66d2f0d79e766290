//! `nvidia.com/mig.strategy` and the MIG labels of the single and mixed strategies.

use super::resource::{base_labels, mig_enabled, mig_labels, GPU_RESOURCE};
use super::{key, value, Labels, MigStrategy};
use crate::sharing::Sharing;
use crate::snapshot::{Gpu, MigDevice};

/// MIG devices of MIG-enabled GPUs grouped by profile, in first-seen order: the first device of
/// each profile (with its parent's name) represents it, and the count is the profile's total.
/// A device whose profile cannot appear in a label key (possible only in a hand-written snapshot;
/// the probe names profiles itself) is left out with a warning.
fn by_profile<'a>(gpus: &'a [Gpu], warnings: &mut Vec<String>) -> Vec<(&'a str, &'a MigDevice, usize)> {
    let mut groups: Vec<(&str, &MigDevice, usize)> = Vec::new();
    for g in gpus.iter().filter(|g| mig_enabled(g)) {
        for d in g.mig.iter().flat_map(|m| &m.devices) {
            // The longest key a profile goes into, and the product suffix it becomes.
            let longest = format!("nvidia.com/mig-{}.sharing-strategy", d.profile);
            if !value::is_valid_key(&longest) || !value::is_valid_value(&d.profile) {
                warnings.push(format!(
                    "omitting MIG device {}:{}: profile {:?} cannot be part of a label",
                    g.index, d.index, d.profile
                ));
                continue;
            }
            match groups.iter_mut().find(|(_, rep, _)| rep.profile == d.profile) {
                Some((_, _, n)) => *n += 1,
                None => groups.push((&g.name, d, 1)),
            }
        }
    }
    groups
}

/// The MIG-strategy labels; they override the full-GPU labels key by key.
pub fn labels(gpus: &[Gpu], strategy: MigStrategy, sharing: &Sharing, warnings: &mut Vec<String>) -> Labels {
    let mut l = match strategy {
        // GFD checks nothing, not even the strategy, on a node without devices.
        _ if gpus.is_empty() => return Labels::new(),
        MigStrategy::None => return Labels::new(),
        MigStrategy::Single => single(gpus, sharing, warnings),
        MigStrategy::Mixed => by_profile(gpus, warnings)
            .into_iter()
            .flat_map(|(parent, rep, count)| {
                mig_labels(&format!("nvidia.com/mig-{}", rep.profile), parent, rep, count, sharing, warnings)
            })
            .collect(),
    };
    l.insert(key("mig.strategy"), strategy.as_str().into());
    l
}

fn single(gpus: &[Gpu], sharing: &Sharing, warnings: &mut Vec<String>) -> Labels {
    let Some(first) = gpus.iter().find(|g| mig_enabled(g)) else {
        return Labels::new();
    };
    let reason = if gpus
        .iter()
        .filter(|g| mig_enabled(g))
        .any(|g| g.mig.as_ref().is_some_and(|m| m.devices.is_empty()))
    {
        Some("at least one MIG device is enabled but empty")
    } else if gpus.iter().any(|g| !mig_enabled(g)) {
        Some("devices with MIG enabled and disable detected")
    } else {
        None
    };
    let groups = by_profile(gpus, warnings);
    let reason = reason.or((groups.len() > 1).then_some("more than one MIG device type present on node"));
    if let Some(reason) = reason {
        warnings.push(format!("Invalid configuration detected for mig-strategy=single: {reason}"));
        let mut l = base_labels(GPU_RESOURCE, &first.name, &["MIG", "INVALID"], 0, None, warnings);
        l.insert(key("gpu.sharing-strategy"), String::new());
        l.insert(key("gpu.memory"), "0".into());
        return l;
    }
    match groups.first() {
        Some(&(parent, rep, count)) => mig_labels(GPU_RESOURCE, parent, rep, count, sharing, warnings),
        None => Labels::new(),
    }
}

#[cfg(test)]
#[path = "mig_strategy_tests.rs"]
mod tests;
