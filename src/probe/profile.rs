//! MIG profile names exactly as GFD v0.20 writes them (go-nvlib v0.12 `NewMigProfile`, then `+`
//! replaced by `.`): `1g.5gb`, `1c.3g.20gb`, `1g.10gb.me`, `1g.12gb-me`, `1g.24gb.gfx`.

/// Why a MIG device's profile cannot be named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    /// GPU-instance profile index outside go-nvlib's table (17, 3_SLICE_GFX, among them).
    #[error("invalid GPU Instance Profile ID: {0}")]
    GpuInstanceProfile(u32),
    /// Compute-instance profile index outside the table.
    #[error("invalid Compute Instance Profile ID: {0}")]
    ComputeInstanceProfile(u32),
    /// The parent GPU's memory is unknown or zero, so the size in GB cannot be computed.
    #[error("parent GPU memory is unknown")]
    ParentMemory,
    /// A compute instance larger than its GPU instance, which NVML cannot create.
    #[error("compute instance of {compute} slices in a GPU instance of {gpu}")]
    ComputeLargerThanGpu {
        /// Compute-instance slices.
        compute: u32,
        /// GPU-instance slices.
        gpu: u32,
    },
}

/// Slice count G of a GPU-instance profile index. The fake NVML library keeps its own copy of
/// these tables (`crates/fake-nvml/src/fixture.rs`) on purpose, as the driver's side of the check;
/// this one is GFD's naming table, which refuses profile 17 where the driver knows it.
pub fn gpu_instance_slices(gi: u32) -> Result<u32, ProfileError> {
    Ok(match gi {
        0 | 7 | 9 | 10 | 13 | 15 => 1,
        1 | 8 | 11 | 14 | 16 => 2,
        2 => 3,
        3 | 12 => 4,
        6 => 6,
        4 => 7,
        5 => 8,
        _ => return Err(ProfileError::GpuInstanceProfile(gi)),
    })
}

/// Slice count C of a compute-instance profile index.
pub fn compute_instance_slices(ci: u32) -> Result<u32, ProfileError> {
    Ok(match ci {
        0 | 7 => 1,
        1 => 2,
        2 => 3,
        3 => 4,
        6 => 6,
        4 | 8 => 7,
        5 => 8,
        _ => return Err(ProfileError::ComputeInstanceProfile(ci)),
    })
}

/// Memory in GB as go-nvlib rounds it: the fraction of the parent in eighths, times the parent's GiB.
pub fn memory_gb(memory_mib: u64, parent_total_bytes: u64) -> u64 {
    let frac = (memory_mib as f64 * (1u64 << 20) as f64) / parent_total_bytes as f64;
    let frac = (frac * 8.0).ceil() / 8.0;
    let total_gib = (parent_total_bytes as f64 / (1u64 << 30) as f64).ceil();
    (frac * total_gib).round() as u64
}

/// The profile name of a MIG device from its GI and CI profile indices and memory.
pub fn profile_name(
    gi: u32,
    ci: u32,
    memory_mib: u64,
    parent_total_bytes: u64,
) -> Result<String, ProfileError> {
    let g = gpu_instance_slices(gi)?;
    let c = compute_instance_slices(ci)?;
    if parent_total_bytes == 0 {
        return Err(ProfileError::ParentMemory);
    }
    if c > g {
        return Err(ProfileError::ComputeLargerThanGpu { compute: c, gpu: g });
    }
    let gb = memory_gb(memory_mib, parent_total_bytes);
    let mut name = if c == g { format!("{g}g.{gb}gb") } else { format!("{c}c.{g}g.{gb}gb") };
    match gi {
        13 | 14 => name.push_str("-me"),
        // go-nvlib writes `+me`; GFD turns every `+` into `.`.
        7 | 8 => name.push_str(".me"),
        15 | 16 => name.push_str(".me.all"),
        10..=12 => name.push_str(".gfx"),
        _ => {}
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A100_40GB: u64 = 40960 << 20;
    const A100_80GB: u64 = 81920 << 20;
    const H100_80GB: u64 = 81559 << 20;
    const RTX_PRO_6000: u64 = 97887 << 20;

    #[test]
    fn names_match_gfd_for_real_profile_tables() {
        let cases: &[(u32, u32, u64, u64, &str)] = &[
            (0, 0, 4864, A100_40GB, "1g.5gb"),
            (7, 0, 4864, A100_40GB, "1g.5gb.me"),
            (9, 0, 9856, A100_40GB, "1g.10gb"),
            (1, 1, 9856, A100_40GB, "2g.10gb"),
            (2, 2, 19968, A100_40GB, "3g.20gb"),
            (2, 0, 19968, A100_40GB, "1c.3g.20gb"),
            (3, 3, 19968, A100_40GB, "4g.20gb"),
            (4, 4, 40192, A100_40GB, "7g.40gb"),
            (0, 0, 9728, A100_80GB, "1g.10gb"),
            (9, 0, 19968, A100_80GB, "1g.20gb"),
            (4, 4, 80896, A100_80GB, "7g.80gb"),
            (0, 0, 9984, H100_80GB, "1g.10gb"),
            (15, 0, 9984, H100_80GB, "1g.10gb.me.all"),
            (13, 0, 9984, H100_80GB, "1g.10gb-me"),
            (2, 2, 40448, H100_80GB, "3g.40gb"),
            (10, 0, 24064, RTX_PRO_6000, "1g.24gb.gfx"),
            (11, 1, 48128, RTX_PRO_6000, "2g.48gb.gfx"),
        ];
        for &(gi, ci, mib, parent, want) in cases {
            assert_eq!(profile_name(gi, ci, mib, parent).unwrap(), want, "gi {gi} ci {ci} {mib} MiB");
        }
    }

    #[test]
    fn gfd_mock_profiles() {
        // GFD's unit tests name MIG devices `<gi>g.<gb>gb` from a memory size in GB.
        assert_eq!(profile_name(2, 2, 20 * 1024, A100_40GB).unwrap(), "3g.20gb");
        assert_eq!(profile_name(0, 0, 5 * 1024, A100_40GB).unwrap(), "1g.5gb");
    }

    #[test]
    fn unnameable_profiles_are_errors() {
        assert_eq!(profile_name(17, 0, 1, A100_40GB), Err(ProfileError::GpuInstanceProfile(17)));
        assert_eq!(
            profile_name(17, 0, 1, A100_40GB).unwrap_err().to_string(),
            "invalid GPU Instance Profile ID: 17"
        );
        assert_eq!(profile_name(0, 9, 1, A100_40GB), Err(ProfileError::ComputeInstanceProfile(9)));
        assert_eq!(profile_name(0, 0, 1, 0), Err(ProfileError::ParentMemory));
    }
}
