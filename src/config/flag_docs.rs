//! docs/flags.md's flag table, made from what the code declares: each flag's names, default and
//! help from its clap field ([`super::arg_groups`]), the commands whose `--help` lists it
//! ([`super::modes::commands`]), and its env names, config-file key and where it has no effect
//! from its row ([`super::rows`]); then, for each command that reads its command line alone, its
//! flags from its clap fields, with what its `--help` says of where they are read from (no row
//! applies to them, so they have a table of their own). `tests/local/flag_docs.rs` keeps the file
//! equal to it.

use super::flag::Flag;
use super::flags::{declared, default_of, Cli};
use super::modes::commands;
use super::row::Reads;
use super::rows::row;
use clap::CommandFactory;

/// The line that opens the generated part of docs/flags.md.
pub const BEGIN: &str = "<!-- generated from the code by nvlabel::config::flag_docs: do not edit by hand; \
UPDATE_GOLDEN=1 cargo test --test local -- flag_docs:: rewrites it -->";

/// The line that closes it.
pub const END: &str = "<!-- end of the generated part -->";

/// `current` (docs/flags.md as it is) with its generated part made again; `None` where it has no
/// generated part (the markers are missing or out of order).
pub fn markdown(current: &str) -> Option<String> {
    let start = current.find(BEGIN)?;
    let end = current[start..].find(END)? + start + END.len();
    Some(format!("{}{}{}", &current[..start], part(), &current[end..]))
}

/// The generated part, markers included: one row per flag, in the resolver's order.
pub fn part() -> String {
    let mut md = format!("{BEGIN}\n\n");
    md += "| flag | commands | env | config file | default | help | no effect |\n";
    md += "|---|---|---|---|---|---|---|\n";
    let commands = commands();
    let declared = declared();
    for flag in Flag::ALL {
        let row = row(*flag);
        let Some((_, arg)) = declared.iter().find(|(f, _)| f == flag) else { continue };
        // The commands whose `--help` lists it, of those its row applies to.
        let shown: Vec<String> = commands
            .iter()
            .filter(|(_, reads, _)| reads.rows())
            .filter(|(_, _, cmd)| {
                cmd.get_arguments().any(|a| a.get_long() == Some(flag.name()) && !a.is_hide_set())
            })
            .map(
                |(name, _, _)| if name.is_empty() { "`nvlabel`".into() } else { format!("`nvlabel {name}`") },
            )
            .collect();
        let mut names = vec![format!("`--{flag}`")];
        names.extend(arg.get_visible_aliases().unwrap_or_default().iter().map(|a| format!("`--{a}`")));
        names.extend(arg.get_short().map(|s| format!("`-{s}`")));
        let env: Vec<String> = row.env.iter().map(|e| format!("`{e}`")).collect();
        let file = row.file.as_ref().map_or("—".to_string(), |k| format!("`flags.{}`", k.key));
        let (help, stated) = help(arg, row.gfd);
        let default = default_of(*flag).map(|d| format!("`{d}`")).or(stated).unwrap_or("none".into());
        let cells = [
            names.join(", "),
            or_dash(shown.join(", ")),
            or_dash(env.join(", ")),
            file,
            default,
            help,
            or_dash(no_effect(&row)),
        ];
        md += &line(&cells);
    }
    for (name, _, _) in commands.iter().filter(|(_, reads, _)| *reads == Reads::CommandLine) {
        md += &command_line_only(name);
    }
    md + "\n" + END
}

/// The table of the command named `name`, which reads its command line alone: each flag as its
/// clap field declares it (the same field as another command's, where they share one), what its
/// `--help` says after them, and no env or config-file column, since no row applies.
fn command_line_only(name: &str) -> String {
    let top = Cli::command();
    let cmd = name.split(' ').try_fold(&top, |cmd, sub| cmd.find_subcommand(sub));
    let Some(cmd) = cmd else { return String::new() };
    let mut md = format!("\n**`nvlabel {name}`**, command line only.");
    md += &match cmd.get_after_help() {
        Some(reads) => format!(" {}\n\n", reads.to_string().trim_end()),
        None => "\n\n".to_string(),
    };
    md += "| flag | default | help |\n|---|---|---|\n";
    for arg in cmd.get_arguments().filter(|a| a.get_long().is_some_and(|l| l != "help")) {
        let mut names: Vec<String> = arg.get_long().into_iter().map(|l| format!("`--{l}`")).collect();
        names.extend(arg.get_visible_aliases().unwrap_or_default().iter().map(|a| format!("`--{a}`")));
        names.extend(arg.get_short().map(|s| format!("`-{s}`")));
        let (help, stated) = help(arg, None);
        let declared = arg.get_default_values().first().map(|d| format!("`{}`", d.to_string_lossy()));
        md += &line(&[names.join(", "), declared.or(stated).unwrap_or("none".into()), help]);
    }
    md
}

/// One row of a table, its cells' `|` escaped.
fn line(cells: &[String]) -> String {
    let cells: Vec<String> = cells.iter().map(|c| c.replace('|', "\\|")).collect();
    format!("| {} |\n", cells.join(" | "))
}

/// The help its clap field declares, without the `[default: ...]` it ends with, if it does (the
/// default column says it: what its help says is returned with it), with where GFD accepts it
/// without effect (`accepted`, its row's, as `--help` adds it) and the values its parser takes
/// where they are a list.
fn help(arg: &clap::Arg, accepted: Option<&str>) -> (String, Option<String>) {
    let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
    let help = help.trim_end();
    let stated = help.strip_suffix(']').and_then(|h| h.rsplit_once(" [default: "));
    let (help, stated) = match stated {
        Some((help, default)) => (help.trim_end().to_string(), Some(default.to_string())),
        None => (help.to_string(), None),
    };
    let help = match accepted {
        Some(accepted) => format!("{help} ({accepted})"),
        None => help,
    };
    let values: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| format!("`{}`", v.get_name()))
        .collect();
    // A flag that hides its values says them in its help.
    let listed = values.is_empty() || arg.is_hide_possible_values_set();
    let help = match listed || !arg.get_action().takes_values() || arg.is_require_equals_set() {
        true => help,
        false => format!("{help} (values: {})", values.join(", ")),
    };
    (help, stated)
}

/// Where its row says it has no effect: the modes that never use it, then the runs that do not.
fn no_effect(row: &super::row::Row) -> String {
    let mut whys: Vec<&str> = Vec::new();
    for why in row.never_in.iter().map(|(_, why)| *why).chain(row.when.map(|(why, _)| why)) {
        if !whys.contains(&why) {
            whys.push(why);
        }
    }
    // Where GFD accepts a flag without effect is in the help column, as `--help` says it.
    whys.join("; ")
}

fn or_dash(text: String) -> String {
    if text.is_empty() {
        "—".into()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flag_has_one_row_with_its_default_and_env() {
        let part = part();
        let (rows, own) = part.split_once("\n**`nvlabel template`**, command line only. ").unwrap();
        assert_eq!(rows.lines().filter(|l| l.starts_with("| `--")).count(), Flag::ALL.len());
        let hold = part.lines().find(|l| l.starts_with("| `--health-recovery-hold`")).unwrap();
        assert!(
            hold.contains("| `NVLABEL_HEALTH_RECOVERY_HOLD` | `flags.healthRecoveryHold` | `2m` |"),
            "{hold}"
        );
        assert!(hold.contains("in `nvlabel health`, which reads once and keeps nothing"), "{hold}");
        // Template's flags, its own and the labeller's, in a table of their own, no row's.
        assert!(own.starts_with(super::super::template::READS), "{own}");
        for line in [
            "| `--snapshot` | none | The pool's GPUs from the snapshot of one of its nodes",
            "| `--count` | 1 | With --gpu: GPUs per node, 1 to 64 |",
            "| `--config-file` | none | Device-plugin config file; empty means none |",
            "| `--format` | `labels` | What to print: ",
        ] {
            assert!(own.lines().any(|l| l.starts_with(line)), "{line}: {own}");
        }
        assert!(!own.contains("GFD_CONFIG_FILE") && !own.contains("NVLABEL_"), "{own}");
        let doc = format!("before\n{BEGIN}\nold\n{END}\nafter\n");
        assert_eq!(markdown(&doc), Some(format!("before\n{part}\nafter\n")));
        assert_eq!(markdown("no markers"), None);
    }
}
