//! The resolver's pieces: one flag's value from the command line, then env, then its declared
//! default, remembering where it came from so that a bad value's error names its origin.
//! [`super::settings`] and [`super::health`] resolve their flags with them.

use super::arg_groups::parse_bool;
use super::env::env_names;
use super::flags::default_of;
use crate::exit::Classify;
use std::path::PathBuf;

/// A flag or env value that is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CliError {
    /// A bad value, from the command line or from an env var.
    #[error("invalid value {value:?} for {origin}: {reason}")]
    Invalid {
        /// `flag --x` or `environment variable "X" (flag --x)`.
        origin: String,
        /// The value.
        value: String,
        /// What is wrong.
        reason: String,
    },
}

impl Classify for CliError {
    fn is_bad_configuration(&self) -> bool {
        match self {
            CliError::Invalid { .. } => true,
        }
    }
}

/// One flag's value and where it came from.
pub(super) struct Found {
    pub(super) value: String,
    pub(super) origin: String,
}

/// The env lookup used by [`super::Settings::resolve`].
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// `flag`'s value from the first of its env names that is defined.
fn from_env(env: Env, flag: &str) -> Option<Found> {
    // urfave/cli: the first *defined* variable wins, even when it is empty.
    env_names(flag).iter().find_map(|n| {
        env(n).map(|value| Found { value, origin: format!("environment variable {n:?} (flag --{flag})") })
    })
}

/// `flag`'s default as declared on the command line, parsed; a default that does not parse is
/// caught by the defaults test.
pub(super) fn default<T: std::str::FromStr>(flag: &str) -> T {
    let text = default_of(flag).unwrap_or_else(|| panic!("--{flag} declares no default"));
    text.parse().unwrap_or_else(|_| panic!("--{flag}'s default {text:?} does not parse"))
}

/// `flag`'s default as a [`Found`].
pub(super) fn defaulted(flag: &str) -> Found {
    Found { value: default(flag), origin: format!("the default of --{flag}") }
}

/// The error for `found`'s value, naming where it came from.
pub(super) fn invalid(found: &Found, reason: impl ToString) -> CliError {
    CliError::Invalid { origin: found.origin.clone(), value: found.value.clone(), reason: reason.to_string() }
}

/// A boolean from the command line or env; `None` when neither sets it.
pub(super) fn bool_flag(cli: Option<bool>, env: Env, flag: &str) -> Result<Option<bool>, CliError> {
    if let Some(v) = cli {
        return Ok(Some(v));
    }
    match from_env(env, flag) {
        // urfave: an empty boolean env var means false.
        Some(f) if f.value.is_empty() => Ok(Some(false)),
        Some(f) => parse_bool(&f.value).map(Some).map_err(|e| invalid(&f, e)),
        None => Ok(None),
    }
}

/// A string flag from the command line or env.
pub(super) fn string_flag(cli: Option<String>, env: Env, flag: &str) -> Option<String> {
    cli.or_else(|| from_env(env, flag).map(|f| f.value))
}

/// A string flag as a [`Found`], remembering where it came from for error messages.
pub(super) fn found_flag(cli: Option<String>, env: Env, flag: &str) -> Option<Found> {
    cli.map(|value| Found { value, origin: format!("flag --{flag}") }).or_else(|| from_env(env, flag))
}

/// A path flag from the command line or env; empty means unset.
pub(super) fn path_flag(cli: Option<PathBuf>, env: Env, flag: &str) -> Option<PathBuf> {
    cli.or_else(|| from_env(env, flag).filter(|f| !f.value.is_empty()).map(|f| PathBuf::from(f.value)))
}

/// A flag with a fixed set of values, from the command line, env or its default, parsed by `parse`.
pub(super) fn choice<T>(
    cli: Option<String>,
    env: Env,
    flag: &str,
    parse: impl Fn(&str) -> Option<T>,
    choices: &str,
) -> Result<T, CliError> {
    let f = found_flag(cli, env, flag).unwrap_or_else(|| defaulted(flag));
    parse(&f.value).ok_or_else(|| invalid(&f, format!("use {choices}")))
}

/// A number from the command line or env, else its default; an empty env value is ignored.
pub(super) fn number_flag<T: std::str::FromStr>(cli: Option<T>, env: Env, flag: &str) -> Result<T, CliError>
where
    T::Err: std::fmt::Display,
{
    if let Some(v) = cli {
        return Ok(v);
    }
    match from_env(env, flag) {
        // urfave ignores empty numeric env vars.
        Some(f) if !f.value.is_empty() => f.value.parse().map_err(|e| invalid(&f, e)),
        _ => Ok(default(flag)),
    }
}
