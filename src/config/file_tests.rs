//! One case per rule of GFD's config file reader (defaults, validation texts, post-processing),
//! plus nvlabel's error shape.

use super::*;
use crate::sharing::Strategy;

fn parse(text: &str) -> ConfigFile {
    ConfigFile::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e:?}"))
}

fn invalid(text: &str) -> (String, String) {
    match ConfigFile::parse(text) {
        Err(ParseError::Invalid(b)) => b,
        other => panic!("{text:?} should be invalid, got {other:?}"),
    }
}

fn ts(resources: &str) -> String {
    format!("version: v1\nsharing:\n  timeSlicing:\n    resources:\n{resources}")
}

#[test]
fn empty_and_versions() {
    for blank in ["", "\n  \n", "# no sharing here\n", "---\n# a comment\n...\n", "  # indented\n"] {
        assert_eq!(parse(blank), ConfigFile::default(), "{blank:?}");
        assert!(is_blank(blank), "{blank:?}");
    }
    assert!(!is_blank("# header\nversion: v1\n"));
    assert_eq!(parse("version: v1\n").sharing, Sharing::default());
    assert_eq!(parse("version: \"\"\n").flags, FileFlags::default());
    assert_eq!(invalid("version: v2\n"), ("version".into(), "unknown version: v2".into()));
}

#[test]
fn flags_are_read() {
    let c = parse(
        "flags:\n  migStrategy: mixed\n  failOnInitError: false\n  useNodeFeatureAPI: false\n  \
         deviceDiscoveryStrategy: nvml\n  plugin: {passDeviceSpecs: true, deviceListStrategy: [envvar]}\n  \
         gfd:\n    oneshot: true\n    noTimestamp: true\n    sleepInterval: 1m30s\n    outputFile: \"\"\n    \
         machineTypeFile: /m\n",
    );
    let f = c.flags;
    assert_eq!(f.mig_strategy.as_deref(), Some("mixed"));
    assert_eq!(f.fail_on_init_error, Some(false));
    assert_eq!(f.use_node_feature_api, Some(false));
    assert_eq!(f.device_discovery_strategy.as_deref(), Some("nvml"));
    let g = f.gfd.unwrap();
    assert_eq!((g.oneshot, g.no_timestamp), (Some(true), Some(true)));
    assert_eq!(g.sleep_interval, Some(Interval::Every(std::time::Duration::from_secs(90))));
    assert_eq!(g.output_file.as_deref(), Some(""));
    assert_eq!(g.machine_type_file.as_deref(), Some("/m"));
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
}

#[test]
fn yaml_scalars_convert_as_in_gfd() {
    let f = parse("flags:\n  failOnInitError: no\n  migStrategy: yes\n").flags;
    assert_eq!(f.fail_on_init_error, Some(false), "YAML 1.1 booleans");
    assert_eq!(f.mig_strategy.as_deref(), Some("true"), "a scalar in a string field becomes its text");
    let f = parse("flags:\n  gfd:\n    sleepInterval: infinite\n").flags;
    assert_eq!(f.gfd.unwrap().sleep_interval, Some(Interval::Infinite));
}

#[test]
fn a_number_of_seconds_is_read_as_seconds_and_noted() {
    let c = parse("flags:\n  gfd:\n    sleepInterval: 60\n");
    assert_eq!(
        c.flags.gfd.unwrap().sleep_interval,
        Some(Interval::Every(std::time::Duration::from_secs(60)))
    );
    assert!(c.warnings[0].contains("read as seconds"), "{:?}", c.warnings);
}

#[test]
fn bad_flag_values_name_the_field() {
    let (field, msg) = invalid("flags:\n  gfd:\n    oneshot: maybe\n");
    assert_eq!(field, "flags.gfd.oneshot");
    assert!(msg.contains("maybe"), "{msg}");
    let (field, _) = invalid("flags:\n  gfd:\n    sleepInterval: 1d\n");
    assert_eq!(field, "flags.gfd.sleepInterval");
}

#[test]
fn unknown_fields_are_warned_about() {
    let c = parse("imexx: {}\nflags:\n  migStrateg: mixed\n");
    for field in ["imexx", "flags.migStrateg"] {
        assert!(c.warnings.iter().any(|w| w.contains(field)), "{field} not in {:?}", c.warnings);
    }
    // A typo in `flags` is named even when another flag fails first.
    let (field, msg) = invalid("flags:\n  migStrategyy: single\n  failOnInitError: maybe\n");
    assert_eq!(field, "flags.failOnInitError");
    assert!(msg.ends_with("(also: unknown field flags.migStrategyy is ignored; a misspelling?)"), "{msg}");
}

/// Where a key decides how the node is shared, a misspelt one is refused, never warned about:
/// taken, it would unshare the node (`-SHARED` gone, replicas 1) for a typo. A config that
/// shares nothing on purpose still loads.
#[test]
fn a_misspelt_sharing_key_or_an_impossible_resource_is_refused() {
    let refused = |text: &str, at: &str, known: &str| {
        let (field, msg) = invalid(text);
        assert_eq!(field, at, "{text:?}");
        assert_eq!(
            msg,
            format!(
                "unknown field, refused: a misspelt sharing key would unshare the node (known here: {known})"
            )
        );
    };
    refused("sharing:\n  timeslicing: {}\n", "sharing.timeslicing", "timeSlicing, mps");
    refused("Sharing: {}\n", "Sharing", "sharing");
    refused("sharng:\n  timeSlicing: {}\n", "sharng", "sharing");
    refused(
        "sharing:\n  mps:\n    renameByDefualt: true\n    resources: [{name: nvidia.com/gpu, replicas: 2}]\n",
        "sharing.mps.renameByDefualt",
        "renameByDefault, failRequestsGreaterThanOne, resources",
    );
    refused(
        &ts("      - name: nvidia.com/gpu\n        replicas: 2\n        replica: 3\n"),
        "sharing.timeSlicing.resources[0].replica",
        "name, devices, replicas, rename",
    );
    // `replica:` for `replicas:` is named as the unknown key it is.
    refused(
        &ts("      - name: gpu\n        replica: 2\n"),
        "sharing.timeSlicing.resources[0].replica",
        "name, devices, replicas, rename",
    );
    let (field, msg) = invalid(&ts("      - name: nvidia.com/gpus\n        replicas: 2\n"));
    assert_eq!(field, "sharing.timeSlicing.resources[0].name");
    assert_eq!(msg, "\"nvidia.com/gpus\" is no resource an NVIDIA GPU has: use nvidia.com/gpu, or nvidia.com/mig-<profile> such as nvidia.com/mig-1g.5gb");
    for shares_nothing in ["version: v1\n", "sharing: {}\n", "sharing:\n", "sharing:\n  mps:\n"] {
        assert_eq!(parse(shares_nothing).sharing, Sharing::default(), "{shares_nothing:?}");
    }
    // Every MIG profile shape stays a possible name.
    for name in ["nvidia.com/mig-1c.3g.20gb", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-7g.80gb"] {
        parse(&ts(&format!("      - name: {name}\n        replicas: 2\n")));
    }
}

#[test]
fn time_slicing_four_replicas() {
    let c = parse(&ts("      - name: nvidia.com/gpu\n        replicas: 4\n"));
    assert_eq!(c.sharing, Sharing::time_slicing(&[("nvidia.com/gpu", 4)]));
    assert_eq!(c.sharing.strategy(), Strategy::TimeSlicing);
}

#[test]
fn replicated_resource_rules() {
    let cases: &[(&str, &str, &str)] = &[
        ("      - name: gpu\n        replicas: 1\n", "sharing.timeSlicing.resources[0].replicas", "number of replicas must be >= 2, got 1"),
        ("      - name: gpu\n        replicas: 0\n", "sharing.timeSlicing.resources[0].replicas", "number of replicas must be >= 2, got 0"),
        ("      - name: gpu\n        replicas: -1\n", "sharing.timeSlicing.resources[0].replicas", "number of replicas must be >= 2, got -1"),
        ("      - name: gpu\n", "sharing.timeSlicing.resources[0]", "no replicas specified"),
        ("      - replicas: 2\n", "sharing.timeSlicing.resources[0]", "no resource name specified"),
        ("      - {}\n", "sharing.timeSlicing.resources[0]", "no resource name specified"),
        (
            "      - name: \"$invalid$\"\n        replicas: 2\n",
            "sharing.timeSlicing.resources[0].name",
            "incorrect format for resource name 'nvidia.com/$invalid$'",
        ),
        (
            "      - name: gpu\n        replicas: 2\n        rename: \"$x$\"\n",
            "sharing.timeSlicing.resources[0].rename",
            "incorrect format for resource name",
        ),
        (
            "      - name: mig-1g.10gb+me\n        replicas: 2\n",
            "sharing.timeSlicing.resources[0].name",
            "incorrect format for resource name 'nvidia.com/mig-1g.10gb+me'",
        ),
        (
            "      - name: gpu-with-a-very-long-name-that-goes-on-and-on-and-on-forever\n        replicas: 2\n",
            "sharing.timeSlicing.resources[0].name",
            "fully-qualified resource name must be 63 characters or less",
        ),
    ];
    for (resources, field, msg) in cases {
        let (f, m) = invalid(&ts(resources));
        assert_eq!(&f, field, "{resources}");
        assert!(m.starts_with(msg), "{resources}: {m}");
    }
}

#[test]
fn resources_are_required() {
    let no = "no resources specified";
    assert_eq!(invalid("sharing:\n  timeSlicing: {}\n").1, no);
    assert_eq!(invalid("sharing:\n  timeSlicing:\n    resources: []\n").1, no);
    assert_eq!(invalid("sharing:\n  timeSlicing:\n").1, no, "a null timeSlicing is decoded, and fails");
    assert_eq!(invalid("sharing:\n  mps: {}\n").1, no);
    assert_eq!(parse("sharing:\n  mps:\n").sharing.mps, None, "a null mps leaves MPS unset");
}

#[test]
fn names_are_normalised() {
    assert_eq!(resource_name("gpu").unwrap(), "nvidia.com/gpu");
    assert_eq!(resource_name("nvidia.com/mig-1g.10gb.me").unwrap(), "nvidia.com/mig-1g.10gb.me");
    assert!(resource_name("example.com/gpu").is_err());
}

#[test]
fn devices_specs() {
    let ok = [
        "all",
        "2",
        "[0]",
        "[\"0\"]",
        "[\"0:0\"]",
        "[\"GPU-8f5a2d3c-0b6e-4a1f-9c2d-7e8f9a0b1c2d\"]",
        "[\"MIG-8f5a2d3c-0b6e-4a1f-9c2d-7e8f9a0b1c2d\"]",
        "[\"MIG-GPU-8f5a2d3c-0b6e-4a1f-9c2d-7e8f9a0b1c2d/0/0\"]",
        "[0, \"1\", \"1:0\"]",
    ];
    for d in ok {
        parse(&ts(&format!("      - name: gpu\n        replicas: 2\n        devices: {d}\n")));
    }
    let bad = [
        "\"\"",
        "not-all",
        "-2",
        "0",
        "2.0",
        "[-1]",
        "[\"-1\"]",
        "[\"invalid-UUID\"]",
        "[\"GPU-UUID\"]",
        "[\"MIG-UUID\"]",
        "[\"MIG-GPU-8f5a2d3c-0b6e-4a1f-9c2d-7e8f9a0b1c2d\"]",
        "{a: b}",
    ];
    for d in bad {
        let (field, _) =
            invalid(&ts(&format!("      - name: gpu\n        replicas: 2\n        devices: {d}\n")));
        assert_eq!(field, "sharing.timeSlicing.resources[0].devices", "{d}");
    }
}

#[test]
fn customised_devices_are_ignored_with_a_warning() {
    let c = parse(&ts("      - name: gpu\n        replicas: 2\n        devices: [0]\n"));
    assert_eq!(c.sharing, Sharing::time_slicing(&[("nvidia.com/gpu", 2)]));
    assert!(
        c.warnings[0].contains("Customizing the 'devices' field in sharing.timeSlicing.resources"),
        "{:?}",
        c.warnings
    );
}

#[test]
fn rename_is_dropped_unless_rename_by_default() {
    // As in GFD's binary: an explicit rename is cleared, so the product still gets -SHARED.
    let c = parse(&ts("      - name: gpu\n        replicas: 2\n        rename: gpu.shared\n"));
    assert_eq!(c.sharing.active()[0].rename, None);
    assert!(c.warnings[0].contains("Setting the 'rename' field in sharing.timeSlicing.resources"));
    // renameByDefault forces <name>.shared, so no -SHARED suffix.
    let c = parse(
        "sharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n      - name: gpu\n        replicas: 2\n",
    );
    assert_eq!(c.sharing.active()[0].rename.as_deref(), Some("nvidia.com/gpu.shared"));
    assert!(c.warnings.is_empty());
}

#[test]
fn mps_wins_over_time_slicing() {
    let c = parse(
        "sharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 4}]\n  mps:\n    resources: [{name: gpu, replicas: 10}]\n",
    );
    assert_eq!(c.sharing.strategy(), Strategy::Mps);
    assert_eq!(c.sharing.active()[0].replicas, 10);
}

#[test]
fn resources_overrides_are_checked_then_ignored() {
    let c = parse("resources:\n  gpus:\n    - {pattern: \"*\", name: gpu}\n");
    assert!(c.warnings[0].contains("Customizing the 'resources' field is not yet supported"));
    assert_eq!(
        invalid("resources:\n  gpus:\n    - {name: gpu}\n").1,
        "resources must have a 'pattern' field set"
    );
    assert_eq!(
        invalid("resources:\n  mig:\n    - {pattern: x}\n").1,
        "resources must have a 'name' field set"
    );
}

#[test]
fn json_is_accepted() {
    let c = parse(
        r#"{"version": "v1", "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 10}]}}}"#,
    );
    assert_eq!(c.sharing, Sharing::mps(&[("nvidia.com/gpu", 10)]));
}

#[test]
fn syntax_errors_carry_line_and_column() {
    match ConfigFile::parse("sharing:\n  timeSlicing:\n    resources: [\n") {
        Err(ParseError::Syntax(m)) => assert!(m.to_string().contains("line"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn load_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, ts("      - name: gpu\n        replicas: 1\n")).unwrap();
    let err = ConfigFile::load(&path).unwrap_err().to_string();
    assert!(err.contains("config.yaml"), "{err}");
    assert!(
        err.contains("sharing.timeSlicing.resources[0].replicas: number of replicas must be >= 2"),
        "{err}"
    );
    assert!(ConfigFile::load(&dir.path().join("missing.yaml"))
        .unwrap_err()
        .to_string()
        .contains("missing.yaml"));
}

#[test]
fn health_ignore_xids_is_a_list_or_the_flags_text() {
    let xids = |text: &str| parse(text).flags.health_ignore_xids;
    assert_eq!(xids("flags:\n  healthIgnoreXids: \"13,31\"\n").as_deref(), Some("13,31"));
    assert_eq!(xids("flags:\n  healthIgnoreXids: [13, 31, 79]\n").as_deref(), Some("13,31,79"));
    assert_eq!(xids("flags:\n  healthIgnoreXids:\n    - 13\n    - 31\n").as_deref(), Some("13,31"));
    assert_eq!(xids("flags:\n  healthIgnoreXids: []\n").as_deref(), Some(""), "none ignored");
    assert_eq!(xids("flags:\n  healthIgnoreXids: 79\n").as_deref(), Some("79"));
    let e = ConfigFile::from_bytes(
        Path::new("/etc/nvlabel/config.yaml"),
        b"flags:\n  healthIgnoreXids: [13, abc]\n",
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid config file /etc/nvlabel/config.yaml: flags.healthIgnoreXids: item 1 of the list is \"abc\", \
         not an Xid number; use a list such as [13, 31]"
    );
    let (field, msg) = invalid("flags:\n  healthIgnoreXids: [13, -1]\n");
    assert_eq!((field.as_str(), msg.contains("-1")), ("flags.healthIgnoreXids", true), "{msg}");
}

#[test]
fn health_xid_thresholds_is_a_list_or_the_flags_text() {
    let thresholds = |text: &str| parse(text).flags.health_xid_thresholds;
    assert_eq!(
        thresholds("flags:\n  healthXidThresholds: 43:3/1m,13:5/10m\n").as_deref(),
        Some("43:3/1m,13:5/10m")
    );
    assert_eq!(
        thresholds("flags:\n  healthXidThresholds: [\"43:3/1m\", 13:5/10m]\n").as_deref(),
        Some("43:3/1m,13:5/10m")
    );
    assert_eq!(thresholds("flags:\n  healthXidThresholds: []\n").as_deref(), Some(""), "none");
    let (field, msg) = invalid("flags:\n  healthXidThresholds: [43]\n");
    assert_eq!(field, "flags.healthXidThresholds");
    assert!(msg.contains("item 0 of the list is 43, not text"), "{msg}");
}
