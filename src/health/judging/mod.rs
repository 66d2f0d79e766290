//! The judging: pure decisions, with no I/O, no thread, no NVML session and no API client.
//! [`rules`] says what a fault is, [`action`] what to do about it (the driver's recovery action,
//! NVIDIA's Xid catalog), [`thresholds`] counts the Xids that are one when they repeat,
//! [`sticky`] keeps faults until the node reboots, [`recovery`] sees them end in place, [`admin`]
//! obeys a person's clear, [`signals`] follows warning episodes, [`outcome`] says what an event
//! was judged, and the [`judge`] holds them together: readings and events in, a
//! [`super::values::report::Report`] out.

pub mod action;
pub mod admin;
pub mod judge;
pub mod outcome;
pub mod recovery;
pub mod rules;
pub mod signals;
pub mod sticky;
pub mod thresholds;
