//! One object watched by name (this Node, or this node's NodeFeature object): the state the API
//! server last reported, kept current by a watch, so a pass that changes nothing sends nothing and
//! a change someone else makes is seen within moments.
//!
//! The watch is `list_watch.rs`'s loop with the field selector `metadata.name`: it relists
//! after any fault within eight seconds of each failed try (a refused list too: a 403 until
//! RBAC is restored, a CRD installed late). [`ObjectWatch::retry_now`]
//! cuts a wait short once another request shows the cause is gone. A failure is logged when it
//! starts, reminded of at most once a minute, and logged as resolved once a list and a watch work
//! again.

pub use super::list_watch::{resource_version, Watched};
use super::list_watch::{Change, Follower, Say, Spec, RELIST};
use kube::Api;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::{watch, Notify};

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
        let spec = Spec {
            api,
            fields: format!("metadata.name={name}"),
            // A refused list (a 403 until RBAC is restored, a CRD installed late) is an outage an
            // operator fixes: its end is seen as soon as any other fault's.
            refused: RELIST,
            draw,
            kick: kick.clone(),
        };
        let follow = Follow { name: name.to_string(), tx, versions, live: live.clone() };
        tokio::spawn(super::list_watch::run(spec, follow));
        ObjectWatch { rx, version, kick, live }
    }
}

/// The watch's own part behind an [`ObjectWatch`].
struct Follow<K> {
    name: String,
    tx: watch::Sender<Seen<K>>,
    versions: watch::Sender<u64>,
    live: Arc<AtomicBool>,
}

impl<K> Follow<K> {
    /// Publishes what is seen now; false once every handle is gone.
    fn report(&self, seen: Seen<K>) -> bool {
        if self.tx.send(seen).is_err() {
            return false;
        }
        self.versions.send_modify(|v| *v += 1);
        true
    }
}

impl<K: Watched> Follower<K> for Follow<K> {
    fn listed(&mut self, items: Vec<K>) -> bool {
        let open = self.report(items.into_iter().next().map_or(Seen::Absent, Seen::Present));
        self.live.store(true, Ordering::Relaxed);
        open
    }

    fn changed(&mut self, change: Change<K>) -> bool {
        self.report(match change {
            Change::Applied(obj) => Seen::Present(obj),
            Change::Deleted(_) => Seen::Absent,
        })
    }

    fn list_failed(&mut self, e: &kube::Error, _refused: bool) -> String {
        format!("list: {}{}", super::errors::Short(e), missing_crd::<K>(e))
    }

    fn failed(&mut self) {
        self.live.store(false, Ordering::Relaxed);
    }

    fn say(&self, line: Say<'_>) {
        let (object, server) = (&self.name, super::errors::server());
        match line {
            Say::Failing { error, wait, .. } => tracing::warn!(
                %object,
                server,
                %error,
                retry_in_ms = wait.as_millis() as u64,
                "the watch failed; listing again every few seconds until it works"
            ),
            Say::Still { error, failing_for, wait } => tracing::warn!(
                %object,
                server,
                %error,
                failing_for_s = failing_for.as_secs(),
                retry_in_ms = wait.as_millis() as u64,
                "the watch still fails; listing again every few seconds"
            ),
            Say::Resolved { error, failed_for } => tracing::info!(
                %object,
                server,
                %error,
                failed_for_s = failed_for.as_secs(),
                "resolved: listing and watching work again"
            ),
        }
    }

    fn closed(&self) -> impl Future<Output = ()> + Send + '_ {
        self.tx.closed()
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
