//! Sizes that make code hard to read: functions by lines, structs by fields.

use proc_macro2::Span;
use syn::visit::Visit;

/// One function, where it starts and how many lines it takes (signature to closing brace).
#[derive(Debug)]
pub struct FnSize {
    /// The function's name.
    pub name: String,
    /// Its first line (the `fn` keyword).
    pub line: usize,
    /// Lines from `fn` to the closing brace.
    pub lines: usize,
}

/// One struct with named fields and how many it has.
#[derive(Debug)]
pub struct StructSize {
    /// The struct's name.
    pub name: String,
    /// Its line.
    pub line: usize,
    /// How many fields it has.
    pub fields: usize,
}

/// Every function with a body, and every struct, in one file.
pub fn measure(ast: &syn::File) -> (Vec<FnSize>, Vec<StructSize>) {
    let mut m = Measure::default();
    m.visit_file(ast);
    (m.fns, m.structs)
}

#[derive(Default)]
struct Measure {
    fns: Vec<FnSize>,
    structs: Vec<StructSize>,
}

impl Measure {
    fn record(&mut self, name: &syn::Ident, from: Span, to: Span) {
        let line = from.start().line;
        self.fns.push(FnSize {
            name: name.to_string(),
            line,
            lines: to.end().line.saturating_sub(line) + 1,
        });
    }
}

impl<'ast> Visit<'ast> for Measure {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.record(
            &f.sig.ident,
            f.sig.fn_token.span,
            f.block.brace_token.span.close(),
        );
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.record(
            &f.sig.ident,
            f.sig.fn_token.span,
            f.block.brace_token.span.close(),
        );
        syn::visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(body) = &f.default {
            self.record(
                &f.sig.ident,
                f.sig.fn_token.span,
                body.brace_token.span.close(),
            );
        }
        syn::visit::visit_trait_item_fn(self, f);
    }

    fn visit_item_struct(&mut self, s: &'ast syn::ItemStruct) {
        if let syn::Fields::Named(named) = &s.fields {
            self.structs.push(StructSize {
                name: s.ident.to_string(),
                line: s.ident.span().start().line,
                fields: named.named.len(),
            });
        }
        syn::visit::visit_item_struct(self, s);
    }
}
