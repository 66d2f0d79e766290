//! The values both sides read, and what health leaves on the Node: what NVML reported
//! ([`reading`]), a fault and its action ([`fault`]), the condition's status, reason and message
//! ([`verdict`]), the fault record beside it ([`record`], and the message of nvlabel before the
//! record, [`old_message`]), a release's own field manager ([`instance`]) and the [`report`]
//! the judge hands the writers. Plain data: nothing here reads, judges or writes.

pub mod fault;
pub mod instance;
pub mod old_message;
pub mod reading;
pub mod record;
pub mod report;
pub mod verdict;
