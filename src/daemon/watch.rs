//! Watching the directories a configuration comes from (every hop of a symlink chain, so a
//! ConfigMap's `..data` swap is seen) and turning their changes into one wake-up each.

use std::path::PathBuf;
use tokio::sync::mpsc;

/// A file watch whose set of directories follows the configuration in force.
pub struct ConfigWatch {
    /// Created when there is first something to watch (an inotify instance is a limited resource).
    watcher: Option<notify::RecommendedWatcher>,
    tx: mpsc::UnboundedSender<()>,
    watching: Vec<PathBuf>,
    changes: mpsc::UnboundedReceiver<()>,
}

impl Default for ConfigWatch {
    fn default() -> ConfigWatch {
        ConfigWatch::new()
    }
}

impl ConfigWatch {
    /// A watch on nothing yet.
    pub fn new() -> ConfigWatch {
        let (tx, changes) = mpsc::unbounded_channel();
        ConfigWatch { watcher: None, tx, watching: Vec::new(), changes }
    }

    /// Watches exactly `dirs` from now on.
    pub fn follow(&mut self, dirs: Vec<PathBuf>) -> Result<(), notify::Error> {
        use notify::Watcher;
        if dirs.is_empty() && self.watcher.is_none() {
            return Ok(());
        }
        let watcher = match &mut self.watcher {
            Some(w) => w,
            None => {
                let tx = self.tx.clone();
                let w = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                    // Our own reads show up as access events; only modifications can change the config.
                    if event.is_ok_and(|e| !matches!(e.kind, notify::EventKind::Access(_))) {
                        let _ = tx.send(());
                    }
                })?;
                self.watcher.insert(w)
            }
        };
        for d in self.watching.iter().filter(|d| !dirs.contains(d)) {
            let _ = watcher.unwatch(d);
        }
        for d in dirs.iter().filter(|d| !self.watching.contains(d)) {
            if let Err(e) = watcher.watch(d, notify::RecursiveMode::NonRecursive) {
                tracing::warn!(dir = %d.display(), error = %e, "cannot watch config directory");
            }
        }
        self.watching = dirs;
        Ok(())
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
