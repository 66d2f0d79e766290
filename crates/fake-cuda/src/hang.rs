//! `- hang cuInit <seconds>` lines of the `FAKE_NVML_EVENTS` file (the one the NVML fake follows):
//! from then on `cuInit` blocks that long before it answers, without the library's lock, so a
//! test can prove that a hung CUDA init stalls only the side that called it. `- hang cuInit 0`
//! ends it, for a call already blocked too.
//!
//! The whole file is read at each `cuInit` (nvlabel calls it once per process, so the line is
//! usually written before the client starts), and again every [`STEP`] while a call blocks. The
//! last `hang cuInit` line wins. Every other line is the NVML fake's and is ignored here; a
//! `hang cuInit` line this library cannot use is reported on stderr once and skipped.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often a blocked `cuInit` reads the file again: well inside the 50 ms the NVML fake's
/// lines are seen within.
pub const STEP: Duration = Duration::from_millis(10);

/// The `hang cuInit` lines already reported as unusable, so each is said once.
static REPORTED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// How long a `cuInit` blocks by the file's text: the last `hang cuInit` line's time, `None`
/// where there is none or it says 0. `bad` is told each unusable `hang cuInit` line and why.
pub fn parse(text: &str, mut bad: impl FnMut(&str, String)) -> Option<Duration> {
    let mut time = None;
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let [target, "hang", "cuInit", rest @ ..] = words.as_slice() else { continue };
        match (*target, rest) {
            ("-", [seconds]) => match seconds_of(seconds) {
                Ok(t) => time = Some(t),
                Err(e) => bad(line, e),
            },
            ("-", _) => bad(line, "expected `- hang cuInit <seconds>`".into()),
            (t, _) => bad(line, format!("cuInit takes no GPU: write `-`, not {t:?}")),
        }
    }
    time.filter(|t: &Duration| !t.is_zero())
}

/// `<seconds>`: a non-negative number (`0.5` works).
fn seconds_of(text: &str) -> Result<Duration, String> {
    text.parse::<f64>()
        .ok()
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .ok_or_else(|| format!("hang takes seconds (0 ends it), not {text:?}"))
}

/// How long a `cuInit` blocks now, by the file `FAKE_NVML_EVENTS` names (none: no hang).
fn now() -> Option<Duration> {
    let path = std::env::var("FAKE_NVML_EVENTS").ok().filter(|p| !p.is_empty())?;
    let bytes = std::fs::read(&path).ok()?;
    parse(&String::from_utf8_lossy(&bytes), |line, why| {
        let mut reported = REPORTED.lock().unwrap_or_else(|p| p.into_inner());
        if reported.insert(line.to_string()) {
            eprintln!("fake-cuda: {path}: skipping line {line:?}: {why}");
        }
    })
}

/// Blocks the calling `cuInit` while a `hang cuInit` line holds it (the caller holds no lock).
pub fn wait() {
    let Some(time) = now() else { return };
    // Tests wait for this line to know the call is blocked before they go on.
    eprintln!("fake-cuda: cuInit hangs for {} s", time.as_secs_f64());
    let started = Instant::now();
    while let Some(time) = now() {
        let left = time.saturating_sub(started.elapsed());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(STEP));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hang(text: &str) -> (Option<Duration>, Vec<String>) {
        let mut bad = Vec::new();
        let time = parse(text, |line, why| bad.push(format!("{line}: {why}")));
        (time, bad)
    }

    #[test]
    fn the_last_hang_cuinit_line_wins_and_zero_ends_it() {
        assert_eq!(hang(""), (None, vec![]));
        assert_eq!(hang("- hang cuInit 5\n"), (Some(Duration::from_secs(5)), vec![]));
        assert_eq!(hang("- hang cuInit 5\n  - hang cuInit 0.5  \n").0, Some(Duration::from_millis(500)));
        assert_eq!(hang("- hang cuInit 5\n- hang cuInit 0\n"), (None, vec![]));
        assert_eq!(hang("# - hang cuInit 5\n").0, None);
    }

    #[test]
    fn the_nvml_fakes_lines_are_ignored() {
        let text =
            "0 xid 79\n- hang nvmlInit_v2 8\n0 hang nvmlDeviceGetName 3\n\n0 set inforom_valid false\n";
        assert_eq!(hang(text), (None, vec![]));
    }

    #[test]
    fn an_unusable_hang_cuinit_line_is_reported_and_skipped() {
        let (time, bad) = hang("- hang cuInit 4\n- hang cuInit soon\n0 hang cuInit 9\n- hang cuInit\n");
        assert_eq!(time, Some(Duration::from_secs(4)), "the last usable line holds");
        assert_eq!(
            bad,
            [
                "- hang cuInit soon: hang takes seconds (0 ends it), not \"soon\"",
                "0 hang cuInit 9: cuInit takes no GPU: write `-`, not \"0\"",
                "- hang cuInit: expected `- hang cuInit <seconds>`",
            ]
        );
        assert_eq!(hang("- hang cuInit -1\n").1.len(), 1, "no negative time");
    }
}
