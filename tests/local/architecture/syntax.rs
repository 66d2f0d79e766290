//! What one Rust file says, read with `syn`: its out-of-line `mod` declarations, the names its
//! `use` items bring in, and every module path its non-test code names (`use` trees however
//! grouped, inline paths, paths inside macro and attribute tokens), made absolute; and the methods
//! its inherent `impl` blocks define and the method calls inside its `impl` blocks, by type.

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet};
use syn::punctuated::Punctuated;
use syn::visit::{self, Visit};

/// A module path from the crate root (`[]` is the root, `["config", "flags"]` is `config::flags`).
pub type ModPath = Vec<String>;

/// What one file says, before it is placed in a crate.
#[derive(Debug, Default)]
pub struct Parsed {
    /// Every crate path its non-test code names, absolute.
    pub refs: BTreeSet<ModPath>,
    /// Names its `use` items bring in (re-exports included), to the absolute path they stand for.
    pub imports: BTreeMap<String, ModPath>,
    /// The first names of the other paths it names: other crates (`std`, `nvml_wrapper`), and
    /// local names (`Self::new`, an enum's `Handle::Gpu`).
    pub external: BTreeSet<String>,
    /// Those other paths whole (`std::thread::spawn`, `tokio::time::Instant`), for the rules on
    /// what a room may name of other crates.
    pub foreign: BTreeSet<ModPath>,
    /// Its out-of-line `mod` declarations: name, `#[path]` if any, and whether only tests see it.
    pub mods: Vec<ModDecl>,
    /// (type, method) for every method its non-test inherent `impl` blocks define.
    pub methods: BTreeSet<(String, String)>,
    /// (type, method) for every method call (`.name(`, `Self::name(`) inside an `impl` of that
    /// type: the receiver is not resolved, so `self.inner.len()` counts as a call of `len`.
    pub calls: BTreeSet<(String, String)>,
}

/// One `mod name;` declaration.
#[derive(Debug, Clone)]
pub struct ModDecl {
    /// The module's name.
    pub name: String,
    /// The `#[path = "..."]` attribute's value.
    pub path: Option<String>,
    /// Declared under `#[cfg(test)]`.
    pub test: bool,
}

/// Whether attributes make an item test-only: `#[cfg(test)]`, or `#[cfg(all(test, ...))]`.
pub fn is_test(attrs: &[syn::Attribute]) -> bool {
    fn test_only(meta: &syn::Meta) -> bool {
        match meta {
            syn::Meta::Path(p) => p.is_ident("test"),
            syn::Meta::List(l) if l.path.is_ident("all") => l
                .parse_args_with(Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated)
                .is_ok_and(|all| all.iter().any(test_only)),
            _ => false,
        }
    }
    attrs.iter().any(|a| a.path().is_ident("cfg") && a.parse_args::<syn::Meta>().is_ok_and(|m| test_only(&m)))
}

/// Parses the file of module `module`: its out-of-line `mod`s, its imports and the paths it names.
pub fn parse(text: &str, module: &[String]) -> Result<Parsed, String> {
    let file = syn::parse_file(text).map_err(|e| format!("{e}"))?;
    let mut parsed = Parsed::default();
    for item in &file.items {
        if let syn::Item::Mod(m) = item {
            if m.content.is_none() {
                let path = m.attrs.iter().find(|a| a.path().is_ident("path")).and_then(|a| match &a.meta {
                    syn::Meta::NameValue(nv) => match &nv.value {
                        syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
                        _ => None,
                    },
                    _ => None,
                });
                parsed.mods.push(ModDecl { name: m.ident.to_string(), path, test: is_test(&m.attrs) });
            }
        }
    }
    let children = parsed.mods.iter().filter(|m| !m.test).map(|m| m.name.clone()).collect();
    let mut c = Collector { module: module.to_vec(), depth: 0, children, in_impl: None, parsed: &mut parsed };
    c.visit_file(&file);
    Ok(parsed)
}

/// Walks the syntax tree, skipping test items, collecting absolute crate paths.
struct Collector<'a> {
    module: ModPath,
    /// How deep inside inline `mod { }` blocks of this file the walk is.
    depth: usize,
    children: BTreeSet<String>,
    /// The type whose `impl` block the walk is in.
    in_impl: Option<String>,
    parsed: &'a mut Parsed,
}

impl Collector<'_> {
    /// The absolute form of a path as written, or `None` for one outside the crate (std, a
    /// dependency, a local name). A bare name counts only as a child module's path.
    fn absolute(&self, segments: &[String]) -> Option<ModPath> {
        let (first, rest) = segments.split_first()?;
        let mut base = self.module.clone();
        match first.as_str() {
            "crate" => base.clear(),
            "self" => {}
            "super" => {
                let mut rest = rest;
                base.pop()?;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
                base.extend(rest.iter().cloned());
                return Some(base);
            }
            name if self.depth == 0 && self.children.contains(name) => {
                base.extend(segments.iter().cloned());
                return Some(base);
            }
            _ => return None,
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    fn add(&mut self, segments: &[String]) {
        match self.absolute(segments) {
            Some(p) => _ = self.parsed.refs.insert(p),
            None => {
                self.parsed.external.insert(segments[0].clone());
                self.parsed.foreign.insert(segments.to_vec());
            }
        }
    }

    /// One `use` tree under `prefix`: every leaf path, and the names it brings in.
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree, top: bool) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree, top);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.import(prefix, &n.ident.to_string(), None, top),
            syn::UseTree::Rename(r) => {
                self.import(prefix, &r.ident.to_string(), Some(r.rename.to_string()), top)
            }
            syn::UseTree::Glob(_) => self.add(prefix),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t, top);
                }
            }
        }
    }

    fn import(&mut self, prefix: &[String], name: &str, rename: Option<String>, top: bool) {
        // `use a::b::{self}` names `a::b` itself.
        let mut full = prefix.to_vec();
        if name != "self" || prefix.is_empty() {
            full.push(name.to_string());
        }
        let Some(abs) = self.absolute(&full) else {
            self.parsed.external.insert(full[0].clone());
            self.parsed.foreign.insert(full);
            return;
        };
        if top {
            let alias = rename.unwrap_or_else(|| full.last().cloned().unwrap_or_default());
            self.parsed.imports.insert(alias, abs.clone());
        }
        self.parsed.refs.insert(abs);
    }

    /// Paths inside macro or attribute tokens: `crate::a::B`, `super::x`, `child::f`, and a
    /// grouped `crate::{a, b::C}` the way a `use` inside a macro writes it.
    fn tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        self.token_calls(&trees);
        let mut i = 0;
        while i < trees.len() {
            match &trees[i] {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Ident(id) if i == 0 || !is_colon(&trees[i - 1]) => {
                    let mut segments = vec![id.to_string()];
                    let mut j = i + 1;
                    while is_path_sep(&trees, j) {
                        match trees.get(j + 2) {
                            Some(TokenTree::Ident(next)) => segments.push(next.to_string()),
                            Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace => {
                                let parser = Punctuated::<syn::UseTree, syn::Token![,]>::parse_terminated;
                                if let Ok(items) = syn::parse::Parser::parse2(parser, g.stream()) {
                                    for t in &items {
                                        self.use_tree(&mut segments.clone(), t, false);
                                    }
                                }
                                segments.clear();
                            }
                            _ => break,
                        }
                        j += 3;
                    }
                    if segments.len() > 1 {
                        self.add(&segments);
                    }
                    i = j.max(i + 1);
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }
}

impl Collector<'_> {
    /// Method calls inside macro tokens (`tokio::select!`'s arms): `.name(` and `Self::name(`,
    /// recorded as [`Parsed::calls`] where the walk is inside an `impl`.
    fn token_calls(&mut self, trees: &[TokenTree]) {
        let Some(ty) = self.in_impl.clone() else { return };
        for (i, t) in trees.iter().enumerate() {
            let (Some(TokenTree::Ident(name)), Some(TokenTree::Group(args))) =
                (trees.get(i + 1), trees.get(i + 2))
            else {
                continue;
            };
            let dot = matches!(t, TokenTree::Punct(p) if p.as_char() == '.');
            let of_self = i >= 2
                && matches!(&trees[i - 2], TokenTree::Ident(s) if s == "Self")
                && is_path_sep(trees, i - 1);
            if args.delimiter() == Delimiter::Parenthesis && (dot || of_self) {
                self.parsed.calls.insert((ty.clone(), name.to_string()));
            }
        }
    }
}

fn is_colon(t: &TokenTree) -> bool {
    matches!(t, TokenTree::Punct(p) if p.as_char() == ':')
}

/// Whether `trees[j]` and `trees[j + 1]` are the two colons of `::`.
fn is_path_sep(trees: &[TokenTree], j: usize) -> bool {
    matches!((trees.get(j), trees.get(j + 1)), (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
        if a.as_char() == ':' && a.spacing() == proc_macro2::Spacing::Joint && b.as_char() == ':')
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            syn::Item::ExternCrate(i) => &i.attrs,
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::ForeignMod(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Macro(i) => &i.attrs,
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Trait(i) => &i.attrs,
            syn::Item::TraitAlias(i) => &i.attrs,
            syn::Item::Type(i) => &i.attrs,
            syn::Item::Union(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            _ => &[],
        };
        if !is_test(attrs) {
            visit::visit_item(self, item);
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let top = self.depth == 0;
        self.use_tree(&mut Vec::new(), &u.tree, top);
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        let ty = match &*i.self_ty {
            syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
            _ => None,
        };
        if let (Some(ty), None) = (&ty, &i.trait_) {
            for item in &i.items {
                if let syn::ImplItem::Fn(f) = item {
                    if !is_test(&f.attrs) {
                        self.parsed.methods.insert((ty.clone(), f.sig.ident.to_string()));
                    }
                }
            }
        }
        let outer = std::mem::replace(&mut self.in_impl, ty);
        visit::visit_item_impl(self, i);
        self.in_impl = outer;
    }

    fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
        if let Some(ty) = &self.in_impl {
            self.parsed.calls.insert((ty.clone(), m.method.to_string()));
        }
        visit::visit_expr_method_call(self, m);
    }

    fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
        if let (Some(ty), syn::Expr::Path(p)) = (&self.in_impl, &*c.func) {
            let segments = &p.path.segments;
            if segments.len() == 2 && segments[0].ident == "Self" {
                self.parsed.calls.insert((ty.clone(), segments[1].ident.to_string()));
            }
        }
        visit::visit_expr_call(self, c);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        for a in &m.attrs {
            self.visit_attribute(a);
        }
        if let Some((_, items)) = &m.content {
            self.module.push(m.ident.to_string());
            self.depth += 1;
            for item in items {
                self.visit_item(item);
            }
            self.depth -= 1;
            self.module.pop();
        }
    }

    fn visit_impl_item(&mut self, i: &'ast syn::ImplItem) {
        let attrs = match i {
            syn::ImplItem::Const(i) => &i.attrs[..],
            syn::ImplItem::Fn(i) => &i.attrs,
            syn::ImplItem::Type(i) => &i.attrs,
            syn::ImplItem::Macro(i) => &i.attrs,
            _ => &[],
        };
        if !is_test(attrs) {
            visit::visit_impl_item(self, i);
        }
    }

    fn visit_field(&mut self, f: &'ast syn::Field) {
        if !is_test(&f.attrs) {
            visit::visit_field(self, f);
        }
    }

    fn visit_variant(&mut self, v: &'ast syn::Variant) {
        if !is_test(&v.attrs) {
            visit::visit_variant(self, v);
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        // A bare name is a local or an import (counted at its `use`), not a module path.
        if p.leading_colon.is_none()
            && (segments.len() > 1 || matches!(segments[0].as_str(), "crate" | "super"))
        {
            self.add(&segments);
        }
        visit::visit_path(self, p);
    }

    fn visit_attribute(&mut self, a: &'ast syn::Attribute) {
        match &a.meta {
            syn::Meta::List(l) => self.tokens(l.tokens.clone()),
            // `#[doc = "..."]` is a string: an intra-doc link is not a dependency.
            syn::Meta::NameValue(nv) => self.visit_expr(&nv.value),
            syn::Meta::Path(_) => {}
        }
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.visit_path(&m.path);
        self.tokens(m.tokens.clone());
    }

    // `pub(crate)`, `pub(super)` say who may see an item, not what it uses.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}
}
