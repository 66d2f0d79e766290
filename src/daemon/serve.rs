//! The labeller's loop: a pass, then waiting for whatever comes first. The waiting only selects
//! ([`Daemon::wake`]); what each wake-up does is [`Daemon::handle`]'s.

use super::{watch, Control, Daemon, DaemonError, MIN_INTERVAL};
use crate::duration::Interval;
use crate::kubeapi::node_view::NodeView;
use futures::stream::BoxStream;
use futures::StreamExt;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// What woke the loop between passes.
enum Wake {
    /// The pass deadline came.
    Deadline,
    /// The feature file's expiry wants it written again.
    Refresh,
    /// The object the writer publishes into changed.
    ObjectChanged,
    /// A repair (of drift, or of a failed publish) is due.
    Repair,
    /// `auto`: this node's slices now give the other label profile.
    Switched,
    /// A watched configuration directory changed.
    ConfigFile,
    /// The Node's view (config label, allocatable) changed.
    View(NodeView),
    /// A sharing mismatch outlasted its grace period.
    CrossCheck,
    /// A signal (or the owner's channel closing).
    Control(Option<Control>),
}

/// What the loop does after a wake-up.
enum Next {
    /// Goes on waiting for the pass deadline.
    Wait,
    /// Runs a pass now.
    Pass,
    /// Stops (labels stay).
    Stop,
}

impl Daemon {
    /// The time to the next pass: the interval (with its 1 s floor), or while retrying the retry's
    /// wait instead, never longer than the interval.
    fn next_pass_in(&self, floor_noted: &mut Option<Duration>) -> Option<Duration> {
        let interval = match self.config().interval {
            // GFD relabels in a busy loop on 0; one second is the floor here.
            Interval::Every(d) if d < MIN_INTERVAL => {
                if *floor_noted != Some(d) {
                    tracing::warn!(
                        requested = %humantime::format_duration(d),
                        used = "1s",
                        "--sleep-interval is below the 1s floor; passes run every second"
                    );
                    *floor_noted = Some(d);
                }
                Some(MIN_INTERVAL)
            }
            Interval::Every(d) => Some(d),
            Interval::Infinite => None,
        };
        *self.metrics.liveness.fresh_for.lock().unwrap_or_else(|p| p.into_inner()) =
            interval.map(|d| d * 3 + Duration::from_secs(60));
        // A retry never waits longer than the interval: the pass due then would run anyway.
        match (self.retry.wait(), interval) {
            (Some(wait), Some(interval)) => Some(wait.min(interval)),
            (wait, interval) => wait.or(interval),
        }
    }

    /// Runs until `control` says stop (or closes). The next pass's time is set when the last one
    /// ended: a refresh, a repair or a change of the watched object never moves it; a config
    /// change, slices that switch `auto`'s profile, or a signal start the next pass at once.
    pub async fn serve(mut self, mut control: mpsc::Receiver<Control>) -> Result<(), DaemonError> {
        let mut node = self.views.lock().unwrap_or_else(|p| p.into_inner()).take();
        for note in &self.config().notes {
            tracing::info!("{note}");
        }
        let mut watch = watch::ConfigWatch::new();
        watch.follow(self.config.watched_dirs())?;
        let mut floor_noted = None;
        loop {
            self.metrics.liveness.busy(true);
            // A pass is abandoned for a signal: shutdown never waits on the network.
            let heard = tokio::select! {
                result = self.run_pass() => { result?; None }
                message = control.recv() => Some(message),
            };
            if let Some(message) = heard {
                // A reload abandons the pass and starts a new one with the new configuration.
                match self.heard(message, "during a pass") {
                    true => return Ok(()),
                    false => continue,
                }
            }
            self.metrics.liveness.busy(false);
            watch.follow(self.config.watched_dirs())?;
            let deadline = self.next_pass_in(&mut floor_noted).map(|d| Instant::now() + d);
            loop {
                let wake = self.wake(deadline, &mut node, &mut watch, &mut control).await;
                match self.handle(wake, &mut watch).await? {
                    Next::Wait => {}
                    Next::Pass => break,
                    Next::Stop => return Ok(()),
                }
            }
        }
    }

    /// Waits for the first of everything that can wake the loop before `deadline`.
    async fn wake(
        &mut self,
        deadline: Option<Instant>,
        node: &mut Option<BoxStream<'static, NodeView>>,
        watch: &mut watch::ConfigWatch,
        control: &mut mpsc::Receiver<Control>,
    ) -> Wake {
        // The feature file's expiry is refreshed on its own clock, whatever the interval; a
        // failed refresh waits like a failed pass, so a broken file is not a hot loop.
        let refresh_in =
            self.publisher.refresh_in().map(|d| d.max(self.retry.wait().unwrap_or(Duration::ZERO)));
        // A repair that must wait (a fight) is a timer here, so signals are heard meanwhile.
        let repair_in =
            self.publisher.repair_due().map(|at| at.saturating_duration_since(std::time::Instant::now()));
        let next_view = async {
            match node.as_mut() {
                Some(s) => s.next().await,
                None => futures::future::pending().await,
            }
        };
        tokio::select! {
            () = sleep_until_or_never(deadline) => Wake::Deadline,
            () = sleep_or_never(refresh_in) => Wake::Refresh,
            Some(()) = self.publisher.next_change() => Wake::ObjectChanged,
            () = sleep_or_never(repair_in) => Wake::Repair,
            () = sleep_until_or_never(self.cross.due()) => Wake::CrossCheck,
            () = self.allocation.switched() => Wake::Switched,
            () = watch.changed() => Wake::ConfigFile,
            Some(view) = next_view => Wake::View(view),
            // A signal that arrived during a refresh or repair waited in the channel: none is lost.
            message = control.recv() => Wake::Control(message),
        }
    }

    /// Does what `wake` asks; what the loop does next.
    async fn handle(&mut self, wake: Wake, watch: &mut watch::ConfigWatch) -> Result<Next, DaemonError> {
        Ok(match wake {
            Wake::Deadline | Wake::Switched => Next::Pass,
            Wake::Refresh => {
                let failed = self.publisher.refresh(&self.metrics).await.is_err();
                self.retry.back_off(failed);
                Next::Wait
            }
            Wake::ObjectChanged => {
                self.publisher.object_changed(std::time::Instant::now());
                self.cross_check();
                Next::Wait
            }
            Wake::Repair => {
                let was_failed = self.publisher.retrying();
                match self.publisher.repair(&self.metrics).await {
                    Err(reason) => self.retry.publish_failed(reason),
                    Ok(()) if was_failed => self.publish_recovered(),
                    Ok(()) => {}
                }
                Next::Wait
            }
            Wake::ConfigFile if self.reload(false) => Next::Pass,
            Wake::ConfigFile => {
                watch.follow(self.config.watched_dirs())?;
                Next::Wait
            }
            Wake::View(view) => {
                self.cross.saw(view.allocatable);
                if self.set_label(view.config_label) && self.reload(false) {
                    return Ok(Next::Pass);
                }
                self.cross_check();
                Next::Wait
            }
            Wake::CrossCheck => {
                self.cross_check();
                Next::Wait
            }
            Wake::Control(message) if self.heard(message, "") => Next::Stop,
            Wake::Control(_) => Next::Pass,
        })
    }

    /// Acts on a control message; returns true to stop.
    fn heard(&mut self, message: Option<Control>, when: &str) -> bool {
        match message {
            Some(Control::Reload) => {
                tracing::info!("Received SIGHUP, reloading");
                // GFD starts over on SIGHUP, NVML included: an operator's way to make it look again.
                self.session.reset();
                self.reload(true);
                false
            }
            Some(Control::Shutdown) | None if when.is_empty() => {
                tracing::info!("shutting down; published labels stay in place");
                true
            }
            Some(Control::Shutdown) | None => {
                tracing::info!("shutting down {when} (abandoned); published labels stay in place");
                true
            }
        }
    }
}

/// Sleeps until `at`, or forever.
async fn sleep_until_or_never(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => futures::future::pending().await,
    }
}

/// Sleeps for `d`, or forever.
async fn sleep_or_never(d: Option<Duration>) {
    match d {
        Some(d) => tokio::time::sleep(d).await,
        None => futures::future::pending().await,
    }
}
