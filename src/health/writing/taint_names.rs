//! The names of the device taints' rules, computed here only: `nvlabel-<device>.<node>` now,
//! `nvlabel-<node>-<device>` as the released version named them (found and replaced after an
//! upgrade), and whether a listed rule is a node's. The chart's admission policy
//! (`nvlabel-device-taints`) requires exactly these names.

use crate::health::writing::taint_spec::DeviceSelector;

/// The name of the rule on `device` of `pool` (the node's): a device name is a DNS label (no
/// dot) and a pool a DNS subdomain, so everything after the first dot is the pool, and no node's
/// name can be read as another's (`nvlabel-<node>-<device>` could: node `a`, device `b-gpu-0`
/// against node `a-b`, device `gpu-0`). The admission policy requires exactly this name.
pub fn rule_name(device: &str, pool: &str) -> String {
    format!("nvlabel-{device}.{pool}")
}

/// The name the released version gave the rule on `device` of `node`: still found (and replaced
/// by [`rule_name`]'s) after an upgrade; the admission policy admits only its deletion.
pub fn previous_name(node: &str, device: &str) -> String {
    format!("nvlabel-{node}-{device}")
}

/// Whether the listed rule `name` selecting `device` is `node`'s: its pool is the node and its
/// name is derived from its pool and device, as named now or by the released version. A rule
/// another node made under the released version's looser policy (a name that reads as this
/// node's, even this node's label, but another pool) is not, so it is never deleted in vain.
pub fn owned(node: &str, name: &str, device: &DeviceSelector) -> bool {
    let (Some(pool), Some(device)) = (device.pool.as_deref(), device.device.as_deref()) else { return false };
    pool == node && (name == rule_name(device, pool) || name == previous_name(node, device))
}
