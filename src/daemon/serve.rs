//! The labeller's loop: a pass, then waiting for whatever comes first.

use super::{watch, Control, Daemon, DaemonError, MIN_INTERVAL};
use crate::duration::Interval;
use futures::StreamExt;
use std::time::Duration;
use tokio::sync::mpsc;

impl Daemon {
    /// The time to the next pass: the interval (with its 1 s floor), or while retrying the retry's
    /// wait instead, shorter or longer.
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
        self.retry_wait.or(interval)
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
            let next_pass = self.next_pass_in(&mut floor_noted).map(|d| tokio::time::Instant::now() + d);
            loop {
                // The feature file's expiry is refreshed on its own clock, whatever the interval; a
                // failed refresh waits like a failed pass, so a broken file is not a hot loop.
                let refresh_in =
                    self.publisher.refresh_in().map(|d| d.max(self.retry_wait.unwrap_or(Duration::ZERO)));
                // A repair that must wait (a fight) is a timer here, so signals are heard meanwhile.
                let repair_in = self
                    .publisher
                    .repair_due()
                    .map(|at| at.saturating_duration_since(std::time::Instant::now()));
                let next_view = async {
                    match node.as_mut() {
                        Some(s) => s.next().await,
                        None => futures::future::pending().await,
                    }
                };
                tokio::select! {
                    () = sleep_until_or_never(next_pass) => break,
                    () = sleep_or_never(refresh_in) => {
                        let failed = self.publisher.refresh(&self.metrics).await.is_err();
                        self.back_off(failed);
                    }
                    Some(()) = self.publisher.next_change() => {
                        self.publisher.object_changed(std::time::Instant::now());
                        if self.config().sharing_check.is_some() {
                            self.cross_check();
                        }
                    }
                    () = sleep_or_never(repair_in) => {
                        let was_failed = self.publisher.retrying();
                        match self.publisher.repair(&self.metrics).await {
                            Err(reason) => self.publish_failed(reason),
                            Ok(()) if was_failed => self.publish_recovered(),
                            Ok(()) => {}
                        }
                    }
                    // auto: the slices now give the other profile; label again now.
                    () = self.allocation.switched() => break,
                    () = watch.changed() => {
                        if self.reload(false) {
                            break;
                        }
                        watch.follow(self.config.watched_dirs())?;
                    }
                    Some(view) = next_view => {
                        self.watched_allocatable = Some(view.allocatable);
                        if self.set_label(view.config_label) && self.reload(false) {
                            break;
                        }
                        self.cross_check();
                    }
                    // A signal that arrived during a pass waits in the channel: none is lost.
                    message = control.recv() => {
                        if self.heard(message, "") {
                            return Ok(());
                        }
                        break;
                    }
                }
            }
        }
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
async fn sleep_until_or_never(at: Option<tokio::time::Instant>) {
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
