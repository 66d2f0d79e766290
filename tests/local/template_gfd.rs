//! `nvlabel template` against nodes GFD itself labelled (`testdata/gfd-labelled/`): for each,
//! the catalogue's template of a pool of such nodes is the labels GFD published there, byte for
//! byte, plus only what today's GFD adds that the source's older one did not.

use crate::common;

use common::*;
use serde::Deserialize;
use std::collections::BTreeMap;

/// One node GFD labelled.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Labelled {
    /// Where its labels were published.
    source: String,
    /// The template's command line of a pool of such nodes.
    args: Vec<String>,
    /// Labels today's GFD adds that the source's did not write yet.
    newer: BTreeMap<String, String>,
    /// Its `nvidia.com/` labels, `key=value` a line, less what a template never has.
    labels: String,
}

#[test]
fn the_catalogue_s_template_is_what_gfd_labelled_on_such_a_node() {
    let dir = repo().join("testdata/gfd-labelled");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let node: Labelled = serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(node.source.starts_with("https://"), "{}: says where it was published", path.display());
        let mut want: BTreeMap<String, String> = node
            .labels
            .lines()
            .map(|l| l.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())).unwrap())
            .collect();
        for (k, v) in &node.newer {
            assert!(want.insert(k.clone(), v.clone()).is_none(), "{}: {k} is not newer", path.display());
        }
        let want: String = want.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        let got = ok(nvlabel(None).arg("template").args(&node.args));
        assert_eq!(got, want, "{}", path.display());
        checked += 1;
    }
    assert!(checked >= 2, "the nodes of {}", dir.display());
}
