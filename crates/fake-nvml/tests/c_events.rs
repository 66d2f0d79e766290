//! The health calls and the event file, driven from C through `dlopen` while the client runs.

mod common;

use common::{compile, library};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

#[test]
fn health_calls_and_events_follow_the_event_file() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let events = dir.join("c-events.txt");
    // What is in the file before the first init is history, not news.
    std::fs::write(&events, "0 xid 94\n").unwrap();
    let mut child = Command::new(compile("events"))
        .arg(library())
        .env("FAKE_NVML_FIXTURE", format!("{}/tests/fixtures/health.yaml", env!("CARGO_MANIFEST_DIR")))
        .env("FAKE_NVML_EVENTS", &events)
        .env_remove("FAKE_NVML_CALLS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    while !seen.ends_with("waiting\n") {
        let before = seen.len();
        stdout.read_line(&mut seen).unwrap();
        assert!(seen.len() > before, "the client ended early: {seen}");
    }
    let mut f = std::fs::OpenOptions::new().append(true).open(&events).unwrap();
    f.write_all(
        b"# appended while the client waits\n0 xid 79\n0 xid 13\n\n0:1 xid 31\nthis is not a line\n\
          0 dbe\n0 set remapped_rows.failure true\n1 xid 48\n1 lost\n0 sbe\n",
    )
    .unwrap();
    drop(f);
    stdout.read_to_string(&mut seen).unwrap();
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(child.wait().unwrap().success());
    let expected = "\
init: 0
gpu 0 ecc mode: Success 1 1
  ecc counts: Success cv 3 uv 0 ca 12 ua 1
  bad counter type: Invalid Argument
  retired pending: Success 0
  remapped: Success 2 0 0 0
  fields: Success 31=0/0 142=0/2 143=0/0 144=0/0 145=0/0 1=3/0
  event types: Success 16395
gpu 1 ecc mode: Not Supported -1 -1
  ecc counts: Not Supported cv 0 uv 0 ca 0 ua 0
  bad counter type: Invalid Argument
  retired pending: Not Supported -1
  remapped: Not Supported 9 9 9 9
  fields: Success 31=3/0 142=3/0 143=3/0 144=3/0 145=3/0 1=3/0
  event types: Success 8
set create: 0 0
register all on gpu 0: 0
register dbe on gpu 1: Not Supported
register xid on gpu 1: 0
other set, dbe on gpu 0: 0
wait 0 ms: Timeout
waiting
event 0: gpu 0 type 8 data 79 gi -1 ci -1
event 1: gpu 0 type 8 data 13 gi -1 ci -1
event 2: gpu 0 type 8 data 31 gi 9 ci 0
event 3: gpu 0 type 2 data 0 gi -1 ci -1
event 4: gpu 1 type 8 data 48 gi -1 ci -1
event 5: gpu 0 type 1 data 0
other set: Success type 2, then Timeout
remapped after set: Success 2 0 0 1
uncorrected volatile after dbe: 1
gpu 1 after lost: GPU is lost
gpu 1 handle after lost: GPU is lost
gpu 0 still: 0
free: 0, again: Invalid Argument
shutdown: 0
";
    assert_eq!(seen, expected);
    let bad: Vec<&str> = stderr.lines().filter(|l| l.contains("this is not a line")).collect();
    assert_eq!(bad.len(), 1, "a bad line is reported once: {stderr}");
    assert!(bad[0].contains("c-events.txt"), "the report names the file: {stderr}");
}
