//! One object watched by name (this Node, or this node's NodeFeature object): the state the API
//! server last reported, kept current by a watch, so a pass that changes nothing sends nothing and
//! a change someone else makes is seen within moments.
//!
//! Any watch error (a `410 Gone`, a "too large resource version" from a server whose store was
//! reset, a refused or cut connection, an answer over the size limit) ends the watch, and a new
//! one starts with a fresh list, never resuming at a resourceVersion the server may no longer
//! know; so does an object whose resourceVersion goes backwards (a new store). Restarts wait with
//! the full-jitter backoff, reset only once a list succeeds, so a lasting refusal (403, 404) is
//! retried less and less often, up to minutes, and after an API server restart the watchers of
//! many nodes spread their relists over seconds; [`ObjectWatch::retry_now`] cuts the wait short
//! once another request shows the cause is gone. A failure is logged when it starts and when it
//! ends, not on every attempt.

use super::backoff::FullJitter;
use futures::StreamExt;
use kube::runtime::watcher;
use kube::Api;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::sync::Notify;

/// What is known of the object.
#[derive(Debug, Clone, PartialEq)]
pub enum Seen<K> {
    /// The watch has not listed yet (or never could): decide by reading.
    Unknown,
    /// The object does not exist.
    Absent,
    /// The object as last reported.
    Present(K),
}

/// A watched object; cheap to clone, every clone sees the same state.
#[derive(Clone)]
pub struct ObjectWatch<K> {
    rx: watch::Receiver<Seen<K>>,
    /// Counts changes, in a type that does not depend on `K`, for whoever only needs "changed".
    version: watch::Receiver<u64>,
    /// Cuts a restart's backoff short.
    kick: Arc<Notify>,
}

impl<K> ObjectWatch<K>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
{
    /// Watches `name` through `api` in a background task that ends when every handle is dropped.
    pub fn spawn(api: Api<K>, name: &str) -> ObjectWatch<K> {
        let (tx, rx) = watch::channel(Seen::Unknown);
        let (versions, version) = watch::channel(0u64);
        let kick = Arc::new(Notify::new());
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let name = name.to_string();
        let wake = kick.clone();
        tokio::spawn(async move {
            let mut backoff = FullJitter::default();
            let mut failing: Option<String> = None;
            loop {
                let mut events = watcher(api.clone(), config.clone()).boxed();
                let mut listing: Option<K> = None;
                let mut newest: Option<u64> = None;
                let ended = loop {
                    let event = tokio::select! {
                        event = events.next() => event,
                        () = tx.closed() => return,
                    };
                    let seen = match event {
                        None => break None,
                        Some(Err(e)) => break Some(super::errors::excerpt(&crate::logging::error_chain(&e))),
                        Some(Ok(watcher::Event::Init)) => {
                            listing = None;
                            continue;
                        }
                        Some(Ok(watcher::Event::InitApply(obj))) => {
                            listing = Some(obj);
                            continue;
                        }
                        Some(Ok(watcher::Event::InitDone)) => {
                            backoff.reset();
                            if let Some(error) = failing.take() {
                                tracing::info!(object = %name, %error, "resolved: the watch works again");
                            }
                            newest = listing.as_ref().and_then(resource_version);
                            listing.take().map_or(Seen::Absent, Seen::Present)
                        }
                        Some(Ok(watcher::Event::Apply(obj))) => {
                            let rv = resource_version(&obj);
                            if let (Some(rv), Some(before)) = (rv, newest) {
                                if rv < before {
                                    break Some(format!("resourceVersion went back from {before} to {rv}: the API server's store was reset"));
                                }
                            }
                            newest = rv.or(newest);
                            Seen::Present(obj)
                        }
                        Some(Ok(watcher::Event::Delete(_))) => Seen::Absent,
                    };
                    if tx.send(seen).is_err() {
                        return;
                    }
                    versions.send_modify(|v| *v += 1);
                };
                let wait = backoff.next().unwrap_or_default();
                if let Some(error) = ended {
                    if failing.is_none() {
                        tracing::warn!(object = %name, %error, "the watch failed; relisting with backoff until it works");
                    }
                    failing = Some(error);
                }
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = wake.notified() => {}
                    () = tx.closed() => return,
                }
            }
        });
        ObjectWatch { rx, version, kick }
    }
}

/// An object's resourceVersion as a number. The API server treats it as opaque for ordering,
/// but every real store (etcd's revision) gives increasing integers; one that is not a number is
/// never compared.
pub fn resource_version<K: kube::Resource>(obj: &K) -> Option<u64> {
    obj.meta().resource_version.as_deref()?.parse().ok()
}

impl<K: Clone> ObjectWatch<K> {
    /// Restarts a failed watch now instead of after its backoff: another request just succeeded,
    /// so the cause (RBAC, the API server) is likely gone. Nothing happens to a working watch.
    pub fn retry_now(&self) {
        self.kick.notify_one();
    }

    /// The state now.
    pub fn seen(&self) -> Seen<K> {
        self.rx.borrow().clone()
    }

    /// A receiver of every change from now on (`changed()` on it misses none: changes while
    /// nobody waits collapse into one); independent of this handle.
    pub fn changes(&self) -> watch::Receiver<u64> {
        let mut version = self.version.clone();
        version.borrow_and_update();
        version
    }

    /// Waits for the next change (forever once the watch has ended).
    pub async fn changed(&mut self) {
        if self.rx.changed().await.is_err() {
            futures::future::pending::<()>().await;
        }
    }
}
