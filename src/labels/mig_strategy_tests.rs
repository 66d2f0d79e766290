//! The MIG strategies (`none`, `single`, `mixed`): the cases of GFD's own unit tests, with GFD's
//! mock devices, on top of the full-GPU labels as `labels::compute` merges them.

use crate::labels::resource::full_gpu_labels;
use crate::labels::test_support::{full, indexed, l, m, mig_enabled, plus, ts, COMPUTE};
use crate::labels::{Labels, MigStrategy};
use crate::sharing::Sharing;
use crate::snapshot::Gpu;

/// The full-GPU labels, then the strategy's, as `labels::merge` orders them.
fn with_strategy(gpus: &[Gpu], strategy: MigStrategy, sharing: &Sharing) -> Labels {
    let gpus = indexed(gpus.to_vec());
    let mut w = Vec::new();
    let mut out = full_gpu_labels(&gpus, sharing, &mut w);
    out.extend(super::labels(&gpus, strategy, sharing, &mut w));
    out
}

#[test]
fn mig_strategy_none_labels() {
    let ts2 = ts(&[("nvidia.com/gpu", 2)]);
    let none = Sharing::default();
    let cases: Vec<(&str, Vec<Gpu>, &Sharing, Labels)> = vec![
        ("no GPUs", vec![], &none, Labels::new()),
        (
            "one full GPU",
            vec![full()],
            &none,
            plus(
                &COMPUTE,
                &[
                    "gpu.count=1",
                    "gpu.replicas=1",
                    "gpu.sharing-strategy=none",
                    "gpu.memory=300",
                    "gpu.product=MOCKMODEL",
                ],
            ),
        ),
        (
            "one full GPU, time-sliced",
            vec![full()],
            &ts2,
            plus(
                &COMPUTE,
                &[
                    "gpu.count=1",
                    "gpu.replicas=2",
                    "gpu.sharing-strategy=time-slicing",
                    "gpu.memory=300",
                    "gpu.product=MOCKMODEL-SHARED",
                ],
            ),
        ),
        (
            "two full GPUs, time-sliced",
            vec![full(), full()],
            &ts2,
            plus(
                &COMPUTE,
                &[
                    "gpu.count=2",
                    "gpu.replicas=2",
                    "gpu.sharing-strategy=time-slicing",
                    "gpu.memory=300",
                    "gpu.product=MOCKMODEL-SHARED",
                ],
            ),
        ),
        (
            "MIG enabled without devices",
            vec![mig_enabled(vec![])],
            &ts2,
            l(&[
                "gpu.count=1",
                "gpu.replicas=0",
                "gpu.sharing-strategy=none",
                "gpu.memory=300",
                "gpu.product=MOCKMODEL",
            ]),
        ),
        (
            "two MIG GPUs without devices",
            vec![mig_enabled(vec![]), mig_enabled(vec![])],
            &ts2,
            l(&[
                "gpu.count=2",
                "gpu.replicas=0",
                "gpu.sharing-strategy=none",
                "gpu.memory=300",
                "gpu.product=MOCKMODEL",
            ]),
        ),
        (
            "an empty MIG GPU and a full GPU, time-sliced",
            vec![mig_enabled(vec![]), full()],
            &ts2,
            plus(
                &COMPUTE,
                &[
                    "gpu.count=2",
                    "gpu.replicas=2",
                    "gpu.sharing-strategy=time-slicing",
                    "gpu.memory=300",
                    "gpu.product=MOCKMODEL-SHARED",
                ],
            ),
        ),
    ];
    for (name, gpus, sharing, want) in cases {
        assert_eq!(with_strategy(&gpus, MigStrategy::None, sharing), want, "{name}");
    }
}

#[test]
fn mig_strategy_single_labels() {
    let none = Sharing::default();
    let invalid = [
        "gpu.count=0",
        "gpu.replicas=0",
        "gpu.sharing-strategy=",
        "gpu.memory=0",
        "gpu.product=MOCKMODEL-MIG-INVALID",
        "mig.strategy=single",
    ];
    let full_one = [
        "gpu.count=1",
        "gpu.replicas=1",
        "gpu.sharing-strategy=none",
        "gpu.memory=300",
        "gpu.product=MOCKMODEL",
        "mig.strategy=single",
    ];
    let mut attrs = m(1, 2, 100);
    (
        attrs.multiprocessors,
        attrs.copy_engines,
        attrs.decoders,
        attrs.encoders,
        attrs.jpeg_decoders,
        attrs.ofa,
    ) = (12, 13, 14, 15, 16, 17);
    let cases: Vec<(&str, Vec<Gpu>, Labels)> = vec![
        ("no GPUs", vec![], Labels::new()),
        ("one full GPU", vec![full()], plus(&COMPUTE, &full_one)),
        ("two full GPUs", vec![full(), full()], plus(&COMPUTE, &[&["gpu.count=2"], &full_one[1..]].concat())),
        (
            "one MIG device",
            vec![mig_enabled(vec![m(1, 2, 100)])],
            l(&[
                "gpu.count=1",
                "gpu.replicas=1",
                "gpu.sharing-strategy=none",
                "gpu.memory=100",
                "gpu.product=MOCKMODEL-MIG-1g.100gb",
                "mig.strategy=single",
                "gpu.multiprocessors=0",
                "gpu.slices.gi=1",
                "gpu.slices.ci=2",
                "gpu.engines.copy=0",
                "gpu.engines.decoder=0",
                "gpu.engines.encoder=0",
                "gpu.engines.jpeg=0",
                "gpu.engines.ofa=0",
            ]),
        ),
        (
            "two MIG GPUs of one profile, attributes reported",
            vec![mig_enabled(vec![attrs.clone()]), mig_enabled(vec![attrs])],
            l(&[
                "gpu.count=2",
                "gpu.replicas=1",
                "gpu.sharing-strategy=none",
                "gpu.memory=100",
                "gpu.product=MOCKMODEL-MIG-1g.100gb",
                "mig.strategy=single",
                "gpu.multiprocessors=12",
                "gpu.slices.gi=1",
                "gpu.slices.ci=2",
                "gpu.engines.copy=13",
                "gpu.engines.decoder=14",
                "gpu.engines.encoder=15",
                "gpu.engines.jpeg=16",
                "gpu.engines.ofa=17",
            ]),
        ),
        ("MIG enabled without devices", vec![mig_enabled(vec![])], l(&invalid)),
        ("two profiles on one GPU", vec![mig_enabled(vec![m(1, 2, 100), m(3, 4, 100)])], l(&invalid)),
        ("a MIG GPU and a full GPU", vec![mig_enabled(vec![m(1, 2, 100)]), full()], plus(&COMPUTE, &invalid)),
        (
            "a MIG GPU, a full GPU and an empty MIG GPU",
            vec![mig_enabled(vec![m(1, 2, 100)]), full(), mig_enabled(vec![])],
            plus(&COMPUTE, &invalid),
        ),
    ];
    for (name, gpus, want) in cases {
        assert_eq!(with_strategy(&gpus, MigStrategy::Single, &none), want, "{name}");
    }
}

#[test]
fn mig_strategy_mixed_labels() {
    let gpus = [mig_enabled(vec![m(3, 0, 20), m(1, 0, 5)])];
    let got = with_strategy(&gpus, MigStrategy::Mixed, &Sharing::default());
    assert_eq!(got["nvidia.com/gpu.count"], "1");
    assert_eq!(got["nvidia.com/gpu.replicas"], "0");
    assert_eq!(got["nvidia.com/gpu.product"], "MOCKMODEL");
    assert_eq!(got["nvidia.com/mig.strategy"], "mixed");
    assert_eq!(got["nvidia.com/mig-3g.20gb.product"], "MOCKMODEL-MIG-3g.20gb");
    assert_eq!(got["nvidia.com/mig-3g.20gb.memory"], "20");
    assert_eq!(got["nvidia.com/mig-1g.5gb.count"], "1");
    assert_eq!(got["nvidia.com/mig-1g.5gb.slices.ci"], "0");
    assert_eq!(got.keys().filter(|k| k.starts_with("nvidia.com/mig-")).count(), 26);
}
