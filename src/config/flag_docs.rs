//! docs/flags.md's flag table, made from what the code declares: each flag's names, default and
//! help from its clap field ([`super::arg_groups`]), the commands whose `--help` lists it
//! ([`super::modes::commands`]), and its env names, config-file key and where it has no effect
//! from its row ([`super::rows`]). `tests/local/flag_docs.rs` keeps the file equal to it.

use super::flag::Flag;
use super::flags::{declared, default_of};
use super::modes::commands;
use super::rows::row;

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
        let default = default_of(*flag).map_or("none".to_string(), |d| format!("`{d}`"));
        let help = help(arg, row.gfd);
        let cells = [
            names.join(", "),
            or_dash(shown.join(", ")),
            or_dash(env.join(", ")),
            file,
            default,
            help,
            or_dash(no_effect(&row)),
        ];
        let cells: Vec<String> = cells.iter().map(|c| c.replace('|', "\\|")).collect();
        md += &format!("| {} |\n", cells.join(" | "));
    }
    md + "\n" + END
}

/// The help its clap field declares, without the `[default: none]` the default column says, with
/// where GFD accepts it without effect (`accepted`, its row's, as `--help` adds it) and the values
/// its parser takes where they are a list.
fn help(arg: &clap::Arg, accepted: Option<&str>) -> String {
    let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
    let help = help.trim_end().strip_suffix("[default: none]").unwrap_or(&help).trim_end().to_string();
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
    match values.is_empty() || !arg.get_action().takes_values() || arg.is_require_equals_set() {
        true => help,
        false => format!("{help} (values: {})", values.join(", ")),
    }
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
        assert_eq!(part.lines().filter(|l| l.starts_with("| `--")).count(), Flag::ALL.len());
        let hold = part.lines().find(|l| l.starts_with("| `--health-recovery-hold`")).unwrap();
        assert!(
            hold.contains("| `NVLABEL_HEALTH_RECOVERY_HOLD` | `flags.healthRecoveryHold` | `2m` |"),
            "{hold}"
        );
        assert!(hold.contains("in `nvlabel health`, which reads once and keeps nothing"), "{hold}");
        let doc = format!("before\n{BEGIN}\nold\n{END}\nafter\n");
        assert_eq!(markdown(&doc), Some(format!("before\n{part}\nafter\n")));
        assert_eq!(markdown("no markers"), None);
    }
}
