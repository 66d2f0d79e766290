//! docs/flags.md's flag table is what the code declares: its generated part equals
//! `nvlabel::config::flag_docs::markdown`'s, byte for byte; `UPDATE_GOLDEN=1` rewrites it (the
//! prose around it stays as written).

use crate::common;

use common::*;

#[test]
fn the_flag_table_is_what_the_code_declares() {
    let path = repo().join("docs/flags.md");
    let on_disk = std::fs::read_to_string(&path).unwrap();
    let made = nvlabel::config::flag_docs::markdown(&on_disk)
        .expect("docs/flags.md has its generated part, between flag_docs::BEGIN and flag_docs::END");
    if update_golden() {
        std::fs::write(&path, &made).unwrap();
        return;
    }
    assert!(
        on_disk == made,
        "docs/flags.md's flag table is stale: regenerate with UPDATE_GOLDEN=1 cargo test --test local -- flag_docs:: and review the diff"
    );
}

/// docs/flags.md lists every flag of a command that reads its command line alone (`nvlabel
/// template`), in that command's table, whichever of them share a name with a row's flag.
#[test]
fn the_flags_read_from_the_command_line_alone_are_listed() {
    use nvlabel::config::{modes::commands, row::Reads};
    let doc = std::fs::read_to_string(repo().join("docs/flags.md")).unwrap();
    let own: Vec<_> = commands().into_iter().filter(|(_, reads, _)| *reads == Reads::CommandLine).collect();
    assert!(own.iter().any(|(name, _, _)| name == "template"));
    for (name, _, cmd) in own {
        let marker = format!("**`nvlabel {name}`**, command line only.");
        let (_, table) = doc.split_once(&marker).unwrap_or_else(|| panic!("docs/flags.md has no {marker}"));
        let table = table.split("\n\n").nth(1).unwrap_or_default();
        for long in cmd.get_arguments().filter_map(|a| a.get_long()).filter(|l| *l != "help") {
            let row = format!("| `--{long}` |");
            assert!(table.lines().any(|l| l.starts_with(&row)), "docs/flags.md: `nvlabel {name}` --{long}");
        }
    }
}
