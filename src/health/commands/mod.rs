//! Health's one-shot commands: `nvlabel health` ([`oneshot`]), `nvlabel health clear`
//! ([`clear`]) and `nvlabel prune`'s health part ([`prune`]).

pub mod clear;
pub mod oneshot;
pub mod prune;
