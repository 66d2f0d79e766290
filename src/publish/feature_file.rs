//! The NFD feature file: atomic, rewritten only when its content changes (or its expiry needs
//! refreshing), never removed when the process stops. Its first line marks it as nvlabel's, so
//! `nvlabel prune` removes only a file nvlabel wrote. Every pass checks that the file still holds
//! what was written (size, then content, reading no more than that); a file someone removed or
//! changed is restored atomically, and the daemon counts the repair as drift.

use super::render::{self as output, OutputError};
use super::{Building, DaemonWriter, FailureReason, Watches, WriterPlan};
use super::{PublishError, Writer};
use crate::exit::Classify;
use crate::labels::Labels;
use futures::future::BoxFuture;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// The first line of every feature file nvlabel writes. NFD reads `#` lines as comments (only
/// `# +` starts a directive), so the marker costs nothing and tells prune whose file it is.
pub const MARKER: &str = "# written by nvlabel; `nvlabel prune` removes this file";

/// The wall clock, replaceable so tests can move time.
pub type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// Writes `key=value` lines to one file, optionally under NFD's `# +expiry-time=` directive.
pub struct FeatureFile {
    path: PathBuf,
    expiry: Option<Duration>,
    clock: Clock,
    /// What we last wrote.
    last: Option<Written>,
}

/// The last write: its labels, the expiry it stated and the exact content.
struct Written {
    labels: Labels,
    expires: Option<SystemTime>,
    content: String,
}

/// Why prune left a feature file in place.
#[derive(Debug, thiserror::Error)]
pub enum PruneFileError {
    /// The file is someone else's.
    #[error(
        "feature file {path} was not written by nvlabel (its first line is not {MARKER:?}); left in place"
    )]
    NotOurs {
        /// The file.
        path: PathBuf,
    },
    /// Reading or removing failed.
    #[error(transparent)]
    Io(#[from] OutputError),
}

impl Classify for PruneFileError {
    fn is_bad_configuration(&self) -> bool {
        match self {
            PruneFileError::NotOurs { .. } => false,
            PruneFileError::Io(e) => e.is_bad_configuration(),
        }
    }
}

impl FeatureFile {
    /// The writer's name in logs and metrics.
    pub const NAME: &'static str = "feature-file";

    /// A writer for `path`; with `expiry`, NFD drops the labels that long after the last refresh.
    pub fn new(path: PathBuf, expiry: Option<Duration>) -> FeatureFile {
        FeatureFile::with_clock(path, expiry, Arc::new(SystemTime::now))
    }

    /// [`FeatureFile::new`] reading the time from `clock`.
    pub fn with_clock(path: PathBuf, expiry: Option<Duration>, clock: Clock) -> FeatureFile {
        FeatureFile { path, expiry, clock, last: None }
    }

    /// The file's content at `now`, and the expiry it states.
    pub fn render(&self, labels: &Labels, now: SystemTime) -> (String, Option<SystemTime>) {
        let body = output::render_text(labels);
        match self.expiry {
            None => (format!("{MARKER}\n{body}"), None),
            Some(e) => {
                let at = now + e;
                let stamp = humantime::format_rfc3339_seconds(at);
                (format!("{MARKER}\n# +expiry-time={stamp}\n{body}"), Some(at))
            }
        }
    }

    /// When the expiry must be pushed forward next: half the window before it runs out.
    fn refresh_at(&self) -> Option<SystemTime> {
        match (self.last.as_ref().and_then(|w| w.expires), self.expiry) {
            (Some(at), Some(window)) => Some(at - window / 2),
            _ => None,
        }
    }

    /// Whether a write is due: the labels changed, or less than half the expiry window is left.
    fn due(&self, labels: &Labels, now: SystemTime) -> bool {
        match &self.last {
            None => true,
            Some(last) if last.labels != *labels => true,
            _ => self.refresh_at().is_some_and(|at| now >= at),
        }
    }
}

/// Removes `path` if nvlabel wrote it; a missing file is fine. Returns whether it was removed.
pub fn prune(path: &Path) -> Result<bool, PruneFileError> {
    let io = |step: &'static str| move |source| OutputError::Write { path: path.to_path_buf(), step, source };
    // Only the first line matters: read just enough for the marker and its newline.
    let mut head = Vec::new();
    // Never a plain open: a FIFO at `-o` would block it forever.
    match output::open_regular(path) {
        Ok(Err(kind)) => return Err(OutputError::NotAFile { path: path.to_path_buf(), kind }.into()),
        Ok(Ok((f, _))) => {
            std::io::Read::read_to_end(&mut std::io::Read::take(f, MARKER.len() as u64 + 1), &mut head)
                .map_err(io("read"))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(io("open")(e).into()),
    }
    if head != format!("{MARKER}\n").as_bytes() {
        return Err(PruneFileError::NotOurs { path: path.to_path_buf() });
    }
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io("remove")(e).into()),
    }
}

/// The feature file before it is built.
pub struct FilePlan<'a> {
    /// The file.
    pub path: &'a Path,
    /// How long NFD keeps the labels after the last refresh, if it drops them.
    pub expiry: Option<Duration>,
}

impl WriterPlan for FilePlan<'_> {
    fn name(&self) -> &'static str {
        FeatureFile::NAME
    }

    fn failure_reasons(&self) -> &'static [FailureReason] {
        &[FailureReason::File, FailureReason::Setup]
    }

    fn build_daemon<'a>(
        &'a self,
        _: Option<&'a kube::Client>,
        _: &'a Watches,
    ) -> Building<'a, dyn DaemonWriter> {
        Box::pin(async move {
            let writer: Box<dyn DaemonWriter> =
                Box::new(FeatureFile::new(self.path.to_path_buf(), self.expiry));
            Ok(writer)
        })
    }
}

impl Writer for FeatureFile {
    fn name(&self) -> &'static str {
        FeatureFile::NAME
    }

    fn publish<'a>(&'a mut self, labels: &'a Labels) -> BoxFuture<'a, Result<bool, PublishError>> {
        Box::pin(async move {
            let now = (self.clock)();
            if let Some(last) = self.last.as_ref().filter(|_| !self.due(labels, now)) {
                // Nothing new to say, but the file must still say it (GFD rewrites it every pass).
                let restored = output::write_feature_file(&self.path, &last.content)?;
                if restored {
                    tracing::debug!(path = %self.path.display(), "restored the feature file");
                }
                return Ok(restored);
            }
            let (content, expires) = self.render(labels, now);
            let changed = output::write_feature_file(&self.path, &content)?;
            self.last = Some(Written { labels: labels.clone(), expires, content });
            if changed {
                tracing::debug!(path = %self.path.display(), labels = labels.len(), "wrote feature file");
            }
            Ok(changed)
        })
    }

    fn prune(&mut self) -> BoxFuture<'_, Result<(), PublishError>> {
        Box::pin(async move {
            if prune(&self.path)? {
                tracing::info!(path = %self.path.display(), "removed feature file");
            }
            Ok(())
        })
    }

    fn refresh_in(&self) -> Option<Duration> {
        let at = self.refresh_at()?;
        Some(at.duration_since((self.clock)()).unwrap_or(Duration::ZERO))
    }
}

impl DaemonWriter for FeatureFile {
    /// The file no longer holds what was last written (removed, truncated, overwritten, or
    /// replaced by something that is not a file).
    fn drifted(&self) -> bool {
        self.last.as_ref().is_some_and(|w| !output::holds(&self.path, w.content.as_bytes()).unwrap_or(false))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::publish::DaemonWriter;
    use std::sync::Mutex;

    fn labels(v: &str) -> Labels {
        Labels::from([("nvidia.com/gpu.count".to_string(), v.to_string())])
    }

    /// A clock the test moves by hand.
    fn manual(start: SystemTime) -> (Arc<Mutex<SystemTime>>, Clock) {
        let t = Arc::new(Mutex::new(start));
        let read = t.clone();
        (t, Arc::new(move || *read.lock().unwrap()))
    }

    /// A writer of `dir/gfd` with a 100 s expiry and a clock the test moves, starting at t0.
    fn expiring(dir: &Path) -> (PathBuf, SystemTime, Arc<Mutex<SystemTime>>, FeatureFile) {
        let path = dir.join("gfd");
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let (time, clock) = manual(t0);
        let w = FeatureFile::with_clock(path.clone(), Some(Duration::from_secs(100)), clock);
        (path, t0, time, w)
    }

    fn expiry_of(path: &Path) -> SystemTime {
        let text = std::fs::read_to_string(path).unwrap();
        let line = text.lines().find_map(|l| l.strip_prefix("# +expiry-time=")).expect("an expiry line");
        humantime::parse_rfc3339(line).unwrap()
    }

    #[test]
    fn marker_then_expiry_line_come_first() {
        let w = FeatureFile::new("/x".into(), Some(Duration::from_secs(3600)));
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_000_000);
        let (text, _) = w.render(&labels("8"), now);
        assert_eq!(text, format!("{MARKER}\n# +expiry-time=2026-11-18T12:06:40Z\nnvidia.com/gpu.count=8\n"));
    }

    #[tokio::test]
    async fn publish_keeps_the_expiry_in_the_future_as_time_advances() {
        let dir = tempfile::tempdir().unwrap();
        let (path, t0, time, mut w) = expiring(dir.path());
        assert!(w.publish(&labels("1")).await.unwrap());
        assert_eq!(expiry_of(&path), t0 + Duration::from_secs(100));
        assert_eq!(w.refresh_in(), Some(Duration::from_secs(50)), "the daemon is told when to refresh");
        // Every 10 s of a labeler whose passes are far apart: the file never expires.
        for step in 1..=100u64 {
            *time.lock().unwrap() = t0 + Duration::from_secs(step * 10);
            if w.refresh_in() == Some(Duration::ZERO) {
                assert!(w.publish(&labels("1")).await.unwrap(), "a due refresh rewrites the file");
            }
            let now = *time.lock().unwrap();
            assert!(expiry_of(&path) > now, "at +{}s the file has expired", step * 10);
            assert!(w.refresh_in().unwrap() <= Duration::from_secs(50));
        }
        assert_eq!(
            expiry_of(&path),
            t0 + Duration::from_secs(1000 + 100),
            "refreshed every 50 s, last at +1000 s"
        );
    }

    #[tokio::test]
    async fn unchanged_labels_are_not_rewritten_before_the_refresh_is_due() {
        let dir = tempfile::tempdir().unwrap();
        let (_, t0, time, mut w) = expiring(dir.path());
        assert!(w.publish(&labels("1")).await.unwrap());
        *time.lock().unwrap() = t0 + Duration::from_secs(49);
        assert!(!w.publish(&labels("1")).await.unwrap());
        assert!(w.publish(&labels("2")).await.unwrap(), "changed labels are written at once");
        let mut plain = FeatureFile::new(dir.path().join("plain"), None);
        assert!(plain.publish(&labels("1")).await.unwrap());
        assert_eq!(plain.refresh_in(), None, "without --expiry there is nothing to refresh");
    }

    #[tokio::test]
    async fn writes_atomically_and_only_on_change() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gfd");
        let mut w = FeatureFile::new(path.clone(), None);
        assert!(w.publish(&labels("1")).await.unwrap());
        assert!(!w.publish(&labels("1")).await.unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("{MARKER}\nnvidia.com/gpu.count=1\n"));
    }

    #[tokio::test]
    async fn a_removed_or_overwritten_file_is_restored_on_the_next_publish() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gfd");
        let mut w = FeatureFile::new(path.clone(), None);
        assert!(w.publish(&labels("1")).await.unwrap());
        let written = std::fs::read_to_string(&path).unwrap();
        assert!(!w.drifted());
        type Damage = fn(&Path);
        let damage: [(&str, Damage); 4] = [
            ("removed", |p| std::fs::remove_file(p).unwrap()),
            ("emptied", |p| std::fs::write(p, "").unwrap()),
            ("same size, other content", |p| {
                std::fs::write(p, format!("{MARKER}\nnvidia.com/gpu.count=7\n")).unwrap()
            }),
            ("longer", |p| std::fs::write(p, "x".repeat(1 << 20)).unwrap()),
        ];
        for (how, damage) in damage {
            damage(&path);
            assert!(w.drifted(), "{how}: the damage is seen");
            assert!(w.publish(&labels("1")).await.unwrap(), "{how}: restoring is a write");
            assert_eq!(std::fs::read_to_string(&path).unwrap(), written, "{how}");
            assert!(!w.drifted(), "{how}: restored");
            assert!(!w.publish(&labels("1")).await.unwrap(), "{how}: then nothing to do");
        }
    }

    #[tokio::test]
    async fn a_restored_file_keeps_the_expiry_it_stated() {
        let dir = tempfile::tempdir().unwrap();
        let (path, t0, time, mut w) = expiring(dir.path());
        assert!(w.publish(&labels("1")).await.unwrap());
        *time.lock().unwrap() = t0 + Duration::from_secs(10);
        std::fs::remove_file(&path).unwrap();
        assert!(w.publish(&labels("1")).await.unwrap());
        assert_eq!(expiry_of(&path), t0 + Duration::from_secs(100), "the same file, not a refresh");
    }

    #[tokio::test]
    async fn prune_removes_only_a_file_nvlabel_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let ours = dir.path().join("nvlabel");
        FeatureFile::new(ours.clone(), Some(Duration::from_secs(60))).publish(&labels("1")).await.unwrap();
        assert!(prune(&ours).unwrap());
        assert!(!ours.exists());
        assert!(!prune(&ours).unwrap(), "a missing file is already pruned");
        let theirs = dir.path().join("gfd");
        std::fs::write(&theirs, "nvidia.com/gpu.count=1\n").unwrap();
        let err = prune(&theirs).unwrap_err().to_string();
        assert!(
            err.contains(&theirs.display().to_string()) && err.contains("not written by nvlabel"),
            "{err}"
        );
        assert!(theirs.exists(), "someone else's file stays");
        // A FIFO at -o would block a plain open forever: refused at once, and left in place.
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let err = prune(&fifo).unwrap_err().to_string();
        assert!(err.contains("it is a FIFO, not a regular file"), "{err}");
        assert!(fifo.exists());
    }
}
