//! The feature file (`-o`) as a process sees it: a file removed or overwritten under the daemon is
//! restored on the next pass and counted, and what is at the path is read within a limit and
//! must be a regular file.

use crate::common;

use common::*;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;

/// GETs `path` from the daemon's HTTP endpoint at `addr`.
fn get(addr: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    std::io::Write::write_all(&mut s, request.as_bytes()).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text
}

/// Waits (bounded, 30 s) until `path` holds exactly `text`.
fn wait_for_content(path: &Path, text: &str) {
    for _ in 0..600 {
        if std::fs::read_to_string(path).is_ok_and(|t| t == text) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("{} was never restored: {:?}", path.display(), std::fs::read_to_string(path));
}

#[test]
fn a_feature_file_removed_or_overwritten_is_restored_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gfd");
    let mut child = nvlabel(Some("t4"))
        .env("RUST_LOG", "info")
        .args(["--no-timestamp", "--use-node-feature-api=false", "--sleep-interval", "1s"])
        .args(["--log-format", "json", "-o"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = served_addr(&mut lines);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || lines.map_while(Result::ok).for_each(|l| drop(tx.send(l))));
    let written = wait_for_line(&out, "nvidia.com/gpu.count=1");

    std::fs::remove_file(&out).unwrap();
    wait_for_content(&out, &written);
    // Someone else's labeler writes its own file over ours.
    std::fs::write(&out, "nvidia.com/gpu.count=9\n").unwrap();
    wait_for_content(&out, &written);

    // The file is back a moment before the repair is counted (the count follows the write).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut metrics = get(&addr, "/metrics");
    while !metrics.contains("nvlabel_drift_repairs_total 2\n") && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        metrics = get(&addr, "/metrics");
    }
    assert!(metrics.contains("nvlabel_drift_repairs_total 2\n"), "{metrics}");
    assert!(get(&addr, "/readyz").starts_with("HTTP/1.1 200"));
    assert_eq!(stop_with(&mut child, "-TERM").code(), Some(0));
    // Every line up to the exit: the reader ends at EOF, once the process is gone.
    let logs: Vec<String> = rx.iter().collect();
    let restored = logs.iter().filter(|l| l.contains("someone changed nvlabel's labels; put them back"));
    assert_eq!(restored.count(), 2, "each repair is logged once:\n{}", logs.join("\n"));
    assert_eq!(
        logs.iter().filter(|l| l.contains("\"published labels\"")).count(),
        1,
        "the first write only; a repair is not reported as new labels:\n{}",
        logs.join("\n")
    );
}

/// Runs `nvlabel --oneshot -o <path>` with its address space capped at 1 GiB, so reading an
/// endless device whole fails at once instead of eating the machine.
fn oneshot_to(path: &Path) -> (i32, String, String) {
    let mut cmd = nvlabel(Some("t4"));
    cmd.args(["--oneshot", "--no-timestamp", "--use-node-feature-api=false", "-o"]).arg(path);
    // SAFETY: setrlimit is async-signal-safe and touches only the child.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit { rlim_cur: 1 << 30, rlim_max: 1 << 30 };
            match libc::setrlimit(libc::RLIMIT_AS, &limit) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            }
        });
    }
    run(&mut cmd)
}

#[test]
fn a_device_or_fifo_at_the_output_path_is_an_error_that_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    // `-o /dev/full`, through a link: should the guard break, a test run as root replaces the
    // link, never the machine's /dev/full.
    let full = dir.path().join("full");
    std::os::unix::fs::symlink("/dev/full", &full).unwrap();
    for (path, kind) in [(full.as_path(), "character device"), (fifo.as_path(), "FIFO")] {
        let (code, stdout, stderr) = oneshot_to(path);
        assert_eq!(code, 1, "{path:?}: {stderr}");
        assert_eq!(stdout, "");
        let want =
            format!("cannot write the feature file {}: it is a {kind}, not a regular file", path.display());
        assert!(stderr.contains(&want), "{path:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    }
    let full = Path::new("/dev/full").metadata().unwrap().file_type();
    assert!(std::os::unix::fs::FileTypeExt::is_char_device(&full), "/dev/full was never replaced");
}

#[test]
fn stdout_on_a_full_device_fails_with_a_message() {
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let output = nvlabel(Some("t4")).args(PRINT).stdout(full).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot write labels to stdout: No space left on device"), "{stderr}");
}

#[test]
fn a_huge_file_at_the_output_path_is_replaced_without_being_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gfd");
    // 300 MB (sparse): read whole to compare, it would cost 300 MB of memory.
    std::fs::File::create(&out).unwrap().set_len(300 << 20).unwrap();
    // At most 64 MiB of data: reading the file whole would fail. (A child's peak RSS cannot tell:
    // it starts from what this test binary held when it spawned the child.)
    let mut cmd = nvlabel(Some("t4"));
    cmd.args(["--oneshot", "--no-timestamp", "--use-node-feature-api=false", "-o"]).arg(&out);
    // SAFETY: the closure only calls setrlimit, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit { rlim_cur: 64 << 20, rlim_max: 64 << 20 };
            if libc::setrlimit(libc::RLIMIT_DATA, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let (code, _, stderr) = run(&mut cmd);
    assert_eq!(code, 0, "{stderr}");
    assert!(std::fs::read_to_string(&out).unwrap().contains("nvidia.com/gpu.count=1\n"));
}
