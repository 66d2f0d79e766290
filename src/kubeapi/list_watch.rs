//! The one list-then-watch loop behind every watch nvlabel keeps: one object by name
//! ([`super::object_watch`]: this Node, this node's NodeFeature object) and this node's
//! ResourceSlices ([`super::slices`]). Each watch says what it keeps of what the loop sees and
//! words its own lines ([`Follower`]); every way a watch can end is decided here, for all of them:
//! - the server ends it after its timeout (290 s): watch again from the last resourceVersion seen,
//!   a bookmark's included (the one the list gave may be compacted away by then: a `410 Gone`
//!   and a relist);
//! - anything else (a cut or reset connection, an idle stream, a `410 Gone`, any error, an answer
//!   over the size limit, a resourceVersion going backwards): relist, never resuming at a
//!   resourceVersion a restarted API server with a new store may not know (it would accept the
//!   watch and deliver nothing until its store caught up).
//!
//! Relists wait a uniform random time in `[0, 8 s)` ([`RELIST`]: full jitter whose window never
//! grows), so after an API server restart the watchers of many nodes spread over eight seconds,
//! and however long the fault lasts (the server away for minutes, a cut network) the watch lists
//! again within eight seconds of each failed try, at a bounded rate meanwhile (a failed list is
//! cheap for the server). A list the API refuses (403, 404) waits on the watch's own
//! [`Spec::refused`] backoff instead (the object watches' is [`RELIST`] too). The backoffs start over as
//! soon as a list succeeds (the relists' also on any event); a kick ([`Spec::kick`]) cuts a wait
//! short. A failure is said when it starts, reminded of at most once a minute, and said resolved
//! once a list and a watch work again.

use super::backoff::FullJitter;
use super::remind::{Failures, Say as Remind};
use futures::StreamExt;
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::Api;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// The watch timeout asked of the server.
const WATCH_TIMEOUT: u32 = 290;
/// A watch that ends sooner than this ended early: relist.
const NORMAL_END: Duration = Duration::from_secs(280);
/// A watch silent for this long (no event, no bookmark) is dead.
const IDLE: Duration = Duration::from_secs(WATCH_TIMEOUT as u64 + 30);
/// The relists' backoff: every wait in `[0, 8 s)`, however long the failure lasts, so the end of
/// a fault is seen within eight seconds of the last failed try.
pub const RELIST: FullJitter = FullJitter::new(Duration::from_secs(8), Duration::from_secs(8));

/// What can be watched: an API object that can be cloned, logged and sent across tasks.
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

/// An object's resourceVersion as a number. The API server treats it as opaque for ordering,
/// but every real store (etcd's revision) gives increasing integers; one that is not a number is
/// never compared.
pub fn resource_version<K: kube::Resource>(obj: &K) -> Option<u64> {
    obj.meta().resource_version.as_deref()?.parse().ok()
}

/// A change the watch saw.
pub enum Change<K> {
    /// Added or modified: the object as it is now.
    Applied(K),
    /// Deleted: the object as it was last.
    Deleted(K),
}

/// A line about a failure, for the watch to word.
pub enum Say<'a> {
    /// A failure starts; the next list comes after `wait`. `refused`: the API refused the list.
    Failing { error: &'a str, refused: bool, wait: Duration },
    /// It goes on (at most once a minute); `error` is the latest.
    Still { error: &'a str, failing_for: Duration, wait: Duration },
    /// It is over: a list and a watch work again. `error` was the last one.
    Resolved { error: &'a str, failed_for: Duration },
}

/// One watch's own part of the loop: what it keeps of what the loop sees, and its lines.
pub trait Follower<K>: Send + 'static {
    /// Everything the selector matches, as just listed; false once nobody listens.
    fn listed(&mut self, items: Vec<K>) -> bool;
    /// One change the watch saw; false once nobody listens.
    fn changed(&mut self, change: Change<K>) -> bool;
    /// The list failed with `e` (`refused`: a 403 or a 404); the error as said and kept.
    fn list_failed(&mut self, e: &kube::Error, refused: bool) -> String;
    /// A list or a watch failed: what was seen may be out of date until the next list.
    fn failed(&mut self);
    /// Says `line`.
    fn say(&self, line: Say<'_>);
    /// Completes once nobody listens.
    fn closed(&self) -> impl Future<Output = ()> + Send + '_;
}

/// What to list and watch, and how to wait between tries.
pub struct Spec<K> {
    /// Where the objects are.
    pub api: Api<K>,
    /// The field selector that picks them.
    pub fields: String,
    /// The waits after a list the API refused (403, 404).
    pub refused: FullJitter,
    /// Draws the waits' jitter (a number in `[0, 1)`; a seam for tests of the longest wait).
    pub draw: fn() -> f64,
    /// Cuts a wait short when notified.
    pub kick: Arc<Notify>,
}

/// How one list-and-watch round ended.
enum Ended {
    /// Nobody listens.
    Closed,
    /// Something went wrong: relist after a wait (`refused`: the API refused the list).
    Failed { error: String, refused: bool },
}

/// The loop's state between rounds.
struct Tries {
    relist: FullJitter,
    refused: FullJitter,
    /// The failure in force: said when it starts, reminded of at most once a minute.
    failing: Failures,
}

/// Lists and watches what `spec` says, telling `follower`, until nobody listens.
pub async fn run<K: Watched, F: Follower<K>>(spec: Spec<K>, mut follower: F) {
    let mut tries = Tries { relist: RELIST, refused: spec.refused, failing: Failures::default() };
    loop {
        let (error, refused) = match round(&spec, &mut follower, &mut tries).await {
            Ended::Closed => return,
            Ended::Failed { error, refused } => (error, refused),
        };
        follower.failed();
        let backoff = if refused { &mut tries.refused } else { &mut tries.relist };
        let wait = backoff.next_with((spec.draw)());
        // The loop's clock is tokio's (the virtual one under test), as a std instant.
        match tries.failing.failed(error.clone(), Instant::now().into_std()) {
            Remind::Starts => follower.say(Say::Failing { error: &error, refused, wait }),
            Remind::Still { failing_for } => follower.say(Say::Still { error: &error, failing_for, wait }),
            Remind::Quiet => {}
        }
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = spec.kick.notified() => {}
            () = follower.closed() => return,
        }
    }
}

/// One list, then watches from it for as long as they end normally.
async fn round<K: Watched, F: Follower<K>>(spec: &Spec<K>, follower: &mut F, tries: &mut Tries) -> Ended {
    let failed = |error: String| Ended::Failed { error, refused: false };
    let list = match spec.api.list(&ListParams::default().fields(&spec.fields)).await {
        Ok(list) => list,
        Err(e) => {
            let refused = matches!(&e, kube::Error::Api(s) if s.code == 403 || s.code == 404);
            return Ended::Failed { error: follower.list_failed(&e, refused), refused };
        }
    };
    // The server answered: whatever failed before is worth trying again soon.
    tries.relist.reset();
    tries.refused.reset();
    let mut rv = list.metadata.resource_version.clone().unwrap_or_default();
    // Every event after the list is newer than every object it listed.
    let mut newest = list.items.iter().filter_map(resource_version).max();
    if !follower.listed(list.items) {
        return Ended::Closed;
    }
    loop {
        let params = WatchParams::default().fields(&spec.fields).timeout(WATCH_TIMEOUT);
        let started = Instant::now();
        let mut stream = match spec.api.watch(&params, &rv).await {
            Ok(s) => s.boxed(),
            Err(e) => return failed(format!("watch: {}", super::errors::Short(&e))),
        };
        // Listed and watching: only now is the failure really over.
        if let Some(f) = tries.failing.succeeded(Instant::now().into_std()) {
            follower.say(Say::Resolved { error: &f.error, failed_for: f.failed_for });
        }
        loop {
            let event = tokio::select! {
                event = tokio::time::timeout(IDLE, stream.next()) => event,
                () = follower.closed() => return Ended::Closed,
            };
            let change = match event {
                Err(_) => return failed(format!("no event for {}s", IDLE.as_secs())),
                Ok(None) if started.elapsed() >= NORMAL_END => break,
                Ok(None) => {
                    return failed(
                        "the watch ended early (a cut connection or a restarted API server)".into(),
                    )
                }
                Ok(Some(Err(e))) => return failed(super::errors::Short(&e).to_string()),
                Ok(Some(Ok(WatchEvent::Error(status)))) => {
                    return failed(format!("{} {}", status.code, super::errors::excerpt(&status.message)))
                }
                Ok(Some(Ok(WatchEvent::Bookmark(mark)))) => {
                    rv = mark.metadata.resource_version;
                    continue;
                }
                Ok(Some(Ok(WatchEvent::Added(obj) | WatchEvent::Modified(obj)))) => Change::Applied(obj),
                Ok(Some(Ok(WatchEvent::Deleted(obj)))) => Change::Deleted(obj),
            };
            let obj = match &change {
                Change::Applied(obj) | Change::Deleted(obj) => obj,
            };
            let now = resource_version(obj);
            if let (Some(now), Some(before)) = (now, newest) {
                if now < before {
                    return failed(format!(
                        "resourceVersion went back from {before} to {now}: the API server's store was reset"
                    ));
                }
            }
            newest = now.or(newest);
            rv = obj.meta().resource_version.clone().unwrap_or(rv);
            tries.relist.reset();
            if !follower.changed(change) {
                return Ended::Closed;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relists_spread_a_fleet_over_eight_seconds_every_time() {
        // 10,000 watchers fail together: their relists fall in [0, 8 s), about evenly, and so do
        // the next ones of those that fail again (the window never grows).
        let mut per_second = [0u32; 8];
        for _ in 0..10_000 {
            let mut relist = RELIST;
            let first = relist.next_with(rand::random());
            let again = relist.next_with(rand::random());
            assert!(first < Duration::from_secs(8) && again < Duration::from_secs(8));
            per_second[first.as_secs() as usize] += 1;
        }
        // Evenly is 1,250 a second; the bound is loose so chance cannot fail it.
        assert!(per_second.iter().all(|n| (1000..1500).contains(n)), "{per_second:?}");
        let mut relist = RELIST;
        let longest: Vec<Duration> = (0..10).map(|_| relist.next_with(0.999_999)).collect();
        assert!(longest.iter().all(|w| *w < Duration::from_secs(8) && *w > Duration::from_millis(7_999)));
    }
}
