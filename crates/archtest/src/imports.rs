//! Which file of a crate imports which: every path that names an item of the same crate
//! (`crate::…`, `super::…`, `self::…`, or a child module), in `use` items, types, expressions
//! and macro arguments, resolved through `mod.rs` re-exports to the file that defines it.

use crate::source::SourceFile;
use proc_macro2::{TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet};
use syn::visit::Visit;

/// A module path, e.g. `["engine", "batch"]`.
type ModPath = Vec<String>;

/// The import graph of one crate: file → the files it imports.
pub type Edges = BTreeMap<String, BTreeSet<String>>;

/// Builds the file-level import graph of one crate's modules.
pub fn edges(modules: &BTreeMap<ModPath, SourceFile>) -> Edges {
    let reexports: BTreeMap<ModPath, BTreeMap<String, ModPath>> = modules
        .iter()
        .map(|(m, f)| (m.clone(), module_uses(modules, m, &f.ast)))
        .collect();
    let resolver = Resolver {
        modules,
        reexports: &reexports,
    };
    let mut out = Edges::new();
    for (m, f) in modules {
        let targets = out.entry(f.rel.clone()).or_default();
        for path in named_paths(modules, m, &f.ast) {
            if let Some(target) = resolver.file_of(&path, 0)
                && target != *m
                && let Some(tf) = modules.get(&target)
            {
                targets.insert(tf.rel.clone());
            }
        }
    }
    out
}

/// The paths into its own crate that one module file names, as written but made absolute
/// (`super::keys::X` in `bullmq/scripts` is `["bullmq", "keys", "X"]`); re-exports are not
/// followed, so this is how a file reaches an item, not where the item lives.
pub fn named_paths(
    modules: &BTreeMap<ModPath, SourceFile>,
    module: &ModPath,
    ast: &syn::File,
) -> Vec<ModPath> {
    let mut refs = Refs {
        here: module.clone(),
        inline: Vec::new(),
        found: Vec::new(),
        modules,
    };
    refs.visit_file(ast);
    refs.found
}

struct Resolver<'a> {
    modules: &'a BTreeMap<ModPath, SourceFile>,
    reexports: &'a BTreeMap<ModPath, BTreeMap<String, ModPath>>,
}

impl Resolver<'_> {
    /// The module file that defines what `path` (absolute) names.
    fn file_of(&self, path: &[String], depth: usize) -> Option<ModPath> {
        let mut m: ModPath = Vec::new();
        let mut i = 0;
        while i < path.len() {
            let mut next = m.clone();
            next.push(path[i].clone());
            if !self.modules.contains_key(&next) {
                break;
            }
            m = next;
            i += 1;
        }
        if i == path.len() || depth > 8 {
            return Some(m);
        }
        match self.reexports.get(&m).and_then(|r| r.get(&path[i])) {
            Some(target) => {
                let mut full = target.clone();
                full.extend_from_slice(&path[i + 1..]);
                self.file_of(&full, depth + 1).or(Some(m))
            }
            None => Some(m),
        }
    }
}

/// The names a module file's own top-level `use` items bring in, each with its absolute path.
fn module_uses(
    modules: &BTreeMap<ModPath, SourceFile>,
    here: &ModPath,
    ast: &syn::File,
) -> BTreeMap<String, ModPath> {
    let mut out = BTreeMap::new();
    for item in &ast.items {
        if let syn::Item::Use(u) = item {
            let mut flat = Vec::new();
            flatten(&u.tree, Vec::new(), &mut flat);
            for (path, name) in flat {
                if let (Some(abs), Some(name)) = (absolute(modules, here, &path), name) {
                    out.insert(name, abs);
                }
            }
        }
    }
    out
}

/// A `use` tree as paths, each with the name it binds (`None` for a glob).
fn flatten(tree: &syn::UseTree, prefix: Vec<String>, out: &mut Vec<(Vec<String>, Option<String>)>) {
    let with = |seg: String| {
        let mut p = prefix.clone();
        p.push(seg);
        p
    };
    match tree {
        syn::UseTree::Path(p) => flatten(&p.tree, with(p.ident.to_string()), out),
        syn::UseTree::Name(n) if n.ident == "self" => {
            let name = prefix.last().cloned();
            out.push((prefix, name));
        }
        syn::UseTree::Name(n) => out.push((with(n.ident.to_string()), Some(n.ident.to_string()))),
        syn::UseTree::Rename(r) => {
            let path = if r.ident == "self" {
                prefix
            } else {
                with(r.ident.to_string())
            };
            out.push((path, Some(r.rename.to_string())));
        }
        syn::UseTree::Glob(_) => out.push((prefix, None)),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten(t, prefix.clone(), out);
            }
        }
    }
}

/// `path` as an absolute module path seen from module `here`, when it names this crate.
fn absolute(
    modules: &BTreeMap<ModPath, SourceFile>,
    here: &[String],
    path: &[String],
) -> Option<ModPath> {
    let first = path.first()?;
    let mut base: ModPath = match first.as_str() {
        "crate" => Vec::new(),
        "self" => here.to_vec(),
        "super" => here[..here.len().checked_sub(1)?].to_vec(),
        _ => {
            let mut child = here.to_vec();
            child.push(first.clone());
            if !modules.contains_key(&child) {
                return None;
            }
            return Some(child.into_iter().chain(path[1..].iter().cloned()).collect());
        }
    };
    let mut rest = &path[1..];
    while rest.first().is_some_and(|s| s == "super") {
        base.pop();
        rest = &rest[1..];
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// Collects the paths one file names, as absolute module paths.
struct Refs<'a> {
    here: ModPath,
    inline: Vec<String>,
    found: Vec<ModPath>,
    modules: &'a BTreeMap<ModPath, SourceFile>,
}

impl Refs<'_> {
    fn record(&mut self, path: &[String]) {
        let mut at = self.here.clone();
        at.extend(self.inline.iter().cloned());
        if let Some(abs) = absolute(self.modules, &at, path)
            && !abs.starts_with(&at)
        {
            self.found.push(abs);
        }
    }
}

impl<'ast> Visit<'ast> for Refs<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if m.content.is_some() {
            self.inline.push(m.ident.to_string());
            syn::visit::visit_item_mod(self, m);
            self.inline.pop();
        }
    }

    /// `pub(super)` and `pub(crate)` name a module only to say who may see an item.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut flat = Vec::new();
        flatten(&u.tree, Vec::new(), &mut flat);
        for (path, _) in flat {
            self.record(&path);
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        self.record(&segs);
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        let mut flat = Vec::new();
        tokens(m.tokens.clone(), &mut flat);
        for path in paths_in(&flat) {
            self.record(&path);
        }
        syn::visit::visit_macro(self, m);
    }
}

/// A token stream flattened (groups opened), as identifiers and `::` markers.
fn tokens(ts: TokenStream, out: &mut Vec<String>) {
    for t in ts {
        match t {
            TokenTree::Group(g) => {
                out.push(String::new());
                tokens(g.stream(), out);
                out.push(String::new());
            }
            TokenTree::Ident(i) => out.push(i.to_string()),
            TokenTree::Punct(p) if p.as_char() == ':' => out.push(":".into()),
            TokenTree::Punct(_) | TokenTree::Literal(_) => out.push(String::new()),
        }
    }
}

/// The `crate::a::b` and `super::a` paths in a flattened macro argument.
fn paths_in(flat: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < flat.len() {
        if flat[i] == "crate" || flat[i] == "super" {
            let mut path = vec![flat[i].clone()];
            let mut j = i + 1;
            while j + 2 < flat.len()
                && flat[j] == ":"
                && flat[j + 1] == ":"
                && !flat[j + 2].is_empty()
            {
                path.push(flat[j + 2].clone());
                j += 3;
            }
            if path.len() > 1 {
                out.push(path);
            }
            i = j;
        } else {
            i += 1;
        }
    }
    out
}
