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
