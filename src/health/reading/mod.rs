//! What comes in: NVML's readings and events ([`nvml_reads`], with the raw event calls in
//! `raw_events.rs`), each reading on its worker thread with the hung-call watch ([`reader`],
//! [`watchdog`]), the node's boot id ([`boot`]) and what the Node says through its watch (the
//! expected GPU count, [`expected`], and a clear by hand, [`node_said`]). Nothing here judges: the values go to
//! [`super::judging`] as [`super::values`] define them.

pub mod boot;
pub mod expected;
pub mod node_said;
pub mod nvml_reads;
mod raw_events;
pub mod reader;
pub mod watchdog;
