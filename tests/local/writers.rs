//! The stdout, hook and feature-file writers as users meet them.

use crate::common;

use common::*;
use nvlabel::labels::Labels;
use nvlabel::publish::{FeatureFile, Writer};

#[test]
fn hook_prints_feature_lines_without_a_timestamp() {
    let hook = ok(nvlabel(Some("t4")).arg("hook"));
    let printed = ok(nvlabel(Some("t4")).args(PRINT));
    assert_eq!(hook, printed);
    assert!(!hook.contains("gfd.timestamp"));
}

#[test]
fn hook_without_a_driver_prints_nothing_and_succeeds() {
    for extra in [&[][..], &["--fail-on-init-error=false"][..]] {
        let out = nvlabel(None).arg("hook").args(extra).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.stdout, b"");
    }
}

#[test]
fn expiry_adds_nfds_directive_after_the_marker() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gfd");
    ok(nvlabel(Some("t4"))
        .args(["--oneshot", "--no-timestamp", "--use-node-feature-api=false", "--expiry", "1h", "-o"])
        .arg(&path));
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(nvlabel::publish::MARKER), "the marker line comes first");
    let when = lines.next().unwrap().strip_prefix("# +expiry-time=").expect("then the directive");
    let at = humantime::parse_rfc3339(when).unwrap();
    let left = at.duration_since(std::time::SystemTime::now()).unwrap();
    assert!(
        left > std::time::Duration::from_secs(3000) && left <= std::time::Duration::from_secs(3600),
        "{left:?}"
    );
    assert_eq!(
        text.lines().skip(2).collect::<Vec<_>>().join("\n") + "\n",
        ok(nvlabel(Some("t4")).args(PRINT))
    );
}

#[test]
fn a_bad_expiry_names_the_flag() {
    let out = nvlabel(Some("t4")).args(PRINT).args(["--expiry", "soon"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("flag --expiry"));
}

/// Two label sets of very different sizes, so a torn write would show.
fn sets() -> [Labels; 2] {
    let big: Labels = (0..600).map(|i| (format!("nvidia.com/mig-{i}g.5gb.count"), i.to_string())).collect();
    let small = Labels::from([("nvidia.com/gpu.count".to_string(), "1".to_string())]);
    [big, small]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_never_sees_a_partial_feature_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gfd");
    let [a, b] = sets();
    let marked =
        |l: &Labels| format!("{}\n{}", nvlabel::publish::MARKER, nvlabel::publish::render::render_text(l));
    let expected = [marked(&a), marked(&b)];
    let mut writer = FeatureFile::new(path.clone(), None);
    writer.publish(&a).await.unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (path, stop, expected) = (path.clone(), stop.clone(), expected.clone());
        std::thread::spawn(move || {
            let mut reads = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let text = std::fs::read_to_string(&path).expect("the file never disappears");
                assert!(expected.contains(&text), "a torn or partial file was read ({} bytes)", text.len());
                reads += 1;
            }
            reads
        })
    };
    for i in 0..300 {
        let labels = if i % 2 == 0 { &b } else { &a };
        assert!(writer.publish(labels).await.unwrap());
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers, [std::ffi::OsString::from("gfd")]);
}
