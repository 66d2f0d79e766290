//! Nothing accepted and ignored: each flag's row ([`super::rows`]) says where it has no effect.
//! A flag given on the command line where its row says it has none is a usage error (exit 2, one
//! line naming the flag and the mode); the same flag from its environment variable is one
//! warning, never a failure, since the GPU Operator sets env for every mode. GFD's flags stay
//! accepted wherever GFD accepts them (their `--help` says so); only nvlabel's own modes refuse
//! them.

use super::flag::Flag;
use super::flags::{command, CommandKind};
use super::resolve::Env;
use super::row::{Mode, Reads, Run};
use super::rows::row;
use super::settings::Settings;
use crate::exit::Classify;
use crate::labels::AllocationMode;

/// The mode of `command` with these settings.
fn mode(command: Option<CommandKind>, settings: &Settings) -> Mode {
    match command {
        None if settings.oneshot => Mode::Oneshot,
        None => Mode::Daemon,
        Some(CommandKind::Probe) => Mode::Probe,
        Some(CommandKind::Prune) => Mode::Prune,
        Some(CommandKind::Hook) => Mode::Hook,
        Some(CommandKind::Health) => Mode::Health,
        Some(CommandKind::HealthClear) => Mode::HealthClear,
    }
}

/// A flag given on the command line where it has no effect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--{flag} has no effect {why}; leave it out")]
pub struct NoEffectError {
    /// The flag.
    pub flag: Flag,
    /// Where it has none.
    pub why: String,
}

impl Classify for NoEffectError {
    fn is_bad_configuration(&self) -> bool {
        true
    }
}

/// Checks the flags `given` on the command line and those set in `env` against their rows
/// ([`super::rows`]): the first given without effect is the error; each env var without effect
/// (its flag not given) is one warning in the returned list.
pub fn check(
    command: Option<CommandKind>,
    given: &[(Flag, String)],
    env: Env,
    settings: &Settings,
) -> Result<Vec<String>, NoEffectError> {
    let run = Run { mode: mode(command, settings), settings };
    let name = command_name(command);
    let takes: Vec<Flag> =
        all_flags().into_iter().filter(|(c, _)| *c == name).filter_map(|(_, f)| Flag::named(&f)).collect();
    let mut warnings = Vec::new();
    for row in Flag::ALL.iter().filter(|f| takes.contains(f)).map(|f| row(*f)) {
        let Some(why) = row.no_effect(&run) else { continue };
        if given.iter().any(|(g, _)| *g == row.flag) {
            return Err(NoEffectError { flag: row.flag, why: why.into() });
        }
        let mut names = row.env.iter().filter(|_| row.env_warns);
        if let Some(name) = names.find(|n| env(n).is_some()) {
            warnings.push(format!(
                "environment variable {name:?} (flag --{}) has no effect {why}; ignored",
                row.flag
            ));
        }
    }
    warnings.extend(choices_made_without_a_word(&run));
    Ok(warnings)
}

/// Values that take effect but not the one they name where this run cannot see what they need:
/// each is one warning, so the choice made is never silent.
fn choices_made_without_a_word(run: &Run) -> Vec<String> {
    let s = run.settings;
    let mut out = Vec::new();
    let reads_config = matches!(run.mode, Mode::Daemon | Mode::Oneshot | Mode::Hook);
    if reads_config && s.config_dir.is_some() && s.node_name.is_none() {
        out.push(format!(
            "--config-dir without a node name (--node-name or NODE_NAME): the node's {} label cannot be read, so the config key is chosen without it (--config-default, then `default`, then the only key)",
            super::select::CONFIG_LABEL
        ));
    }
    if run.mode == Mode::Hook && s.allocation_mode == AllocationMode::Auto {
        out.push(
            "`nvlabel hook` cannot see the node's ResourceSlices: --allocation-mode auto labels for the device plugin here (name dra on a node whose GPUs NVIDIA's DRA driver allocates)"
                .into(),
        );
    }
    out
}

/// The subcommand's name as clap knows it (`""` for the labeller; a nested one after its parent's).
fn command_name(command: Option<CommandKind>) -> &'static str {
    match command {
        None => "",
        Some(CommandKind::Probe) => "probe",
        Some(CommandKind::Prune) => "prune",
        Some(CommandKind::Hook) => "hook",
        Some(CommandKind::Health) => "health",
        Some(CommandKind::HealthClear) => "health clear",
    }
}

/// Every command, with its name (`""` for the labeller, `health clear` for a nested one) and
/// where it reads its flags from (as [`super::row::COMMANDS`] says).
pub fn commands() -> Vec<(String, Reads, clap::Command)> {
    let top = command();
    let mut out = vec![(String::new(), Reads::of_command(""), top.clone())];
    for sub in top.get_subcommands() {
        out.push((sub.get_name().to_string(), Reads::of_command(sub.get_name()), sub.clone()));
        for nested in sub.get_subcommands() {
            let name = format!("{} {}", sub.get_name(), nested.get_name());
            out.push((name.clone(), Reads::of_command(&name), nested.clone()));
        }
    }
    out
}

/// Every long flag of every command that reads its flags through the rows, with the command's
/// name (as [`commands`] names it): each is a row's.
pub fn all_flags() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (name, _, cmd) in commands().into_iter().filter(|(_, reads, _)| reads.rows()) {
        for a in cmd.get_arguments() {
            let acts = matches!(a.get_action(), clap::ArgAction::Help | clap::ArgAction::Version);
            if let (Some(long), false) = (a.get_long(), acts) {
                out.push((name.clone(), long.to_string()));
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "modes_tests.rs"]
mod tests;
