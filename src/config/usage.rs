//! Usage errors: one rule wherever a flag's value comes from. An unknown flag, or a value nvlabel
//! cannot use given on the command line, in an environment variable or in the config file's
//! `flags` (at start-up), stops nvlabel before it does anything, with exit status 2 and one line
//! `nvlabel: error: ...` that names the flag and where the value came from. The rest of a bad
//! configuration exits with the same status (`crate::exit`). A config file's `flags` that turn
//! bad on reload are a rejected reload instead.

use super::flags::{command, Cli, Command};

/// The exit status of a usage error: that of every bad configuration.
pub const EXIT: i32 = crate::exit::BAD_CONFIGURATION;

// Beside the rule it applies rather than in flags.rs, so flags.rs stays the command line's
// definition alone.
impl Cli {
    /// Parses the process's arguments. `--help`, `--version` and `nvlabel help` print and exit
    /// 0; a usage error prints one line and exits 2 (see the module's comment).
    pub fn from_args() -> Cli {
        let cli = match Cli::try_from_args(std::env::args_os()) {
            Ok(cli) => cli,
            Err(e) if !e.use_stderr() => e.exit(),
            Err(e) => {
                eprintln!("nvlabel: error: {}", one_line(&e, &command()));
                std::process::exit(EXIT)
            }
        };
        if let Some(Command::Help { command: name }) = &cli.command {
            let mut top = command();
            top.build();
            let printed = match name.as_deref().and_then(|n| top.find_subcommand_mut(n)) {
                Some(sub) => sub.print_help(),
                None => top.print_help(),
            };
            std::process::exit(i32::from(printed.is_err()));
        }
        cli
    }
}

/// Clap's error as one line: its message, and its tip unless the tip misleads (a flag of the
/// labeler given to a subcommand gets "a similar argument" of the subcommand suggested).
pub fn one_line(e: &clap::Error, top: &clap::Command) -> String {
    if let Some(invalid) = super::resolve::invalid_on_command_line(e) {
        return invalid.to_string();
    }
    let text = e.render().to_string();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or_default();
    let message = first.strip_prefix("error: ").unwrap_or(first).to_string();
    if e.kind() == clap::error::ErrorKind::UnknownArgument {
        let arg = match e.get(clap::error::ContextKind::InvalidArg) {
            Some(clap::error::ContextValue::String(s)) => s.split('=').next().unwrap_or_default().to_string(),
            _ => String::new(),
        };
        // A short flag (`-o`) stands for the labeller's long one it is short for.
        let short = arg.strip_prefix('-').filter(|s| s.len() == 1).and_then(|s| s.chars().next());
        let long_of_short = short.and_then(|c| top.get_arguments().find(|a| a.get_short() == Some(c)));
        let long = arg.strip_prefix("--").or(long_of_short.and_then(|a| a.get_long()));
        // "Usage: nvlabel probe [OPTIONS]" names the subcommand.
        let sub = text.lines().find_map(|l| l.trim().strip_prefix("Usage: nvlabel ")).and_then(|rest| {
            rest.split_whitespace().next().filter(|w| top.get_subcommands().any(|s| s.get_name() == *w))
        });
        let labeler_flag = long.is_some_and(|l| top.get_arguments().any(|a| a.get_long() == Some(l)));
        if let (Some(sub), true) = (sub, labeler_flag) {
            let named = match (short, long) {
                (Some(_), Some(long)) => format!("{arg} (--{long})"),
                _ => arg.clone(),
            };
            return format!("{message}: `nvlabel {sub}` does not use {named} (see `nvlabel help {sub}`)");
        }
    }
    if e.kind() == clap::error::ErrorKind::ArgumentConflict {
        if let Some(line) = before_subcommand(&message, &text, top) {
            return line;
        }
    }
    // Clap lists the accepted values on a line of their own; the one line keeps them.
    let mut message = message;
    if let Some(clap::error::ContextValue::Strings(values)) = e.get(clap::error::ContextKind::ValidValue) {
        if let Some((last, rest)) =
            values.split_last().filter(|_| e.kind() == clap::error::ErrorKind::InvalidValue)
        {
            let accepted =
                if rest.is_empty() { last.clone() } else { format!("{} or {last}", rest.join(", ")) };
            message = format!("{message}: use {accepted}");
        }
    }
    match lines.find(|l| l.starts_with("tip:")) {
        Some(tip) => format!("{message} ({tip})"),
        None => message,
    }
}

/// Flags given before a subcommand (`nvlabel --node-name n prune`): clap's conflict names them
/// on lines of their own when there are several, and never says that a subcommand's flags go
/// after it. The one line names them all, says where those the subcommand takes go, and which
/// it does not take.
fn before_subcommand(message: &str, text: &str, top: &clap::Command) -> Option<String> {
    let sub_name = message.strip_prefix("the subcommand '")?.split('\'').next()?;
    let sub = top.get_subcommands().find(|s| s.get_name() == sub_name)?;
    let quoted = message.split_once("cannot be used with '").map(|(_, rest)| rest.trim_end_matches('\''));
    let listed = text.lines().skip(1).map(str::trim).take_while(|l| l.starts_with('-'));
    let flags: Vec<String> = quoted
        .into_iter()
        .chain(listed)
        .filter_map(|f| f.split([' ', '[', '=']).next())
        .filter(|f| f.starts_with("--"))
        .map(String::from)
        .collect();
    if flags.is_empty() {
        return None;
    }
    // A flag its help leaves out is one it refuses: never "put it after".
    let takes =
        |f: &str| sub.get_arguments().any(|a| a.get_long() == f.strip_prefix("--") && !a.is_hide_set());
    let (after, foreign): (Vec<&String>, Vec<&String>) = flags.iter().partition(|f| takes(f));
    let list = |fs: &[&String]| fs.iter().map(|f| f.as_str()).collect::<Vec<_>>().join(" and ");
    let mut line = format!(
        "the subcommand '{sub_name}' cannot be used with {} given before it",
        list(&flags.iter().collect::<Vec<_>>())
    );
    if !after.is_empty() {
        let example: Vec<String> = after.iter().map(|f| format!("{f} ...")).collect();
        line += &format!(": put {} after it (`nvlabel {sub_name} {}`)", list(&after), example.join(" "));
    }
    if !foreign.is_empty() {
        line += &format!(
            "; `nvlabel {sub_name}` does not use {} (see `nvlabel help {sub_name}`)",
            list(&foreign)
        );
    }
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_error(args: &[&str]) -> String {
        let top = crate::config::flags::command();
        let e = top.clone().try_get_matches_from(args).unwrap_err();
        one_line(&e, &top)
    }

    #[test]
    fn clap_errors_become_one_line() {
        let cases = [
            (
                "bad boolean",
                &["nvlabel", "--oneshot=maybe"][..],
                "invalid value 'maybe' for '--oneshot[=<ONESHOT>]': invalid boolean \"maybe\": use true or false",
            ),
            (
                "a labeler flag after a subcommand",
                &["nvlabel", "probe", "--oneshot"],
                "unexpected argument '--oneshot' found: `nvlabel probe` does not use --oneshot (see `nvlabel help probe`)",
            ),
            (
                "a flag prune would ignore",
                &["nvlabel", "prune", "--snapshot", "x"],
                "unexpected argument '--snapshot' found: `nvlabel prune` does not use --snapshot (see `nvlabel help prune`)",
            ),
            (
                "a short flag of the labeler after a subcommand",
                &["nvlabel", "hook", "-o", ""],
                "unexpected argument '-o' found: `nvlabel hook` does not use -o (--output-file) (see `nvlabel help hook`)",
            ),
            (
                "a value not among the flag's values",
                &["nvlabel", "--mig-strategy", "foo"],
                "invalid value 'foo' for '--mig-strategy <MIG_STRATEGY>': use none, single or mixed",
            ),
            ("two values", &["nvlabel", "--log-format=yaml"], "invalid value 'yaml' for '--log-format <LOG_FORMAT>': use text or json"),
            (
                "a value missing",
                &["nvlabel", "--sink"],
                "a value is required for '--sink <SINK>' but none was supplied: use gfd or node",
            ),
            (
                "a near miss",
                &["nvlabel", "--mig-strategy=singel"],
                "invalid value 'singel' for '--mig-strategy <MIG_STRATEGY>': use none, single or mixed (tip: a similar value exists: 'single')",
            ),
            (
                "two flags before a subcommand that takes them",
                &["nvlabel", "--node-name", "n", "--kubeconfig", "k", "prune"],
                "the subcommand 'prune' cannot be used with --node-name and --kubeconfig given before it: put --node-name and --kubeconfig after it (`nvlabel prune --node-name ... --kubeconfig ...`)",
            ),
            (
                "a flag before a subcommand that does not take it",
                &["nvlabel", "--oneshot", "health"],
                "the subcommand 'health' cannot be used with --oneshot given before it; `nvlabel health` does not use --oneshot (see `nvlabel help health`)",
            ),
            (
                "a flag before a subcommand that parses it but never uses it",
                &["nvlabel", "--namespace", "x", "hook"],
                "the subcommand 'hook' cannot be used with --namespace given before it; `nvlabel hook` does not use --namespace (see `nvlabel help hook`)",
            ),
            (
                "both",
                &["nvlabel", "--node-name", "n", "--oneshot", "prune"],
                "the subcommand 'prune' cannot be used with --node-name and --oneshot given before it: put --node-name after it (`nvlabel prune --node-name ...`); `nvlabel prune` does not use --oneshot (see `nvlabel help prune`)",
            ),
            (
                "a typo",
                &["nvlabel", "--mig-stratgy", "single"],
                "unexpected argument '--mig-stratgy' found (tip: a similar argument exists: '--mig-strategy')",
            ),
        ];
        for (name, args, want) in cases {
            assert_eq!(parse_error(args), want, "{name}");
        }
    }
}
