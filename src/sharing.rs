//! GPU sharing as the device-plugin config describes it (time-slicing, MPS): the part of the
//! config the labels read. Parsing the config file comes on top of these types.

/// One replicated resource (`sharing.<strategy>.resources[]`), after GFD's post-processing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicatedResource {
    /// Fully qualified resource name (`nvidia.com/gpu`, `nvidia.com/mig-1g.5gb`).
    pub name: String,
    /// The name the plugin advertises it under; a renamed resource gets no `-SHARED` suffix.
    pub rename: Option<String>,
    /// How many replicas each device is split into.
    pub replicas: u32,
}

/// A `timeSlicing` or `mps` block.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReplicatedResources {
    /// Entries, in file order.
    pub resources: Vec<ReplicatedResource>,
}

/// The node-wide sharing strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// No sharing.
    None,
    /// CUDA time-slicing.
    TimeSlicing,
    /// CUDA MPS.
    Mps,
}

impl Strategy {
    /// The `sharing-strategy` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::None => "none",
            Strategy::TimeSlicing => "time-slicing",
            Strategy::Mps => "mps",
        }
    }
}

/// The `sharing` block.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sharing {
    /// `sharing.timeSlicing`.
    pub time_slicing: Option<ReplicatedResources>,
    /// `sharing.mps`.
    pub mps: Option<ReplicatedResources>,
}

impl Sharing {
    /// Time-slicing of `resources` (name, replicas).
    pub fn time_slicing(resources: &[(&str, u32)]) -> Sharing {
        Sharing { time_slicing: Some(ReplicatedResources::of(resources)), mps: None }
    }

    /// MPS of `resources` (name, replicas).
    pub fn mps(resources: &[(&str, u32)]) -> Sharing {
        Sharing { time_slicing: None, mps: Some(ReplicatedResources::of(resources)) }
    }

    /// GFD's `SharingStrategy()`: MPS if any MPS entry replicates, else time-slicing if any
    /// time-slicing entry does, else none.
    pub fn strategy(&self) -> Strategy {
        let replicates = |r: &Option<ReplicatedResources>| {
            r.as_ref().is_some_and(|r| r.resources.iter().any(|e| e.replicas > 1))
        };
        if replicates(&self.mps) {
            Strategy::Mps
        } else if replicates(&self.time_slicing) {
            Strategy::TimeSlicing
        } else {
            Strategy::None
        }
    }

    /// The active list: the MPS block whenever it exists, else time-slicing.
    pub fn active(&self) -> &[ReplicatedResource] {
        self.mps.as_ref().or(self.time_slicing.as_ref()).map_or(&[], |r| &r.resources)
    }

    /// One warning when the active list has entries but none matches a resource of this node
    /// (`resources`, as the device plugin would advertise them): the config shares nothing here.
    /// A config listing some resources this node lacks is normal (one config for a cluster).
    /// Names no GPU could have are left out: the config file's check named each already.
    pub fn matching_nothing(&self, resources: &[String]) -> Option<String> {
        let active: Vec<&ReplicatedResource> = self.active().iter().filter(|e| possible(&e.name)).collect();
        let matched = active.iter().any(|e| resources.iter().any(|r| matches(&e.name, r)));
        let block = if self.mps.is_some() { "sharing.mps" } else { "sharing.timeSlicing" };
        let names: Vec<String> = active.iter().map(|e| format!("{:?}", e.name)).collect();
        (!active.is_empty() && !matched).then(|| {
            format!(
                "{block} shares nothing on this node: none of its resources ({}) is one this node has ({})",
                names.join(", "),
                resources.iter().map(|r| format!("{r:?}")).collect::<Vec<_>>().join(", ")
            )
        })
    }

    /// The active entry for a resource name with replicas > 0.
    pub fn entry(&self, resource: &str) -> Option<&ReplicatedResource> {
        self.active().iter().find(|e| e.name == resource && e.replicas > 0)
    }
}

impl ReplicatedResources {
    fn of(resources: &[(&str, u32)]) -> ReplicatedResources {
        ReplicatedResources {
            resources: resources
                .iter()
                .map(|(name, replicas)| ReplicatedResource {
                    name: (*name).into(),
                    rename: None,
                    replicas: *replicas,
                })
                .collect(),
        }
    }
}

/// Whether a config's resource `name` matches `resource`: anchored, `*` any run of characters
/// (the device plugin's `ResourcePattern.Matches`).
pub fn matches(name: &str, resource: &str) -> bool {
    match name.split_once('*') {
        None => name == resource,
        Some((head, rest)) => resource.strip_prefix(head).is_some_and(|tail| {
            (0..=tail.len()).any(|i| tail.is_char_boundary(i) && matches(rest, &tail[i..]))
        }),
    }
}

/// Whether `name` is a resource an NVIDIA GPU could have: `nvidia.com/gpu`, or
/// `nvidia.com/mig-<profile>` (`1g.5gb`, `1c.3g.20gb`, `1g.10gb+me`, ...), `*` as a wildcard.
pub fn possible(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("nvidia.com/") else { return false };
    if rest == "gpu" || (rest.contains('*') && matches(rest, "gpu")) {
        return true;
    }
    let Some(profile) = rest.strip_prefix("mig-") else {
        return rest.contains('*') && "mig-".starts_with(rest.split('*').next().unwrap_or_default());
    };
    profile.contains('*') || mig_profile(profile)
}

/// `[<n>c.]<n>g.<n>gb[+me|-me|+me.all|+gfx]`.
fn mig_profile(p: &str) -> bool {
    let number = |s: &str, unit: &str| {
        s.strip_suffix(unit).is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let base = ["+me.all", "+me", "-me", "+gfx"].iter().find_map(|s| p.strip_suffix(s)).unwrap_or(p);
    let parts: Vec<&str> = base.split('.').collect();
    match parts.as_slice() {
        [g, gb] => number(g, "g") && number(gb, "gb"),
        [c, g, gb] => number(c, "c") && number(g, "g") && number(gb, "gb"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn possible_names_are_the_gpu_and_mig_profiles() {
        for name in [
            "nvidia.com/gpu",
            "nvidia.com/mig-1g.5gb",
            "nvidia.com/mig-1c.3g.20gb",
            "nvidia.com/mig-1g.10gb+me",
            "nvidia.com/mig-1g.24gb+me.all",
            "nvidia.com/mig-*",
            "nvidia.com/*",
            "nvidia.com/mig-1g.*",
        ] {
            assert!(possible(name), "{name}");
        }
        for name in [
            "nvidia.com/gpus",
            "nvidia.com/GPU",
            "nvidia.com/mig-1g",
            "nvidia.com/mig-big",
            "nvidia.com/shared-gpu",
            "nvidia.com/mig-1g.5gb.shared",
        ] {
            assert!(!possible(name), "{name}");
        }
    }

    #[test]
    fn wildcards_are_anchored() {
        assert!(matches("nvidia.com/mig-1g.*", "nvidia.com/mig-1g.5gb"));
        assert!(matches("nvidia.com/*", "nvidia.com/gpu"));
        assert!(!matches("nvidia.com/mig-*gb", "nvidia.com/mig-1g.24gb-me"));
        assert!(!matches("nvidia.com/mig-1g.24gb", "nvidia.com/mig-1g.24gb-me"));
    }

    #[test]
    fn a_config_matching_nothing_on_the_node_is_named_once() {
        let node = ["nvidia.com/gpu".to_string()];
        let miss = Sharing::time_slicing(&[("nvidia.com/mig-1g.5gb", 2), ("nvidia.com/mig-2g.10gb", 2)]);
        assert_eq!(
            miss.matching_nothing(&node).as_deref(),
            Some("sharing.timeSlicing shares nothing on this node: none of its resources (\"nvidia.com/mig-1g.5gb\", \"nvidia.com/mig-2g.10gb\") is one this node has (\"nvidia.com/gpu\")")
        );
        let some = Sharing::time_slicing(&[("nvidia.com/mig-1g.5gb", 2), ("nvidia.com/gpu", 2)]);
        assert_eq!(some.matching_nothing(&node), None, "a cluster-wide config matching something is normal");
        assert_eq!(Sharing::default().matching_nothing(&node), None);
        let typo = Sharing::time_slicing(&[("nvidia.com/gpus", 2)]);
        assert_eq!(typo.matching_nothing(&node), None, "named once, by the config file's check");
    }
}
