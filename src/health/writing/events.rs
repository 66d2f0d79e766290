//! Health's Events on the Node: a fault, a warning episode, a recovery, a clear by hand. A
//! repeat within ten minutes of the last is counted on the first Event's `series` (count and
//! last-observed time), as Kubernetes' own event recorders do, so a second episode is never lost;
//! at most ten writes a minute. Requests go through [`crate::kubeapi`]'s [`retry`] and fail as one [`ApiFailure`].

use crate::health::writing::condition::FIELD_MANAGER;
use crate::kubeapi::backoff::FullJitter;
use crate::kubeapi::errors::ApiFailure;
use crate::kubeapi::retry::retry;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as KubeEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Patch, PatchParams, PostParams};
use kube::Api;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// The target of this file's log lines: the module it was before health had rooms, so no
/// line an operator reads or filters on changed with the move.
const LOG: &str = "nvlabel::health::events";

/// A repeat within this time of the last is counted on the same Event.
const DEDUP_WINDOW: Duration = Duration::from_secs(600);
/// At most this many Event writes per [`RATE_WINDOW`].
const RATE_LIMIT: usize = 10;
/// The window of [`RATE_LIMIT`].
const RATE_WINDOW: Duration = Duration::from_secs(60);
/// An Event note's limit in the API.
const NOTE_LIMIT: usize = 1024;
/// Where Node Events go (where the kubelet puts them).
pub const EVENTS_NAMESPACE: &str = "default";

/// What to do with an Event.
#[derive(Debug, Clone, PartialEq)]
pub enum Admit {
    /// Create it: the first of its kind in the window (or the last one's create failed).
    Create,
    /// A repeat of `event`: count it on that Event's series, now `count` in all.
    Series {
        /// The Event as created (its name given by the server).
        event: Box<KubeEvent>,
        /// Occurrences so far, this one included.
        count: i32,
    },
    /// Over the rate: not written now (a repeat is still counted for the next write).
    Drop,
}

/// An Event's type, as Kubernetes spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Something went back to normal (faults cleared).
    Normal,
    /// Something operators should look at.
    Warning,
}

impl EventType {
    /// Kubernetes' spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// What makes a repeat the same Event: its type, its reason and what it is about (a GPU, a fault).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventKey {
    /// `Warning` or `Normal`.
    pub event_type: EventType,
    /// The Event's reason.
    pub reason: String,
    /// What it is about.
    pub about: String,
}

/// One kind of Event seen in the window.
#[derive(Debug)]
struct Seen {
    last: Instant,
    /// The Event created for it, once the API answered.
    event: Option<Box<KubeEvent>>,
    count: i32,
}

/// Which Events go and how: a repeat within ten minutes of the last is counted on the first
/// Event's `series` (as Kubernetes' own event recorders do), at most ten writes a minute.
#[derive(Debug, Default)]
pub struct Limiter {
    seen: HashMap<EventKey, Seen>,
    window: VecDeque<Instant>,
}

impl Limiter {
    /// What to do with an Event of kind `key` now; records it.
    pub fn admit(&mut self, key: &EventKey, now: Instant) -> Admit {
        self.seen.retain(|_, s| now.duration_since(s.last) < DEDUP_WINDOW);
        while self.window.front().is_some_and(|at| now.duration_since(*at) >= RATE_WINDOW) {
            self.window.pop_front();
        }
        let seen = self.seen.entry(key.clone()).or_insert(Seen { last: now, event: None, count: 0 });
        seen.last = now;
        seen.count = match seen.event {
            Some(_) => seen.count.saturating_add(1),
            // Not created yet (or its create failed): this one is created, a first.
            None => 1,
        };
        if self.window.len() >= RATE_LIMIT {
            return Admit::Drop;
        }
        self.window.push_back(now);
        match &seen.event {
            Some(event) => Admit::Series { event: event.clone(), count: seen.count },
            None => Admit::Create,
        }
    }

    /// The Event of kind `key` was created as `event` (named): repeats go to its series.
    pub fn created(&mut self, key: &EventKey, event: KubeEvent) {
        if let Some(seen) = self.seen.get_mut(key) {
            seen.event = Some(Box::new(event));
        }
    }
}

/// Events on the Node: repeats counted on one Event, rate-limited.
pub struct NodeEvents {
    api: Api<KubeEvent>,
    node: String,
    instance: String,
    limiter: Limiter,
    backoff: FullJitter,
}

impl NodeEvents {
    /// Events about Node `node`, in [`EVENTS_NAMESPACE`], reported by `instance`; each write
    /// retries as hard as `backoff` says.
    pub fn new(client: kube::Client, node: &str, instance: &str, backoff: FullJitter) -> NodeEvents {
        NodeEvents {
            api: Api::namespaced(client, EVENTS_NAMESPACE),
            node: node.into(),
            instance: instance.into(),
            limiter: Limiter::default(),
            backoff,
        }
    }

    /// Sends one Event (`Warning` or `Normal`) about the Node. Events of the same `event_type`,
    /// `reason` and `about` (what makes a repeat the same: a GPU, a fault) within the window are
    /// one Event whose series counts them; a write over the rate is dropped (logged at debug).
    pub async fn send(
        &mut self,
        event_type: EventType,
        reason: &str,
        about: &str,
        note: &str,
        uid: Option<&str>,
    ) -> Result<(), ApiFailure> {
        self.send_asked(event_type, reason, about, note, uid).await.map(|_| ())
    }

    /// [`NodeEvents::send`], saying whether the API was asked: `Ok(false)` when the rate limit
    /// dropped the Event, which proves nothing about the API (a failure in force goes on).
    pub async fn send_asked(
        &mut self,
        event_type: EventType,
        reason: &str,
        about: &str,
        note: &str,
        uid: Option<&str>,
    ) -> Result<bool, ApiFailure> {
        let key = EventKey { event_type, reason: reason.into(), about: about.into() };
        let failure = |verb, source| ApiFailure {
            action: if verb == "create" { "create" } else { "count a repeat on" },
            object: format!("an Event in namespace {EVENTS_NAMESPACE} about Node {}", self.node),
            verb,
            resource: "events.events.k8s.io",
            source,
        };
        let now = MicroTime(crate::health::timestamp());
        // tokio's clock (the virtual one under test), as the limiter's std instant.
        match self.limiter.admit(&key, crate::health::now()) {
            Admit::Drop => {
                tracing::debug!(target: LOG, reason, note, "health event not written now (rate limit)");
                Ok(false)
            }
            Admit::Series { mut event, count } => {
                // The whole Event, applied: if it expired meanwhile (the API keeps Events an
                // hour) the apply creates it again, with its count.
                event.series = Some(EventSeries { count, last_observed_time: now });
                let name = event.metadata.name.clone().unwrap_or_default();
                let params = PatchParams::apply(FIELD_MANAGER).force();
                let patch = Patch::Apply(&*event);
                retry("counting a repeated health Event", self.backoff, || {
                    self.api.patch(&name, &params, &patch)
                })
                .await
                .map_err(|source| failure("patch", source))?;
                Ok(true)
            }
            Admit::Create => {
                let event = self.event(event_type, reason, note, uid, now);
                let params = PostParams::default();
                let created =
                    retry("creating a health Event", self.backoff, || self.api.create(&params, &event))
                        .await
                        .map_err(|source| failure("create", source))?;
                if let Some(name) = created.metadata.name {
                    let meta = ObjectMeta {
                        name: Some(name),
                        namespace: event.metadata.namespace.clone(),
                        ..ObjectMeta::default()
                    };
                    self.limiter.created(&key, KubeEvent { metadata: meta, ..event });
                }
                Ok(true)
            }
        }
    }

    /// A new Event about the Node.
    fn event(
        &self,
        event_type: EventType,
        reason: &str,
        note: &str,
        uid: Option<&str>,
        now: MicroTime,
    ) -> KubeEvent {
        let mut note = note.to_string();
        if note.len() > NOTE_LIMIT {
            let mut cut = NOTE_LIMIT - 3;
            while !note.is_char_boundary(cut) {
                cut -= 1;
            }
            note.truncate(cut);
            note.push_str("...");
        }
        KubeEvent {
            metadata: ObjectMeta {
                // A trailing dash: the server appends a random suffix to a valid prefix.
                generate_name: Some(format!("{}.gpu-health-", self.node.get(..200).unwrap_or(&self.node))),
                namespace: Some(EVENTS_NAMESPACE.into()),
                ..ObjectMeta::default()
            },
            event_time: Some(now),
            type_: Some(event_type.as_str().into()),
            reason: Some(reason.into()),
            action: Some("GpuHealthCheck".into()),
            note: Some(note),
            reporting_controller: Some("nvidia.com/nvlabel".into()),
            reporting_instance: Some(self.instance.clone()),
            regarding: Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Node".into()),
                name: Some(self.node.clone()),
                uid: uid.map(String::from),
                ..ObjectReference::default()
            }),
            ..KubeEvent::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeat_is_counted_on_the_first_events_series_and_writes_are_rate_limited() {
        let mut l = Limiter::default();
        let key = |about: &str| EventKey {
            event_type: EventType::Warning,
            reason: "Thermal".into(),
            about: about.into(),
        };
        let t0 = Instant::now();
        let s = Duration::from_secs;
        assert_eq!(l.admit(&key("GPU 0"), t0), Admit::Create);
        assert_eq!(l.admit(&key("GPU 0"), t0 + s(1)), Admit::Create, "its create did not answer yet");
        let event = KubeEvent {
            metadata: ObjectMeta { name: Some("ev-1".into()), ..ObjectMeta::default() },
            ..KubeEvent::default()
        };
        l.created(&key("GPU 0"), event.clone());
        let series = |count| Admit::Series { event: Box::new(event.clone()), count };
        assert_eq!(l.admit(&key("GPU 0"), t0 + s(10)), series(2), "a repeat: the same Event, counted");
        assert_eq!(l.admit(&key("GPU 0"), t0 + s(20)), series(3));
        let later = t0 + s(20) + DEDUP_WINDOW;
        assert_eq!(l.admit(&key("GPU 0"), later), Admit::Create, "after a quiet window: a new Event");
        for i in 0..RATE_LIMIT - 1 {
            assert_eq!(l.admit(&key(&format!("k{i}")), later), Admit::Create);
        }
        assert_eq!(l.admit(&key("one too many"), later), Admit::Drop, "over the rate");
        assert_eq!(l.admit(&key("one too many"), later + RATE_WINDOW), Admit::Create);
    }
}
