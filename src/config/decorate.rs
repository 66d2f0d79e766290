//! What the rows add to the clap command ([`super::flags`]): each flag's env names and where GFD
//! accepts it without effect in its help, and in each subcommand only the flags its mode can use
//! (the others still parse, to be refused with why by [`super::modes`]); for the parser, no
//! defaults, so that a flag not given parses as `None`. A command that reads its command line
//! alone ([`Reads::CommandLine`]) has no row applied to its flags, whatever their names.

use super::flag::Flag;
use super::row::{Mode, Reads};
use super::rows::row;

/// `cmd` (named `name`, `""` for the labeller, `health clear` for a nested one) and its
/// subcommands, from the rows where the command reads its flags through them.
pub fn decorate(cmd: clap::Command, name: &str, defaults: bool) -> clap::Command {
    let reads = Reads::of_command(name);
    let modes = Mode::of_command(name);
    let cmd = cmd.mut_args(|arg| {
        if matches!(arg.get_action(), clap::ArgAction::Help | clap::ArgAction::Version) {
            return arg;
        }
        // Where the command reads its command line alone, no flag of it is a row's.
        let row = arg.get_long().and_then(Flag::named).filter(|_| reads.rows()).map(row);
        if row.is_none() && reads.rows() {
            return arg;
        }
        let mut tail = String::new();
        if let Some(accepted) = row.as_ref().and_then(|r| r.gfd) {
            tail += &format!(" ({accepted})");
        }
        if let Some(env) = row.as_ref().map(|r| r.env).filter(|env| !env.is_empty()) {
            tail += &format!(" [env: {}]", env.join(", "));
        }
        // The values' docs are for the code: `--help` lists the values on the flag's line, after
        // its default, as clap does for values without docs (a flag that hides them says them).
        let values = arg.get_possible_values();
        let mut arg = arg;
        if values.iter().any(|v| v.get_help().is_some()) && !arg.is_hide_possible_values_set() {
            if let Some(default) = arg.get_default_values().first().filter(|_| defaults) {
                tail += &format!(" [default: {}]", default.to_string_lossy());
            }
            let names: Vec<&str> = values.iter().filter(|v| !v.is_hide_set()).map(|v| v.get_name()).collect();
            tail += &format!(" [possible values: {}]", names.join(", "));
            arg = arg.hide_default_value(true).hide_possible_values(true);
        }
        if !tail.is_empty() {
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            arg = arg.help(format!("{help}{tail}"));
        }
        if !defaults {
            arg = arg.default_value(None::<&'static str>);
        }
        let Some(row) = row else { return arg };
        // Refused in every run of this command: not listed.
        let never = !modes.is_empty() && modes.iter().all(|m| row.never(*m));
        arg.hide(never)
    });
    let subs: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_string()).collect();
    subs.iter().fold(cmd, |cmd, sub| cmd.mut_subcommand(sub, |s| decorate(s, &path(name, sub), defaults)))
}

/// The name of `sub` under the command named `parent` (`""` for the labeller).
pub fn path(parent: &str, sub: &str) -> String {
    if parent.is_empty() {
        sub.to_string()
    } else {
        format!("{parent} {sub}")
    }
}
