//! The NFD feature file: atomic, rewritten only when its content changes (or its expiry needs
//! refreshing), never removed when the process stops.

use super::{PublishError, Writer};
use crate::labels::Labels;
use crate::output;
use futures::future::BoxFuture;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// Writes `key=value` lines to one file, optionally under NFD's `# +expiry-time=` directive.
pub struct FeatureFile {
    path: PathBuf,
    expiry: Option<Duration>,
    /// What we last wrote: the labels and the expiry it carried.
    last: Option<(Labels, Option<SystemTime>)>,
}

impl FeatureFile {
    /// A writer for `path`; with `expiry`, NFD drops the labels that long after the last refresh.
    pub fn new(path: PathBuf, expiry: Option<Duration>) -> FeatureFile {
        FeatureFile { path, expiry, last: None }
    }

    /// The file's content at `now`, and the expiry it states.
    pub fn render(&self, labels: &Labels, now: SystemTime) -> (String, Option<SystemTime>) {
        let body = output::render_text(labels);
        match self.expiry {
            None => (body, None),
            Some(e) => {
                let at = now + e;
                (format!("# +expiry-time={}\n{body}", humantime::format_rfc3339_seconds(at)), Some(at))
            }
        }
    }

    /// Whether a write is due: the labels changed, or less than half the expiry window is left.
    fn due(&self, labels: &Labels, now: SystemTime) -> bool {
        match (&self.last, self.expiry) {
            (None, _) => true,
            (Some((last, _)), _) if last != labels => true,
            (Some((_, Some(at))), Some(window)) => {
                at.duration_since(now).map_or(true, |left| left < window / 2)
            }
            _ => false,
        }
    }
}

impl Writer for FeatureFile {
    fn name(&self) -> &'static str {
        "feature-file"
    }

    fn publish<'a>(&'a mut self, labels: &'a Labels) -> BoxFuture<'a, Result<bool, PublishError>> {
        Box::pin(async move {
            let now = SystemTime::now();
            if !self.due(labels, now) {
                return Ok(false);
            }
            let (content, at) = self.render(labels, now);
            let changed = output::write_feature_file(&self.path, &content)?;
            self.last = Some((labels.clone(), at));
            if changed {
                tracing::debug!(path = %self.path.display(), labels = labels.len(), "wrote feature file");
            }
            Ok(changed)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(v: &str) -> Labels {
        Labels::from([("nvidia.com/gpu.count".to_string(), v.to_string())])
    }

    #[test]
    fn expiry_line_comes_first() {
        let w = FeatureFile::new("/x".into(), Some(Duration::from_secs(3600)));
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_000_000);
        let (text, _) = w.render(&labels("8"), now);
        assert_eq!(text, "# +expiry-time=2026-11-18T12:06:40Z\nnvidia.com/gpu.count=8\n");
    }

    #[test]
    fn rewrites_when_labels_change_or_expiry_runs_low() {
        let mut w = FeatureFile::new("/x".into(), Some(Duration::from_secs(100)));
        let t0 = SystemTime::now();
        assert!(w.due(&labels("1"), t0));
        w.last = Some((labels("1"), Some(t0 + Duration::from_secs(100))));
        assert!(!w.due(&labels("1"), t0 + Duration::from_secs(10)));
        assert!(w.due(&labels("2"), t0 + Duration::from_secs(10)));
        assert!(w.due(&labels("1"), t0 + Duration::from_secs(60)), "refresh past half the window");
        let mut plain = FeatureFile::new("/x".into(), None);
        plain.last = Some((labels("1"), None));
        assert!(!plain.due(&labels("1"), t0 + Duration::from_secs(1_000_000)));
    }

    #[tokio::test]
    async fn writes_atomically_and_only_on_change() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gfd");
        let mut w = FeatureFile::new(path.clone(), None);
        assert!(w.publish(&labels("1")).await.unwrap());
        assert!(!w.publish(&labels("1")).await.unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "nvidia.com/gpu.count=1\n");
    }
}
