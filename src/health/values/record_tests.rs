use super::samples::every_fault;
use super::*;

#[test]
fn the_schema_is_versioned_json_with_typed_values() {
    let faults = vec![
        RecordedFault {
            gpu: Some(1),
            uuid: Some("GPU-b".into()),
            fault: Fault::Xid { xid: 48, mig: Some((9, 0)), action: None, repeated: None },
            action: Action::ResetGpu,
            recurrences: Some(2),
        },
        RecordedFault {
            gpu: None,
            uuid: None,
            fault: Fault::Missing { nvml: 3, pci: 4 },
            action: Action::Reboot,
            recurrences: None,
        },
        RecordedFault {
            gpu: Some(0),
            uuid: None,
            fault: Fault::NvlinkInactive { link: 2 },
            action: Action::ResetGpu,
            recurrences: None,
        },
        RecordedFault {
            gpu: Some(2),
            uuid: None,
            fault: Fault::Recovery { action: Action::Reboot, xid: Some(79) },
            action: Action::Reboot,
            recurrences: None,
        },
    ];
    let record = Record::new("boot-a", faults.into_iter());
    let text = record.to_annotation();
    assert_eq!(
        text,
        r#"{"version":2,"bootId":"boot-a","faults":[{"gpu":1,"uuid":"GPU-b","kind":"XidCriticalError","xid":48,"mig":{"gpuInstance":9,"computeInstance":0},"action":"ResetGpu","recurrences":2},{"kind":"GpuMissing","nvml":3,"pci":4,"action":"RebootNode"},{"gpu":0,"kind":"NvlinkInactive","link":2,"action":"ResetGpu"},{"gpu":2,"kind":"GpuRecoveryActionRequired","driverAction":"RebootNode","xid":79,"action":"RebootNode"}]}"#
    );
    assert_eq!(Record::parse(&text).unwrap(), record);
}

#[test]
fn each_fault_kind_is_its_condition_reason_and_comes_back() {
    let faults = [
        Fault::Lost,
        Fault::Missing { nvml: 1, pci: 2 },
        Fault::RemappedRowsFailure,
        Fault::DoubleBitEcc,
        Fault::UncorrectedEcc { count: 3 },
        Fault::Xid { xid: 79, mig: None, action: None, repeated: None },
        Fault::RemappedRowsPending,
        Fault::RetiredPagesPending,
        Fault::NvlinkInactive { link: 1 },
    ];
    for fault in faults {
        let json = serde_json::to_value(&fault).unwrap();
        assert_eq!(json["kind"], fault.reason(), "{json}");
        assert_eq!(serde_json::from_value::<Fault>(json).unwrap(), fault);
    }
    for action in [Action::CheckWorkload, Action::ResetGpu, Action::Reboot, Action::Replace] {
        let json = serde_json::to_value(action).unwrap();
        assert_eq!(serde_json::from_value::<Action>(json).unwrap(), action);
    }
}

#[test]
fn another_version_or_garbage_is_refused_with_the_reason() {
    let e = Record::parse(r#"{"version":3,"bootId":"b","faults":[],"new":true}"#).unwrap_err();
    assert_eq!(
        e.to_string(),
        "annotation nvidia.com/gpu-health-record has record version 3; this nvlabel reads versions 1 and 2"
    );
    let e = Record::parse("GPU 0 is broken").unwrap_err();
    assert!(
        e.to_string().starts_with("annotation nvidia.com/gpu-health-record is not a GPU health record: "),
        "{e}"
    );
    let e = Record::parse(r#"{"version":2,"bootId":"b","faults":[{"kind":"Melted","action":"ResetGpu"}]}"#)
        .unwrap_err();
    assert!(e.to_string().contains("Melted"), "{e}");
}

/// Refuses an object that names a key twice, as a strict JSON reader does.
fn strict(text: &str) -> Result<(), String> {
    // serde_json keeps the last of a duplicate key: count the keys of each object as written.
    struct Keys(Result<(), String>);
    impl<'de> serde::Deserialize<'de> for Keys {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Keys, D::Error> {
            struct V;
            impl<'de> serde::de::Visitor<'de> for V {
                type Value = Keys;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("JSON")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Keys, A::Error> {
                    let mut seen = std::collections::BTreeSet::new();
                    let mut out = Ok(());
                    while let Some(k) = m.next_key::<String>()? {
                        let inner: Keys = m.next_value()?;
                        if !seen.insert(k.clone()) {
                            out = Err(format!("duplicate key {k:?}"));
                        }
                        out = out.and(inner.0);
                    }
                    Ok(Keys(out))
                }
                fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut s: A) -> Result<Keys, A::Error> {
                    let mut out = Ok(());
                    while let Some(inner) = s.next_element::<Keys>()? {
                        out = out.and(inner.0);
                    }
                    Ok(Keys(out))
                }
                fn visit_str<E>(self, _: &str) -> Result<Keys, E> {
                    Ok(Keys(Ok(())))
                }
                fn visit_u64<E>(self, _: u64) -> Result<Keys, E> {
                    Ok(Keys(Ok(())))
                }
                fn visit_i64<E>(self, _: i64) -> Result<Keys, E> {
                    Ok(Keys(Ok(())))
                }
                fn visit_bool<E>(self, _: bool) -> Result<Keys, E> {
                    Ok(Keys(Ok(())))
                }
            }
            d.deserialize_any(V)
        }
    }
    serde_json::from_str::<Keys>(text).map_err(|e| e.to_string())?.0
}

#[test]
fn every_fault_and_action_reads_back_with_one_key_per_field() {
    let faults: Vec<RecordedFault> = every_fault()
        .into_iter()
        .enumerate()
        .map(|(i, fault)| RecordedFault {
            gpu: Some(i as u32),
            uuid: Some(format!("GPU-{i}")),
            action: fault.action(),
            fault,
            recurrences: (i % 2 == 1).then_some(i as u32),
        })
        .collect();
    let record = Record::new("boot-a", faults.into_iter());
    let text = record.to_annotation();
    strict(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(Record::parse(&text).unwrap(), record, "{text}");
    assert!(strict(r#"{"a":1,"a":2}"#).is_err(), "the strict reader refuses a duplicate key");
}

#[test]
fn a_version_1_record_reads_as_it_was_written() {
    // Exactly what version 1 wrote: `action` twice for an Xid and a recovery action.
    let v1 = concat!(
        r#"{"version":1,"bootId":"b","faults":["#,
        r#"{"gpu":0,"uuid":"GPU-a","kind":"GpuRecoveryActionRequired","action":"RebootNode","action":"RebootNode"},"#,
        r#"{"gpu":1,"kind":"XidCriticalError","xid":48,"action":"ResetGpu","action":"ResetGpu"},"#,
        r#"{"gpu":1,"kind":"XidCriticalError","xid":13,"action":"CheckWorkload"},"#,
        r#"{"kind":"GpuMissing","nvml":3,"pci":4,"action":"RebootNode"}]}"#
    );
    let record = Record::parse(v1).unwrap();
    let kept: Vec<(Fault, Action)> = record.faults.into_iter().map(|f| (f.fault, f.action)).collect();
    assert_eq!(
        kept,
        [
            (Fault::Recovery { action: Action::Reboot, xid: None }, Action::Reboot),
            (
                Fault::Xid { xid: 48, mig: None, action: Some(Action::ResetGpu), repeated: None },
                Action::ResetGpu
            ),
            (
                Fault::Xid { xid: 13, mig: None, action: Some(Action::CheckWorkload), repeated: None },
                Action::CheckWorkload
            ),
            (Fault::Missing { nvml: 3, pci: 4 }, Action::Reboot),
        ]
    );
}

#[test]
fn a_threshold_fault_is_an_xid_fault_to_a_reader_that_knows_no_thresholds() {
    let fault = Fault::Xid {
        xid: 43,
        mig: None,
        action: Some(Action::ResetGpu),
        repeated: Some(super::samples::three_in_a_minute()),
    };
    let json = serde_json::to_string(&fault).unwrap();
    let want =
        r#"{"kind":"XidCriticalError","xid":43,"xidAction":"ResetGpu","repeated":{"count":3,"window":"1m"}}"#;
    assert_eq!(json, want);
    // What a reader without the key relies on: a key it does not know is passed over.
    let text = r#"{"version":2,"bootId":"b","faults":[{"gpu":0,"kind":"XidCriticalError","xid":43,"xidAction":"ResetGpu","later":{"a":1},"action":"ResetGpu"}]}"#;
    let read = Record::parse(text).unwrap().faults.remove(0).fault;
    assert_eq!(read, Fault::Xid { xid: 43, mig: None, action: Some(Action::ResetGpu), repeated: None });
}

#[test]
fn a_huge_record_is_capped_and_counts_the_rest() {
    let fault = |link| RecordedFault {
        gpu: Some(0),
        uuid: None,
        fault: Fault::NvlinkInactive { link },
        action: Action::ResetGpu,
        recurrences: None,
    };
    let record = Record::new("b", (0..MAX_RECORDED as u32 + 5).map(fault).collect::<Vec<_>>().into_iter());
    assert_eq!((record.faults.len(), record.omitted), (MAX_RECORDED, 5));
    assert!(record.to_annotation().len() < 64 << 10, "well under the Node's 256 KiB of annotations");
}
