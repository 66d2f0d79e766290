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
