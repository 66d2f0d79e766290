//! The import reader and the rules' helpers on small sources, so that a reader that misses a
//! kind of path fails here rather than letting the rules pass on less than the code says.

use crate::architecture::imports;
use crate::architecture::syntax::{parse, ModPath};
use std::collections::BTreeSet;

fn path(p: &str) -> ModPath {
    p.split("::").filter(|s| !s.is_empty()).map(String::from).collect()
}

fn module(p: &str) -> Vec<String> {
    path(p)
}

fn refs(text: &str, at: &str) -> BTreeSet<ModPath> {
    parse(text, &module(at)).unwrap().refs
}

#[test]
fn every_leaf_of_a_grouped_import_is_seen() {
    let text =
        "use crate::{a::X, b::{c, d::{self, E}}};\nuse super::e::{self as f, G as H};\nuse std::fmt;\n";
    let parsed = parse(text, &module("m::n")).unwrap();
    for want in ["a::X", "b::c", "b::d", "b::d::E", "m::e", "m::e::G"] {
        assert!(parsed.refs.contains(&path(want)), "{want} was not seen: {:?}", parsed.refs);
    }
    assert_eq!(parsed.imports.get("f"), Some(&path("m::e")));
    assert_eq!(parsed.imports.get("H"), Some(&path("m::e::G")));
    assert!(parsed.external.contains("std"), "{:?}", parsed.external);
}

#[test]
fn code_after_a_mid_file_test_module_is_seen_and_test_code_is_not() {
    let text = r#"
        fn before() { crate::before::f(); }
        #[cfg(test)]
        mod tests {
            use crate::only_tests::T;
            fn t() { crate::only_tests::g(); }
        }
        #[cfg(all(test, unix))]
        fn helper() { crate::only_tests::h(); }
        impl S {
            #[cfg(test)]
            fn t() { crate::only_tests::i(); }
            fn kept() { crate::kept::j(); }
        }
        #[cfg(not(test))]
        fn not_test() { crate::not_test::k(); }
        fn after() { crate::after::f(); }
    "#;
    let seen = refs(text, "m");
    for want in ["before::f", "kept::j", "not_test::k", "after::f"] {
        assert!(seen.contains(&path(want)), "{want} was not seen: {seen:?}");
    }
    assert!(!seen.iter().any(|p| p[0] == "only_tests"), "test code was read: {seen:?}");
}

#[test]
fn super_self_and_child_paths_are_seen() {
    let text = "mod child;\nfn f() -> super::source::ReloadError { super::super::top::g(); self::own::h(); child::i() }";
    let seen = refs(text, "config::usage");
    for want in ["config::source::ReloadError", "top::g", "config::usage::own::h", "config::usage::child::i"]
    {
        assert!(seen.contains(&path(want)), "{want} was not seen: {seen:?}");
    }
}

#[test]
fn paths_in_macros_and_attributes_are_seen_and_doc_links_are_not() {
    let text = r#"
        mod child;
        /// See [`crate::doc_only::X`].
        #[derive(thiserror::Error, Debug)]
        #[error("{}", child::describe(0))]
        struct E;
        fn f() { println!("{}", crate::in_macro::g()); }
        macro_rules! m { () => { $crate::in_rules::h(); use crate::{grouped::A, other::B}; } }
        #[arg(default_value = crate::in_attr::DEFAULT)]
        struct F;
    "#;
    let seen = refs(text, "");
    for want in
        ["child::describe", "in_macro::g", "in_rules::h", "grouped::A", "other::B", "in_attr::DEFAULT"]
    {
        assert!(seen.contains(&path(want)), "{want} was not seen: {seen:?}");
    }
    assert!(!seen.iter().any(|p| p[0] == "doc_only"), "a doc link was read: {seen:?}");
}

const X: &str = "pub struct Thing;\npub fn f() { crate::b::g() }\n";

/// A small crate on disk: re-exports, a circle inside a module, and test-only files.
fn tiny_crate(name: &str, x: &str, y: &str) -> imports::Crate {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    let files = [
        ("lib.rs", "mod a;\nmod b;\n#[cfg(test)]\n#[path = \"b_tests.rs\"]\nmod b_tests;\n"),
        ("a/mod.rs", "mod x;\nmod y;\npub use x::Thing;\n"),
        ("a/x.rs", x),
        ("a/y.rs", y),
        ("b.rs", "pub fn g() {}\n#[cfg(test)]\nmod tests;\n"),
        ("b/tests.rs", "use crate::a::y::Other;\n"),
        ("b_tests.rs", "use crate::a::y::Other;\n"),
    ];
    for (file, text) in files {
        let p = dir.join(file);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    imports::load(&dir, "lib.rs").unwrap()
}

#[test]
fn a_reexport_leads_to_the_file_that_defines_the_item() {
    let krate = tiny_crate("arch-reexport", X, "use super::Thing;\npub struct Other;\n");
    let g = krate.graph(&module("a"));
    assert_eq!(g["y"], BTreeSet::from(["x".to_string()]), "{g:?}");
    assert_eq!(crate::architecture::circle(&g), None);
    let top = krate.graph(&[]);
    assert_eq!(top["a"], BTreeSet::from(["b".to_string()]), "{top:?}");
    assert!(top["b"].is_empty(), "test files were read: {top:?}");
    let tests: Vec<&str> = krate.test_files.iter().map(String::as_str).collect();
    assert_eq!(tests, ["b/tests.rs", "b_tests.rs"]);
}

#[test]
fn a_circle_inside_a_module_is_found() {
    let y = "pub struct Other;\npub fn h() { super::x::f() }\n";
    let krate = tiny_crate("arch-no-circle", X, y);
    assert_eq!(crate::architecture::circle(&krate.graph(&module("a"))), None);
    let x = "pub struct Thing;\npub fn f() { super::y::h() }\n";
    let krate = tiny_crate("arch-circle", x, y);
    assert_eq!(crate::architecture::circle(&krate.graph(&module("a"))).as_deref(), Some("x -> y -> x"));
}

#[test]
fn a_rule_naming_a_missing_module_fails() {
    let krate = tiny_crate("arch-missing", X, "pub struct Other;\n");
    let g = krate.graph(&[]);
    assert_eq!(crate::architecture::missing(&g, &["a", "b", "renamed"]), ["renamed"]);
    let asked = std::panic::catch_unwind(|| crate::architecture::uses(&g, "renamed").len());
    assert!(asked.is_err(), "a rule about a missing module passed");
}

#[test]
fn methods_of_a_split_impl_and_calls_to_them_are_seen() {
    let text = r#"
        impl Daemon {
            pub fn serve(&mut self) { self.check(); self.inner.len(); Self::helper(); }
            #[cfg(test)]
            fn only_tests(&self) { self.tested(); }
        }
        impl Drop for Daemon { fn drop(&mut self) { self.close(); } }
        impl<T> Wrapper<T> { fn wrap(&self) { tokio::select! { _ = self.in_macro() => {} } } }
        fn free() { x.not_in_an_impl(); }
    "#;
    let parsed = parse(text, &module("daemon::serve")).unwrap();
    let pairs = |v: &[(&str, &str)]| -> BTreeSet<(String, String)> {
        v.iter().map(|(t, n)| (t.to_string(), n.to_string())).collect()
    };
    assert_eq!(parsed.methods, pairs(&[("Daemon", "serve"), ("Wrapper", "wrap")]), "inherent methods");
    let calls = [
        ("Daemon", "check"),
        ("Daemon", "len"),
        ("Daemon", "helper"),
        ("Daemon", "close"),
        ("Wrapper", "in_macro"),
    ];
    assert_eq!(parsed.calls, pairs(&calls), "calls inside impls of a type");
}

#[test]
fn siblings_calling_each_other_through_a_split_impl_make_a_circle() {
    let x = "pub struct Thing;\nimpl Thing { pub fn f(&self) { self.h() } }\n";
    // The reader does not compile: `y` names `Thing` without importing it, so that the only
    // edge between the files is the call.
    let y = "impl Thing { pub fn h(&self) {} }\npub struct Other;\n";
    let krate = tiny_crate("arch-split-one-way", x, y);
    let g = krate.graph(&module("a"));
    assert_eq!(g["x"], BTreeSet::from(["y".to_string()]), "a call into a sibling's impl: {g:?}");
    assert_eq!(crate::architecture::circle(&g), None);
    let y = "impl Thing { pub fn h(&self) { self.f() } }\npub struct Other;\n";
    let krate = tiny_crate("arch-split-circle", x, y);
    assert_eq!(crate::architecture::circle(&krate.graph(&module("a"))).as_deref(), Some("x -> y -> x"));
    // A call of a method the file defines itself, or one a sibling defines only for another
    // type, is no edge.
    let x = "pub struct Thing;\nimpl Thing { fn k(&self) {} fn g(&self) { self.k(); self.f() } }\n";
    let y = "impl super::Thing { fn k(&self) {} }\nimpl Other { fn f(&self) {} }\npub struct Other;\n";
    let krate = tiny_crate("arch-split-none", x, y);
    let g = krate.graph(&module("a"));
    assert!(g["x"].is_empty(), "{g:?}");
}
