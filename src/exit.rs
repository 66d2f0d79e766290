//! The process's exit status for the error that ended it: one status for every bad
//! configuration, wherever it was found, so a script or a pod's restart policy can tell "fix the
//! configuration" from "the node or the API failed".
//!
//! | status | meaning |
//! |---|---|
//! | 0 | done (a daemon stopped by a signal too) |
//! | 1 | a failure of the node or the API: no driver, a file that cannot be written, an API error |
//! | 2 | a bad configuration: a flag, environment variable or config file nvlabel cannot use |
//!
//! Errors classify themselves ([`Classify`]): each error type answers for its own variants and
//! asks the error it wraps, in a `match` without a catch-all, so a new variant cannot be left
//! out. A leaf: every room's errors implement it, and it knows none of them.
//!
//! A configuration that turns bad on a reload never ends the process: it is a rejected reload.
//! `nvlabel health` exits with node-problem-detector's statuses instead (`health/commands/oneshot.rs`).

/// The status of a bad configuration (the same as a usage error's).
pub const BAD_CONFIGURATION: i32 = 2;

/// The status of any other failure.
pub const FAILURE: i32 = 1;

/// An error that says whether it is a bad configuration or a failure of the node or the API.
pub trait Classify {
    /// Whether this is a configuration nvlabel cannot use (a flag, environment variable, config
    /// file or kubeconfig), which only the operator can fix; else the node or the API failed.
    fn is_bad_configuration(&self) -> bool;
}

/// The exit status for `e` (see the module's table).
pub fn code(e: &(impl Classify + ?Sized)) -> i32 {
    if e.is_bad_configuration() {
        BAD_CONFIGURATION
    } else {
        FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Says(bool);

    impl Classify for Says {
        fn is_bad_configuration(&self) -> bool {
            self.0
        }
    }

    #[test]
    fn the_status_is_what_the_error_says_it_is() {
        assert_eq!(code(&Says(true)), BAD_CONFIGURATION);
        assert_eq!(code(&Says(false)), FAILURE);
        assert_eq!(BAD_CONFIGURATION, 2, "README's table, and clap's own status for a usage error");
    }
}
