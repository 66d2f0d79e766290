//! One object watched by name (this Node, or this node's NodeFeature object): the state the API
//! server last reported, kept current by a watch, so a pass that changes nothing sends nothing and
//! a change someone else makes is seen within moments. A broken watch is re-established with
//! full-jitter backoff, so after an API server restart the watchers of many nodes spread their
//! relists over seconds instead of arriving together; `410 Gone` is handled by relisting.

use futures::StreamExt;
use kube::runtime::{watcher, WatchStreamExt};
use kube::Api;
use rand::Rng;
use std::time::Duration;
use tokio::sync::watch;

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
}

impl<K> ObjectWatch<K>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
{
    /// Watches `name` through `api` in a background task that ends when every handle is dropped.
    pub fn spawn(api: Api<K>, name: &str) -> ObjectWatch<K> {
        let (tx, rx) = watch::channel(Seen::Unknown);
        let (versions, version) = watch::channel(0u64);
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let mut events = watcher(api, config).backoff(FullJitter::default()).boxed();
        let name = name.to_string();
        tokio::spawn(async move {
            let mut listing: Option<K> = None;
            loop {
                let event = tokio::select! {
                    event = events.next() => event,
                    () = tx.closed() => return,
                };
                let Some(event) = event else { return };
                let seen = match event {
                    Ok(watcher::Event::Init) => {
                        listing = None;
                        continue;
                    }
                    Ok(watcher::Event::InitApply(obj)) => {
                        listing = Some(obj);
                        continue;
                    }
                    Ok(watcher::Event::InitDone) => listing.take().map_or(Seen::Absent, Seen::Present),
                    Ok(watcher::Event::Apply(obj)) => Seen::Present(obj),
                    Ok(watcher::Event::Delete(_)) => Seen::Absent,
                    Err(e) => {
                        tracing::warn!(object = %name, error = %e, "watch failed; re-establishing it with backoff");
                        continue;
                    }
                };
                if tx.send(seen).is_err() {
                    return;
                }
                versions.send_modify(|v| *v += 1);
            }
        });
        ObjectWatch { rx, version }
    }
}

impl<K: Clone> ObjectWatch<K> {
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

/// Full-jitter exponential backoff: attempt n waits a uniform random time in
/// `[0, min(cap, base × 2^n))`. With a 10 s base, a fleet whose watches all break at once (an API
/// server restart) comes back spread evenly over 10 s, about a tenth of the fleet per second.
#[derive(Debug, Clone)]
pub struct FullJitter {
    base: Duration,
    cap: Duration,
    attempt: u32,
}

impl Default for FullJitter {
    fn default() -> FullJitter {
        FullJitter { base: Duration::from_secs(10), cap: Duration::from_secs(300), attempt: 0 }
    }
}

impl FullJitter {
    /// The upper bound of the current attempt's wait.
    fn window(&self) -> Duration {
        self.base.saturating_mul(1u32 << self.attempt.min(16)).min(self.cap)
    }
}

impl Iterator for FullJitter {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let window = self.window();
        self.attempt = self.attempt.saturating_add(1);
        Some(window.mul_f64(rand::rng().random::<f64>()))
    }
}

impl kube::runtime::utils::Backoff for FullJitter {
    fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_jitter_spreads_a_fleet_over_the_first_window_and_grows() {
        // 10,000 watchers fail together: their first retries fall in [0, 10 s), about evenly.
        let mut per_second = [0u32; 10];
        for _ in 0..10_000 {
            let d = FullJitter::default().next().unwrap();
            assert!(d < Duration::from_secs(10));
            per_second[d.as_secs() as usize] += 1;
        }
        // Evenly is 1,000 a second; the bound is loose so chance cannot fail it.
        assert!(per_second.iter().all(|n| (700..1300).contains(n)), "{per_second:?}");
        let mut b = FullJitter::default();
        let windows: Vec<Duration> = (0..8)
            .map(|_| {
                let w = b.window();
                b.next();
                w
            })
            .collect();
        assert_eq!(windows[1], Duration::from_secs(20));
        assert_eq!(windows[7], Duration::from_secs(300), "capped at 5 minutes");
        kube::runtime::utils::Backoff::reset(&mut b);
        assert_eq!(b.window(), Duration::from_secs(10));
    }
}
