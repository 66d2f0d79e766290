//! `hang` lines in the event file, driven from a threaded C client: a hung call blocks without
//! holding the library's lock, so calls of other functions, on other GPUs and the event wait
//! answer meanwhile; `hang ... 0` ends it. The order is checked, never a duration: the hangs
//! are long, the test waits for the library to say each call is blocked, and ends them itself.

mod common;

use common::{compile, library};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdout, Command, Stdio};
use std::sync::mpsc::Receiver;

/// Reads `from` up to and including the line that starts with `last`, appending to `seen`.
fn read_until(from: &mut BufReader<ChildStdout>, last: &str, seen: &mut String) {
    loop {
        let mut line = String::new();
        from.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "the client ended before {last:?}: {seen}");
        seen.push_str(&line);
        if line.starts_with(last) {
            return;
        }
    }
}

/// Reads stderr's lines until the library has said that both long hangs began; a hung call
/// that returns first (the client says so on stderr too) or a refused hang line fails.
fn wait_for_hangs(from: &Receiver<String>, said: &mut Vec<String>) {
    while said.iter().filter(|l| l.contains("hangs for 300 s")).count() < 2 {
        let line = from.recv().unwrap_or_else(|_| panic!("the client ended without the hangs: {said:?}"));
        assert!(!line.contains("returned"), "a call returned instead of hanging: {said:?} {line}");
        assert!(!line.contains("300\": "), "a valid hang line was refused: {line}");
        said.push(line);
    }
}

fn append(events: &Path, text: &str) {
    std::fs::OpenOptions::new().append(true).open(events).unwrap().write_all(text.as_bytes()).unwrap();
}

#[test]
fn a_hung_call_blocks_only_itself_until_its_hang_ends() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let events = dir.join("c-hang.txt");
    std::fs::write(&events, "").unwrap();
    let mut child = Command::new(compile("hang"))
        .arg(library())
        .env("FAKE_NVML_FIXTURE", format!("{}/tests/fixtures/health.yaml", env!("CARGO_MANIFEST_DIR")))
        .env("FAKE_NVML_EVENTS", &events)
        .env_remove("FAKE_NVML_CALLS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let (tx, lines) = std::sync::mpsc::channel();
    let reader =
        std::thread::spawn(move || stderr.lines().map_while(Result::ok).try_for_each(|l| tx.send(l)));
    let mut seen = String::new();
    read_until(&mut stdout, "ready", &mut seen);

    append(
        &events,
        "0 hang nvmlDeviceGetName 300\n- hang nvmlSystemGetDriverVersion 300\n0 hang nvmlNoSuchFunction 1\n\
         0 hang nvmlDeviceGetName soon\n1 hang nvmlDeviceGetName -1\n0:1 hang nvmlDeviceGetName 1\n\
         0 hang nvmlDeviceGetName\n",
    );
    stdin.write_all(b"start\n").unwrap();
    let mut said = Vec::new();
    wait_for_hangs(&lines, &mut said);

    // Both threads are blocked now; every other call must answer at once (with the lock held
    // by a hung call, they would wait the full 300 s and the hung calls would be done).
    stdin.write_all(b"others\n").unwrap();
    read_until(&mut stdout, "still hung", &mut seen);

    append(&events, "0 hang nvmlDeviceGetName 0\n- hang nvmlSystemGetDriverVersion 0\n");
    stdin.write_all(b"release\n").unwrap();
    read_until(&mut stdout, "driver version", &mut seen);

    append(&events, "- hang nvmlDeviceGetCount_v2 0.05\n");
    stdin.write_all(b"again\n").unwrap();
    stdout.read_to_string(&mut seen).unwrap();
    assert!(child.wait().unwrap().success(), "{seen}");
    let _ = reader.join().unwrap();
    said.extend(lines.try_iter());

    let expected = "\
init: 0
handle 0: 0
handle 1: 0
set create: 0
ready
gpu 0 uuid: Success GPU-6b5a0000-fa4e-4000-8000-000000000000
gpu 1 name: Success Tesla T4
count: Success 2
wait 0 ms: Timeout
still hung: gpu 0 name yes, driver version yes
gpu 0 name: Success NVIDIA H100 80GB HBM3
driver version: Success 550.54.15
gpu 0 name again: Success NVIDIA H100 80GB HBM3
count after a short hang: Success 2
shutdown: 0
";
    assert_eq!(seen, expected);
    let path = events.display();
    let mut want = vec![
        format!("fake-nvml: {path}: skipping line \"0 hang nvmlNoSuchFunction 1\": \"nvmlNoSuchFunction\" is not a function this library exports"),
        format!("fake-nvml: {path}: skipping line \"0 hang nvmlDeviceGetName soon\": hang takes seconds (0 ends it), not \"soon\""),
        format!("fake-nvml: {path}: skipping line \"1 hang nvmlDeviceGetName -1\": hang takes seconds (0 ends it), not \"-1\""),
        format!("fake-nvml: {path}: skipping line \"0:1 hang nvmlDeviceGetName 1\": hang applies to GPU 0 or `-`, not a MIG device"),
        format!("fake-nvml: {path}: skipping line \"0 hang nvmlDeviceGetName\": expected `<gpu or -> hang <nvml function> <seconds>`"),
        "fake-nvml: nvmlDeviceGetName on GPU 0 hangs for 300 s".to_string(),
        "fake-nvml: nvmlSystemGetDriverVersion hangs for 300 s".to_string(),
        "client: gpu 0 name returned".to_string(),
        "client: driver version returned".to_string(),
        // Once each: `hang ... 0` ended them, so the later name call did not hang again.
        "fake-nvml: nvmlDeviceGetCount_v2 hangs for 0.05 s".to_string(),
    ];
    // The two threads' lines come in either order.
    want.sort();
    said.sort();
    assert_eq!(said, want);
}
