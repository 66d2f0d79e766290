//! Watching the directories a configuration comes from (every hop of a symlink chain, so a
//! ConfigMap's `..data` swap is seen) and turning their changes into one wake-up each.

use std::path::PathBuf;
use tokio::sync::mpsc;

/// A file watch whose set of directories follows the configuration in force.
pub struct ConfigWatch {
    watcher: notify::RecommendedWatcher,
    watching: Vec<PathBuf>,
    changes: mpsc::UnboundedReceiver<()>,
}

impl ConfigWatch {
    /// A watch on nothing yet.
    pub fn new() -> Result<ConfigWatch, notify::Error> {
        let (tx, changes) = mpsc::unbounded_channel();
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            // Our own reads show up as access events; only modifications can change the config.
            if event.is_ok_and(|e| !matches!(e.kind, notify::EventKind::Access(_))) {
                let _ = tx.send(());
            }
        })?;
        Ok(ConfigWatch { watcher, watching: Vec::new(), changes })
    }

    /// Watches exactly `dirs` from now on.
    pub fn follow(&mut self, dirs: Vec<PathBuf>) {
        use notify::Watcher;
        for d in self.watching.iter().filter(|d| !dirs.contains(d)) {
            let _ = self.watcher.unwatch(d);
        }
        for d in dirs.iter().filter(|d| !self.watching.contains(d)) {
            if let Err(e) = self.watcher.watch(d, notify::RecursiveMode::NonRecursive) {
                tracing::warn!(dir = %d.display(), error = %e, "cannot watch config directory");
            }
        }
        self.watching = dirs;
    }

    /// The next change; one edit fires several events, so they are let settle and taken as one.
    pub async fn changed(&mut self) {
        if self.changes.recv().await.is_none() {
            return futures::future::pending().await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        while self.changes.try_recv().is_ok() {}
    }
}
