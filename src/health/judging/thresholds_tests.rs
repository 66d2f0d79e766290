use super::*;
use std::time::Duration;

fn t(count: u32, secs: u64) -> Threshold {
    Threshold { count, window: Duration::from_secs(secs) }
}

#[test]
fn good_values_parse() {
    assert_eq!(parse(""), Ok(Thresholds::new()), "empty: none");
    assert_eq!(parse(" 43:3/1m , 13:5/1h30m,"), Ok([(43, t(3, 60)), (13, t(5, 5400))].into()));
    let half = parse("45:2/1.5s").unwrap()[&45];
    assert_eq!(half.window, Duration::from_millis(1500));
}

#[test]
fn bad_values_say_what_is_wrong_and_what_is_right() {
    let cases = [
        ("43:3/0s", "the window \"0s\" in \"43:3/0s\" is not a positive duration such as 1m or 90s"),
        ("43:3/1", "the window \"1\" in \"43:3/1\""),
        ("x:3/1m", "\"x\" in \"x:3/1m\" is not an Xid number"),
        ("43:0/1m", "the count \"0\" in \"43:0/1m\" is not a whole number from 2 to 1000"),
        ("43:1/1m", "(once is --health-fatal-xids)"),
        ("43:1001/1m", "from 2 to 1000"),
        ("43:3", "\"43:3\" is not XID:COUNT/WINDOW"),
        ("43", "\"43\" is not XID:COUNT/WINDOW"),
        ("43:3/1m,43:4/1h", "Xid 43 has two thresholds"),
    ];
    for (value, says) in cases {
        let e = parse(value).unwrap_err();
        assert!(e.contains(says), "{value}: {e}");
        assert!(e.contains("43:3/1m"), "{value}: names a good value: {e}");
        assert!(!e.contains('\n'), "one line: {e}");
    }
}

#[test]
fn windows_are_spelled_as_flags_spell_them_and_read_back() {
    let cases = [
        (Duration::from_secs(60), "1m"),
        (Duration::from_secs(90), "1m30s"),
        (Duration::from_secs(3600), "1h"),
        (Duration::from_secs(3661), "1h1m1s"),
        (Duration::from_millis(1500), "1.5s"),
        (Duration::from_millis(500), "500ms"),
        (Duration::from_millis(60_250), "1m0.25s"),
        (Duration::from_nanos(1), "0.000000001s"),
    ];
    for (d, text) in cases {
        assert_eq!(duration_text(d), text);
        assert_eq!(crate::duration::parse_go_duration(text), Ok(d), "{text}");
    }
    let json = serde_json::to_string(&t(3, 90)).unwrap();
    assert_eq!(json, r#"{"count":3,"window":"1m30s"}"#);
    assert_eq!(serde_json::from_str::<Threshold>(&json).unwrap(), t(3, 90));
    assert_eq!(t(3, 60).to_string(), "3 times in 1m");
}

#[tokio::test(start_paused = true)]
async fn the_count_th_xid_within_the_window_reaches_it() {
    let thresholds: Thresholds = [(43, t(3, 60))].into();
    let mut c = Counter::default();
    let step = Duration::from_secs(25);
    assert_eq!(c.count(&thresholds, 0, 43, crate::health::now()), None);
    tokio::time::advance(step).await;
    assert_eq!(c.count(&thresholds, 0, 43, crate::health::now()), None);
    // Another GPU's and another Xid's do not count.
    assert_eq!(c.count(&thresholds, 1, 43, crate::health::now()), None);
    assert_eq!(c.count(&thresholds, 1, 43, crate::health::now()), None);
    assert_eq!(c.count(&thresholds, 0, 13, crate::health::now()), None);
    tokio::time::advance(step).await;
    assert_eq!(c.count(&thresholds, 0, 43, crate::health::now()), Some(t(3, 60)), "the third in 50 s");
    // The count starts again.
    assert_eq!(c.count(&thresholds, 0, 43, crate::health::now()), None);
    assert_eq!(c.count(&thresholds, 0, 43, crate::health::now()), None);
    assert_eq!(c.count(&thresholds, 0, 43, crate::health::now()), Some(t(3, 60)));
    // GPU 1's third, within its own minute.
    assert_eq!(c.count(&thresholds, 1, 43, crate::health::now()), Some(t(3, 60)));
}

#[tokio::test(start_paused = true)]
async fn xids_spread_wider_than_the_window_never_reach_it() {
    let thresholds: Thresholds = [(43, t(3, 60))].into();
    let mut c = Counter::default();
    for _ in 0..10 {
        assert_eq!(c.count(&thresholds, 0, 43, crate::health::now()), None);
        tokio::time::advance(Duration::from_secs(31)).await;
    }
    // Exactly the window apart still counts (within it, ends included).
    tokio::time::advance(Duration::from_secs(60)).await;
    assert_eq!(c.count(&thresholds, 0, 43, crate::health::now()), None);
    tokio::time::advance(Duration::from_secs(30)).await;
    assert_eq!(c.count(&thresholds, 0, 43, crate::health::now()), None);
    tokio::time::advance(Duration::from_secs(30)).await;
    assert_eq!(c.count(&thresholds, 0, 43, crate::health::now()), Some(t(3, 60)));
}

#[tokio::test(start_paused = true)]
async fn memory_is_bounded_and_a_reload_forgets_what_it_no_longer_counts() {
    let mut c = Counter::default();
    let many: Thresholds = [(43, t(1000, 3600))].into();
    for _ in 0..999 {
        assert_eq!(c.count(&many, 0, 43, crate::health::now()), None);
    }
    assert_eq!(c.seen[&(0, 43)].len(), 999);
    // A reload lowers the count: the last ones count against it at once.
    let few: Thresholds = [(43, t(3, 3600))].into();
    assert_eq!(c.count(&few, 0, 43, crate::health::now()), Some(t(3, 3600)));
    assert!(c.seen.is_empty());
    for _ in 0..2 {
        c.count(&few, 0, 43, crate::health::now());
    }
    // Xid 43 no longer counted: its times go.
    assert_eq!(c.count(&[(13, t(2, 60))].into(), 0, 13, crate::health::now()), None);
    assert_eq!(c.seen.keys().copied().collect::<Vec<_>>(), [(0, 13)]);
    assert_eq!(c.count(&Thresholds::new(), 0, 43, crate::health::now()), None);
    assert!(c.seen.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_tally_says_where_the_count_stands() {
    let thresholds: Thresholds = [(43, t(3, 60))].into();
    let mut c = Counter::default();
    let seen = |c: &mut Counter, index, xid| {
        c.tally(&thresholds, index, xid, crate::health::now()).map(|t| (t.to_string(), t.reached()))
    };
    assert_eq!(seen(&mut c, 0, 43), Some(("1 of 3 within 1m".into(), false)));
    assert_eq!(seen(&mut c, 1, 43), Some(("1 of 3 within 1m".into(), false)), "GPU 1 counts its own");
    assert_eq!(seen(&mut c, 0, 43), Some(("2 of 3 within 1m".into(), false)));
    assert_eq!(seen(&mut c, 0, 43), Some(("3 of 3 within 1m".into(), true)));
    assert_eq!(seen(&mut c, 0, 43), Some(("1 of 3 within 1m".into(), false)), "then it starts again");
    tokio::time::advance(Duration::from_secs(61)).await;
    assert_eq!(seen(&mut c, 0, 43), Some(("1 of 3 within 1m".into(), false)), "the last one left the window");
    assert_eq!(seen(&mut c, 0, 13), None, "no threshold: no tally");
}
