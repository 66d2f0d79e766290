//! What to do about a fault, and who says so: the driver (NVML field 230, the GPU's recovery
//! action, since driver R550) where it answers, else NVIDIA's Xid catalog (`xid_catalog.tsv`,
//! one data file with its source and date), else the operator's `--health-ignore-xids` and
//! `--health-fatal-xids`, which override the catalog either way.

use crate::health::values::fault::Action;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

/// Which rule says an Xid is no fault alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// NVIDIA's Xid catalog: its immediate action for the Xid is none of a fault's (`IGNORE`,
    /// `RESTART_APP`, the Xid 45 workflow).
    Catalog {
        /// The catalog's immediate action.
        immediate: &'static str,
    },
    /// `--health-ignore-xids` lists it.
    IgnoreList,
    /// The GPU's driver answers its recovery action, which decides (it reads `none`).
    Driver,
}

/// The catalog as shipped: `xid<TAB>mnemonic<TAB>immediate action` lines, `#` comments.
const CATALOG: &str = include_str!("xid_catalog.tsv");

/// One Xid of the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatalogEntry {
    /// NVIDIA's mnemonic.
    pub mnemonic: &'static str,
    /// The catalog's immediate action ("Resolution Bucket (Immediate Action)").
    pub immediate: &'static str,
}

/// The catalog, parsed once.
pub fn catalog() -> &'static BTreeMap<u64, CatalogEntry> {
    static PARSED: OnceLock<BTreeMap<u64, CatalogEntry>> = OnceLock::new();
    PARSED.get_or_init(|| parse(CATALOG))
}

/// Parses catalog text; a malformed line is a bug in the shipped file (a test reads it whole).
fn parse(text: &'static str) -> BTreeMap<u64, CatalogEntry> {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let mut cols = l.split('\t');
            let xid = cols.next()?.trim().parse().ok()?;
            let mnemonic = cols.next()?.trim();
            let immediate = cols.next()?.trim();
            Some((xid, CatalogEntry { mnemonic, immediate }))
        })
        .collect()
}

/// What the catalog's immediate action means here: `None` is not a fault.
pub fn bucket_action(immediate: &str) -> Option<Action> {
    match immediate {
        "IGNORE" | "RESTART_APP" => None,
        // Xid 45 (a channel removed, as when a process is killed): the catalog's workflow acts
        // only on the Xids that come with it, and those are classified on their own.
        "WORKFLOW_XID_45" => None,
        // Xid 48 (a double-bit ECC error): the workflow starts with a reset.
        "RESET_GPU" | "WORKFLOW_XID_48" => Some(Action::ResetGpu),
        "RESTART_BM" | "RESTART_VM" => Some(Action::Reboot),
        // CONTACT_SUPPORT, CHECK_MECHANICALS, UPDATE_SWFW, CHECK_UVM, the NVLink workflows,
        // XID_154 (the driver's recovery action changed: read it) and no action at all.
        _ => Some(Action::Investigate),
    }
}

/// How an Xid is classified when the driver gives no recovery action: `None` is not a fault.
pub fn xid_action(xid: u64, ignored: &BTreeSet<u64>, fatal: &BTreeSet<u64>) -> Option<Action> {
    xid_verdict(xid, ignored, fatal).ok()
}

/// As [`xid_action`], with the rule that says an Xid is no fault: the operator's list or the
/// catalog's immediate action.
pub fn xid_verdict(xid: u64, ignored: &BTreeSet<u64>, fatal: &BTreeSet<u64>) -> Result<Action, Rule> {
    if ignored.contains(&xid) {
        return Err(Rule::IgnoreList);
    }
    let entry = catalog().get(&xid);
    let catalog = entry.map_or(Some(Action::Investigate), |e| bucket_action(e.immediate));
    match (catalog, fatal.contains(&xid), entry) {
        (Some(action), _, _) => Ok(action),
        // Only the operator says it is a fault: nothing about the hardware is known.
        (None, true, _) => Ok(Action::CheckWorkload),
        (None, false, e) => Err(Rule::Catalog { immediate: e.map_or("-", |e| e.immediate) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_catalog_entry_has_a_known_immediate_action() {
        let lines = CATALOG.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')).count();
        assert_eq!(catalog().len(), lines, "every data line parses");
        assert!(catalog().len() > 100, "the whole catalog: {}", catalog().len());
        for (xid, e) in catalog() {
            assert!(!e.mnemonic.is_empty() && !e.immediate.is_empty(), "Xid {xid}: {e:?}");
            let bucket =
                e.immediate.chars().all(|c| c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit());
            assert!(bucket || e.immediate == "-", "Xid {xid}: {e:?}");
        }
        assert!(CATALOG.contains("https://docs.nvidia.com/deploy/xid-errors/"), "the source is named");
        assert!((1..=172).all(|x| catalog().contains_key(&x)), "every Xid the catalog lists");
    }

    #[test]
    fn the_catalog_decides_where_the_device_plugins_list_was_wrong() {
        let none = BTreeSet::new();
        assert_eq!(xid_action(94, &none, &none), None, "94 is RESTART_APP in the catalog");
        assert_eq!(xid_action(109, &none, &none), Some(Action::ResetGpu), "109 is RESET_GPU");
        assert_eq!(xid_action(31, &none, &none), None, "an application's bad pointer");
        assert_eq!(xid_action(79, &none, &none).map(|a| a >= Action::ResetGpu), Some(true), "off the bus");
        assert_eq!(xid_action(9_999, &none, &none), Some(Action::Investigate), "unknown: investigate");
        assert_eq!(xid_verdict(43, &none, &none), Err(Rule::Catalog { immediate: "IGNORE" }));
        assert_eq!(xid_verdict(94, &none, &none), Err(Rule::Catalog { immediate: "RESTART_APP" }));
        assert_eq!(xid_verdict(45, &none, &none), Err(Rule::Catalog { immediate: "WORKFLOW_XID_45" }));
    }

    #[test]
    fn the_operator_overrides_the_catalog_either_way() {
        let none = BTreeSet::new();
        let set = |x: &[u64]| x.iter().copied().collect::<BTreeSet<u64>>();
        assert_eq!(xid_verdict(109, &set(&[109]), &none), Err(Rule::IgnoreList), "ignored");
        assert_eq!(xid_action(31, &none, &set(&[31])), Some(Action::CheckWorkload), "fatal by choice only");
        assert_eq!(
            xid_action(109, &none, &set(&[109])),
            Some(Action::ResetGpu),
            "fatal anyway: the catalog's action"
        );
    }

    #[test]
    fn the_drivers_recovery_actions() {
        assert_eq!(Action::from_driver(0), None);
        assert_eq!(Action::from_driver(1).map(Action::text), Some("reset the GPU"));
        assert_eq!(Action::from_driver(2), Some(Action::Reboot));
        assert_eq!(Action::from_driver(3), Some(Action::DrainP2p));
        assert_eq!(Action::from_driver(4), Some(Action::DrainAndReset));
        assert_eq!(Action::from_driver(5), Some(Action::RecoverImexDomain));
        assert_eq!(Action::from_driver(42), Some(Action::Investigate));
    }
}
