//! The checks of `--health`'s option values, the one parser of each, used by their clap fields
//! ([`super::arg_groups`]) and their rows ([`super::rows`]) alike; the struct
//! the rows write, [`HealthSettings`], is health's own (`health/config.rs`), re-exported here.

use std::collections::BTreeSet;

/// Conditions the kubelet owns: writing one would fight it.
const KUBELET_CONDITIONS: [&str; 5] =
    ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"];

pub use crate::health::config::{
    gpu_count, HealthSettings, Judging, TaintEffect, DEFAULT_BOOT_ID_FILE, DEFAULT_CONDITION_TYPE,
    DEFAULT_NVML_TIMEOUT, EXPECTED_COUNT_LABEL,
};

/// A condition type the API server accepts (a qualified name) and that is not the kubelet's.
pub fn condition_type(v: &str) -> Result<String, String> {
    let name = v.rsplit_once('/').map_or(v, |(_, n)| n);
    let ok_char = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
    let valid = !name.is_empty()
        && name.len() <= 63
        && name.chars().all(ok_char)
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !valid {
        return Err("a condition type is a name such as GPUHealthy (letters, digits, -_.)".into());
    }
    if KUBELET_CONDITIONS.contains(&v) {
        return Err("the kubelet owns this condition; choose another type such as GPUHealthy".into());
    }
    Ok(v.to_string())
}

/// `--health-expected-gpus`: a whole number of GPUs from 1; empty (or blank) is none.
pub fn expected_gpus(text: &str) -> Result<Option<u32>, String> {
    let count = |v: &str| gpu_count(v).ok_or("use a whole number of GPUs from 1".to_string());
    let v = text.trim();
    (!v.is_empty()).then(|| count(v)).transpose()
}

/// `--health-nvml-timeout`: a Go duration of at least 1s.
pub fn nvml_timeout(text: &str) -> Result<std::time::Duration, String> {
    crate::duration::parse_go_duration(text)
        .ok()
        .filter(|d| *d >= std::time::Duration::from_secs(1))
        .ok_or("use a duration of at least 1s, such as 30s or 2m".to_string())
}

/// `--health-recovery-hold`: a Go duration (0s clears at the first reading that shows it gone).
pub fn recovery_hold(text: &str) -> Result<std::time::Duration, String> {
    crate::duration::parse_go_duration(text).map_err(|_| {
        "use a duration such as 2m, 30s or 0s (clear at the first reading that shows it)".to_string()
    })
}

/// A comma-separated list of Xid numbers (empty: none).
pub fn xids(text: &str) -> Result<BTreeSet<u64>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| x.parse().map_err(|_| format!("{x:?} is not an Xid number; use a list such as 13,31,43")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::config::{Cli, CliError, FileFlags, Settings};

    fn resolve_env(vars: &[(&str, &str)], ff: &FileFlags) -> Result<HealthSettings, CliError> {
        let env = |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string());
        let cli = Cli::try_from_args(["nvlabel"]).unwrap();
        let file = Some((std::path::Path::new("/etc/config.yaml"), ff));
        Settings::resolve_with(&cli, &env, file).map(|s| s.health)
    }

    #[test]
    fn defaults_env_and_file_forms() {
        let s = resolve_env(&[], &FileFlags::default()).unwrap();
        assert_eq!(s, HealthSettings::default());
        assert!(!s.enabled && s.judging == Judging::default(), "the catalog decides");
        let s = resolve_env(
            &[
                ("NVLABEL_HEALTH", "true"),
                ("NVLABEL_HEALTH_IGNORE_XIDS", "13, 79"),
                ("NVLABEL_HEALTH_CONDITION_TYPE", "AcceleratedHardwareReady"),
            ],
            &FileFlags::default(),
        )
        .unwrap();
        assert!(s.enabled);
        assert_eq!(s.judging.ignored_xids, [13, 79].into_iter().collect());
        assert_eq!(s.condition_type, "AcceleratedHardwareReady");
        let ff =
            FileFlags { health: Some(true), health_ignore_xids: Some(String::new()), ..FileFlags::default() };
        let s = resolve_env(&[], &ff).unwrap();
        assert!(s.enabled && s.judging.ignored_xids.is_empty(), "an empty list: none");
        let s = resolve_env(&[("NVLABEL_HEALTH_FATAL_XIDS", "94,31")], &FileFlags::default()).unwrap();
        assert_eq!(s.judging.fatal_xids, [31, 94].into_iter().collect());
        let both = [("NVLABEL_HEALTH_FATAL_XIDS", "94"), ("NVLABEL_HEALTH_IGNORE_XIDS", "94")];
        let e = resolve_env(&both, &FileFlags::default()).unwrap_err();
        assert!(e.to_string().contains("both ignored and fatal"), "{e}");
        // The config file's YAML list form means the same as the flag's text.
        let file = crate::config::file::ConfigFile::parse("flags:\n  healthIgnoreXids: [13, 79]\n").unwrap();
        assert_eq!(
            resolve_env(&[], &file.flags).unwrap().judging.ignored_xids,
            [13, 79].into_iter().collect()
        );
    }

    #[test]
    fn xid_thresholds_from_env_and_file_and_their_refusals() {
        let var = "NVLABEL_HEALTH_XID_THRESHOLDS";
        let s = resolve_env(&[(var, "43:3/1m, 13:5/10m")], &FileFlags::default()).unwrap();
        assert_eq!(
            s.judging.xid_thresholds,
            crate::health::judging::thresholds::parse("13:5/10m,43:3/1m").unwrap()
        );
        let file =
            crate::config::file::ConfigFile::parse("flags:\n  healthXidThresholds: [\"43:3/1m\"]\n").unwrap();
        assert_eq!(resolve_env(&[], &file.flags).unwrap().judging.xid_thresholds.len(), 1, "the list form");
        let e = resolve_env(&[(var, "43:3/0s")], &FileFlags::default()).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "invalid value \"43:3/0s\" for environment variable \"NVLABEL_HEALTH_XID_THRESHOLDS\""
            ),
            "{e}"
        );
        let both = |other: &str| {
            let vars = [(var, "43:3/1m"), (other, "43")];
            resolve_env(&vars, &FileFlags::default()).unwrap_err().to_string()
        };
        assert_eq!(
            both("NVLABEL_HEALTH_IGNORE_XIDS"),
            "invalid value \"43\" for --health-ignore-xids and --health-xid-thresholds: an Xid with a threshold cannot be ignored: it is never a fault; keep it in one of the two"
        );
        assert!(both("NVLABEL_HEALTH_FATAL_XIDS").contains("cannot be fatal: it is a fault the first time"));
    }

    #[test]
    fn bad_values_name_where_they_came_from() {
        let e = resolve_env(&[("NVLABEL_HEALTH_IGNORE_XIDS", "13,x")], &FileFlags::default()).unwrap_err();
        assert!(
            e.to_string().contains("NVLABEL_HEALTH_IGNORE_XIDS") && e.to_string().contains("\"x\""),
            "{e}"
        );
        let e =
            resolve_env(&[("NVLABEL_HEALTH_CONDITION_TYPE", "Ready")], &FileFlags::default()).unwrap_err();
        assert!(e.to_string().contains("kubelet"), "{e}");
        let ff = FileFlags { health_condition_type: Some("GPU Healthy".into()), ..FileFlags::default() };
        let e = resolve_env(&[], &ff).unwrap_err();
        assert!(e.to_string().contains("flags.healthConditionType in config file /etc/config.yaml"), "{e}");
    }
}
