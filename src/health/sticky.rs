//! Faults stay until the node reboots (its boot id changes) or a person clears them, and survive
//! a restart of nvlabel: the Node condition's message is the record, read back at start-up.

use super::rules::{Fault, Found, REASONS};
use std::collections::BTreeMap;

/// The condition nvlabel publishes, without the Kubernetes wrapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// `True`, `False` or `Unknown`.
    pub status: &'static str,
    /// CamelCase reason.
    pub reason: String,
    /// Human-readable detail.
    pub message: String,
}

/// Reason while every GPU is healthy.
pub const HEALTHY: &str = "GpusHealthy";
/// Reason while NVML cannot answer and no fault is known.
pub const UNAVAILABLE: &str = "NvmlUnavailable";
/// Where the message records the boot the faults belong to.
const BOOT_MARK: &str = " [boot ";
/// The most faults one message lists; the rest are counted (a Node object has a size limit).
const MAX_LISTED: usize = 64;

/// Orders entries by GPU, then worst fault first; `disc` tells two Xids (or links) apart.
type Key = (u32, usize, String);

/// One fault as the message lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its place in [`REASONS`].
    pub rank: usize,
    /// The text: GPU, reason, value, action.
    pub text: String,
}

/// The sticky record of this boot's faults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracker {
    boot_id: String,
    entries: BTreeMap<Key, Entry>,
    /// NVML's error while it cannot answer.
    unavailable: Option<String>,
    gpus: usize,
}

impl Tracker {
    /// No faults known, on the boot `boot_id`.
    pub fn new(boot_id: &str) -> Tracker {
        Tracker { boot_id: boot_id.into(), entries: BTreeMap::new(), unavailable: None, gpus: 0 }
    }

    /// The faults of a condition published earlier in this boot: a `False` condition carrying
    /// `boot_id` keeps its entries; anything else (another boot, healthy, not ours) starts clean.
    pub fn recover(boot_id: &str, status: &str, message: &str) -> Tracker {
        let mut t = Tracker::new(boot_id);
        if status != "False" {
            return t;
        }
        let Some((body, tail)) = message.rsplit_once(BOOT_MARK) else { return t };
        if tail.strip_suffix(']') != Some(boot_id) {
            return t;
        }
        for text in body.split("; ").filter(|e| e.starts_with("GPU ") || e.starts_with("node: ")) {
            let gpu = text
                .strip_prefix("GPU ")
                .and_then(|r| r.split([' ', ':']).next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(u32::MAX);
            let rank =
                REASONS.iter().position(|r| text.contains(&format!(": {r},"))).unwrap_or(REASONS.len() - 1);
            // The same key a live fault gets, so seeing it again does not list it twice.
            let disc = match REASONS[rank] {
                "XidCriticalError" | "NvlinkInactive" => text
                    .split_once(&format!(": {}, ", REASONS[rank]))
                    .and_then(|(_, rest)| rest.rsplit_once(", action: "))
                    .map_or(String::new(), |(d, _)| d.to_string()),
                _ => String::new(),
            };
            t.entries.insert((gpu, rank, disc), Entry { rank, text: text.into() });
        }
        t
    }

    /// The boot the record belongs to.
    pub fn boot_id(&self) -> &str {
        &self.boot_id
    }

    /// A new boot: every fault is forgotten. Returns whether any was known.
    pub fn new_boot(&mut self, boot_id: &str) -> bool {
        self.boot_id = boot_id.into();
        let had = !self.entries.is_empty();
        self.entries.clear();
        had
    }

    /// NVML answered this pass (`gpus` GPUs), or could not (`Err`).
    pub fn nvml(&mut self, answer: Result<usize, String>) {
        match answer {
            Ok(n) => (self.gpus, self.unavailable) = (n, None),
            Err(e) => self.unavailable = Some(e),
        }
    }

    /// Adds a fault; returns its entry when it is new (an existing one may get a newer value).
    pub fn record(&mut self, found: &Found, uuid: Option<&str>) -> Option<Entry> {
        let (gpu, fault) = found;
        let disc = match fault {
            Fault::Xid { .. } | Fault::NvlinkInactive { .. } => fault.describe(),
            _ => String::new(),
        };
        let who = match (gpu, uuid) {
            (Some(i), Some(u)) => format!("GPU {i} ({u})"),
            (Some(i), None) => format!("GPU {i}"),
            (None, _) => "node".into(),
        };
        let text =
            format!("{who}: {}, {}, action: {}", fault.reason(), fault.describe(), fault.action().text());
        let entry = Entry { rank: fault.rank(), text };
        let key = (gpu.unwrap_or(u32::MAX), fault.rank(), disc);
        match self.entries.insert(key, entry.clone()) {
            None => Some(entry),
            Some(_) => None,
        }
    }

    /// The GPUs with a recorded fault.
    pub fn faulty_gpus(&self) -> std::collections::BTreeSet<u32> {
        self.entries.keys().map(|(gpu, _, _)| *gpu).filter(|g| *g != u32::MAX).collect()
    }

    /// Whether any fault is recorded.
    pub fn faulty(&self) -> bool {
        !self.entries.is_empty()
    }

    /// The condition as it stands.
    pub fn verdict(&self) -> Verdict {
        if let Some(worst) = self.entries.values().map(|e| e.rank).min() {
            let mut listed: Vec<&str> =
                self.entries.values().map(|e| e.text.as_str()).take(MAX_LISTED).collect();
            let more = self.entries.len().saturating_sub(MAX_LISTED);
            let extra = format!("and {more} more faults");
            if more > 0 {
                listed.push(&extra);
            }
            return Verdict {
                status: "False",
                reason: REASONS[worst].into(),
                message: format!("{}{BOOT_MARK}{}]", listed.join("; "), self.boot_id),
            };
        }
        match &self.unavailable {
            Some(e) => Verdict {
                status: "Unknown",
                reason: UNAVAILABLE.into(),
                message: format!("NVML cannot report GPU health: {e}"),
            },
            None => Verdict {
                status: "True",
                reason: HEALTHY.into(),
                message: format!("{} GPUs healthy", self.gpus),
            },
        }
    }
}

#[cfg(test)]
#[path = "sticky_tests.rs"]
mod tests;
