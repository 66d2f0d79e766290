//! How health's condition and device taints wait after a failed API call: the one backoff
//! ([`FullJitter`]) holding calls back for a random time in a window from 1 s doubling to 5
//! minutes, until a call succeeds. (Events retry within their one call and are rate-limited.)

use crate::kubeapi::backoff::FullJitter;
use std::time::Duration;

/// The wait after a failed read or write of the health condition.
pub const AFTER_FAILURE: FullJitter = FullJitter::new(Duration::from_secs(1), Duration::from_secs(300));
