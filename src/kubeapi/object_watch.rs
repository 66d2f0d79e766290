//! One object watched by name (this Node, or this node's NodeFeature object): the state the API
//! server last reported, kept current by a watch, so a pass that changes nothing sends nothing and
//! a change someone else makes is seen within moments.
//!
//! A plain list-then-watch of one object, so every way a watch can end is decided here:
//! - the server ends it after its timeout (290 s): watch again from the last resourceVersion;
//! - anything else (a cut or reset connection, an idle stream, a `410 Gone`, any error, an answer
//!   over the size limit, a resourceVersion going backwards): relist, never resuming at a
//!   resourceVersion a restarted API server with a new store may not know (it would accept the
//!   watch and deliver nothing until its store caught up).
//!
//! Relists wait a uniform random time in `[0, 8 s)` (full jitter whose window never grows), so
//! after an API server restart the watchers of many nodes spread over eight seconds, and whatever
//! the fault was (the server away for minutes, a 403 until RBAC is restored, a CRD installed
//! late) the object is listed again within eight seconds of its end (labels are right within
//! ten), at a bounded rate meanwhile (a refused or failed list is cheap for the server). The
//! backoff starts over as soon as a list succeeds or an event arrives. [`ObjectWatch::retry_now`]
//! cuts a wait short once another request shows the cause is gone. A failure is logged when it
//! starts, reminded of at most once a minute, and logged as resolved once a list and a watch work
//! again.

use super::backoff::FullJitter;
use futures::StreamExt;
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::Api;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

/// The watch timeout asked of the server.
pub(super) const WATCH_TIMEOUT: u32 = 290;
/// A watch that ends sooner than this ended early: relist.
pub(super) const NORMAL_END: Duration = Duration::from_secs(280);
/// A watch silent for this long (no event, no bookmark) is dead.
pub(super) const IDLE: Duration = Duration::from_secs(WATCH_TIMEOUT as u64 + 30);
/// The relists' backoff: every wait in `[0, 8 s)`, however long the failure lasts, so the end of
/// any fault is seen within eight seconds and the labels are right within ten.
pub(super) const BACKOFF: FullJitter = FullJitter::new(Duration::from_secs(8), Duration::from_secs(8));
/// A failure that goes on is logged again at most this often.
const REMIND_EVERY: Duration = Duration::from_secs(60);

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

/// What can be watched: a named API object that can be cloned, logged and sent across tasks.
pub trait Watched:
    kube::Resource<DynamicType = ()>
    + Clone
    + std::fmt::Debug
    + serde::de::DeserializeOwned
    + Send
    + Sync
    + 'static
{
}

impl<K> Watched for K where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static
{
}

/// A watched object; cheap to clone, every clone sees the same state.
#[derive(Clone)]
pub struct ObjectWatch<K> {
    rx: watch::Receiver<Seen<K>>,
    /// Counts changes, in a type that does not depend on `K`, for whoever only needs "changed".
    version: watch::Receiver<u64>,
    /// Cuts a restart's backoff short.
    kick: Arc<Notify>,
    /// Whether the state is current: listed, with no failure since.
    live: Arc<AtomicBool>,
}

impl<K: Watched> ObjectWatch<K> {
    /// Watches `name` through `api` in a background task that ends when every handle is dropped.
    pub fn spawn(api: Api<K>, name: &str) -> ObjectWatch<K> {
        ObjectWatch::spawn_with_jitter(api, name, rand::random::<f64>)
    }

    /// [`ObjectWatch::spawn`], drawing the relists' jitter with `draw` (a number in `[0, 1)`), so
    /// tests can wait out the longest backoff exactly.
    pub fn spawn_with_jitter(api: Api<K>, name: &str, draw: fn() -> f64) -> ObjectWatch<K> {
        let (tx, rx) = watch::channel(Seen::Unknown);
        let (versions, version) = watch::channel(0u64);
        let kick = Arc::new(Notify::new());
        let live = Arc::new(AtomicBool::new(false));
        let state = Follow {
            api,
            name: name.to_string(),
            tx,
            versions,
            kick: kick.clone(),
            live: live.clone(),
            draw,
        };
        tokio::spawn(state.run());
        ObjectWatch { rx, version, kick, live }
    }
}

/// The task behind an [`ObjectWatch`].
struct Follow<K> {
    api: Api<K>,
    name: String,
    tx: watch::Sender<Seen<K>>,
    versions: watch::Sender<u64>,
    kick: Arc<Notify>,
    live: Arc<AtomicBool>,
    draw: fn() -> f64,
}

/// A failure in force: logged when it starts, reminded of at most once a minute.
struct Failing {
    error: String,
    since: Instant,
    reminded: Instant,
}

/// How one list-and-watch round ended.
enum Ended {
    /// Every handle was dropped.
    Closed,
    /// Something went wrong: relist after the backoff.
    Failed(String),
}

impl<K: Watched> Follow<K> {
    async fn run(self) {
        let mut backoff = BACKOFF;
        let mut failing: Option<Failing> = None;
        loop {
            let error = match self.round(&mut backoff, &mut failing).await {
                Ended::Closed => return,
                Ended::Failed(error) => error,
            };
            self.live.store(false, Ordering::Relaxed);
            let wait = backoff.next_with((self.draw)());
            let now = Instant::now();
            match failing.as_mut() {
                None => {
                    tracing::warn!(
                        object = %self.name,
                        server = super::errors::server(),
                        %error,
                        retry_in_ms = wait.as_millis() as u64,
                        "the watch failed; listing again every few seconds until it works"
                    );
                    failing = Some(Failing { error, since: now, reminded: now });
                }
                Some(f) => {
                    if now.duration_since(f.reminded) >= REMIND_EVERY {
                        tracing::warn!(
                            object = %self.name,
                            server = super::errors::server(),
                            %error,
                            failing_for_s = now.duration_since(f.since).as_secs(),
                            retry_in_ms = wait.as_millis() as u64,
                            "the watch still fails; listing again every few seconds"
                        );
                        f.reminded = now;
                    }
                    f.error = error;
                }
            }
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.kick.notified() => {}
                () = self.tx.closed() => return,
            }
        }
    }

    /// Publishes what is seen now.
    fn report(&self, seen: Seen<K>) -> bool {
        if self.tx.send(seen).is_err() {
            return false;
        }
        self.versions.send_modify(|v| *v += 1);
        true
    }

    /// One list, then watches from it for as long as they end normally.
    async fn round(&self, backoff: &mut FullJitter, failing: &mut Option<Failing>) -> Ended {
        let fields = format!("metadata.name={}", self.name);
        let list = match self.api.list(&ListParams::default().fields(&fields)).await {
            Ok(list) => list,
            Err(e) => {
                return Ended::Failed(format!("list: {}{}", super::errors::Short(&e), missing_crd::<K>(&e)))
            }
        };
        // The server answered for this object: whatever failed before is worth trying again soon.
        backoff.reset();
        let mut rv = list.metadata.resource_version.clone().unwrap_or_default();
        let mut newest = list.items.first().and_then(resource_version);
        let seen = list.items.into_iter().next().map_or(Seen::Absent, Seen::Present);
        if !self.report(seen) {
            return Ended::Closed;
        }
        self.live.store(true, Ordering::Relaxed);
        loop {
            let params = WatchParams::default().fields(&fields).timeout(WATCH_TIMEOUT);
            let started = Instant::now();
            let mut stream = match self.api.watch(&params, &rv).await {
                Ok(s) => s.boxed(),
                Err(e) => return Ended::Failed(format!("watch: {}", super::errors::Short(&e))),
            };
            // Listed and watching: only now is the failure really over.
            if let Some(f) = failing.take() {
                tracing::info!(
                    object = %self.name,
                    server = super::errors::server(),
                    error = %f.error,
                    failed_for_s = f.since.elapsed().as_secs(),
                    "resolved: listing and watching work again"
                );
            }
            loop {
                let event = tokio::select! {
                    event = tokio::time::timeout(IDLE, stream.next()) => event,
                    () = self.tx.closed() => return Ended::Closed,
                };
                let seen = match event {
                    Err(_) => return Ended::Failed(format!("no event for {}s", IDLE.as_secs())),
                    Ok(None) if started.elapsed() >= NORMAL_END => break,
                    Ok(None) => {
                        return Ended::Failed(
                            "the watch ended early (a cut connection or a restarted API server)".into(),
                        )
                    }
                    Ok(Some(Err(e))) => return Ended::Failed(super::errors::Short(&e).to_string()),
                    Ok(Some(Ok(WatchEvent::Error(status)))) => {
                        return Ended::Failed(format!(
                            "{} {}",
                            status.code,
                            super::errors::excerpt(&status.message)
                        ))
                    }
                    Ok(Some(Ok(WatchEvent::Bookmark(mark)))) => {
                        rv = mark.metadata.resource_version;
                        continue;
                    }
                    Ok(Some(Ok(WatchEvent::Added(obj) | WatchEvent::Modified(obj)))) => {
                        let now = resource_version(&obj);
                        if let (Some(now), Some(before)) = (now, newest) {
                            if now < before {
                                return Ended::Failed(format!("resourceVersion went back from {before} to {now}: the API server's store was reset"));
                            }
                        }
                        newest = now.or(newest);
                        rv = obj.meta().resource_version.clone().unwrap_or(rv);
                        Seen::Present(obj)
                    }
                    Ok(Some(Ok(WatchEvent::Deleted(obj)))) => {
                        rv = obj.meta().resource_version.clone().unwrap_or(rv);
                        Seen::Absent
                    }
                };
                backoff.reset();
                if !self.report(seen) {
                    return Ended::Closed;
                }
            }
        }
    }
}

/// What to do about a list that found no such resource: a 404 on a custom resource's list means
/// its CRD is not installed (a missing object is an empty list, never a 404).
pub fn missing_crd<K: kube::Resource<DynamicType = ()>>(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if s.code == 404 && !K::group(&()).is_empty() => format!(
            " (the CRD {}.{} is not installed: install NFD or its CRDs)",
            K::plural(&()),
            K::group(&())
        ),
        _ => String::new(),
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
    /// so the cause (RBAC, the API server) is likely gone. Only a watch waiting right now is
    /// woken; nothing is remembered for a later failure, so a fleet's relists after an API server
    /// restart keep their jitter.
    pub fn retry_now(&self) {
        self.kick.notify_waiters();
    }

    /// The state now.
    pub fn seen(&self) -> Seen<K> {
        self.inspect(Seen::clone)
    }

    /// `f` of the state now, without copying the object (for a reader that needs one field of it
    /// every pass).
    pub fn inspect<R>(&self, f: impl FnOnce(&Seen<K>) -> R) -> R {
        f(&self.rx.borrow())
    }

    /// The state now if it is current (listed, no failure since); else [`Seen::Unknown`], so a
    /// writer reads the object instead of trusting a view from before a fault.
    pub fn seen_current(&self) -> Seen<K> {
        match self.live.load(Ordering::Relaxed) {
            true => self.seen(),
            false => Seen::Unknown,
        }
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
