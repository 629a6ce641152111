//! `#[toolgate_server::tools]` on an `impl` block makes its `#[tool]`
//! methods MCP tools: the name from the method, the description from its
//! doc comment, annotations from the attribute's arguments, the input
//! schema from the argument types and the output schema from the return
//! type. Use it through `toolgate_server` (feature `macros`, on by default).
//!
//! It expands to the builder calls a person would write: a method
//! `tools(self: Arc<Self>) -> Vec<ToolEntry>` whose entries call the
//! methods. Parameters after `&self` are whatever a handler may take
//! (arguments, `State<S>`, `RequestContext`, `AuthContext`), in any order.
//!
//! ```
//! use std::sync::Arc;
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//! use toolgate_server::{Server, ToolError};
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct Lookup {
//!     /// The item's SKU, like "A1".
//!     sku: String,
//! }
//!
//! struct Shop;
//!
//! #[toolgate_server::tools]
//! impl Shop {
//!     /// Names the item with this SKU.
//!     #[tool(read_only, open_world = false)]
//!     async fn lookup(&self, args: Lookup) -> Result<String, ToolError> {
//!         match args.sku.as_str() {
//!             "A1" => Ok("tea".into()),
//!             other => Err(ToolError::new(format!("no item {other:?}; SKUs look like A1"))),
//!         }
//!     }
//! }
//!
//! let server = Server::builder("shop", "1").tools(Arc::new(Shop).tools()).build().unwrap();
//! assert_eq!(server.tool_names(), ["lookup"]);
//! ```
//!
//! `#[tool(...)]` arguments: `name = "…"`, `title = "…"`, `read_only`,
//! `destructive = bool`, `idempotent = bool`, `open_world = bool`,
//! `tasks = "optional" | "required"`, `task_started_by_handler` (see
//! `toolgate_server::tasks`).

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as Tokens};
use quote::{format_ident, quote};
use syn::spanned::Spanned;
use syn::{
    Attribute, Expr, ExprLit, FnArg, ImplItem, ImplItemFn, ItemImpl, Lit, LitBool, LitStr, Meta,
    Token, parse_macro_input, punctuated::Punctuated,
};

/// Make the `#[tool]` methods of an `impl` block MCP tools; see the crate
/// docs.
#[proc_macro_attribute]
pub fn tools(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        return syn::Error::new(
            Span::call_site(),
            "#[toolgate_server::tools] takes no arguments; put them on each #[tool(...)]",
        )
        .to_compile_error()
        .into();
    }
    let mut block = parse_macro_input!(item as ItemImpl);
    match expand(&mut block) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// Marks a method of a `#[toolgate::tools]` block as a tool. On its own
/// (outside such a block) it is an error.
#[proc_macro_attribute]
pub fn tool(_attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut out: Tokens = syn::Error::new(
        Span::call_site(),
        "#[tool] marks a method of an impl block annotated with #[toolgate_server::tools]; add #[toolgate_server::tools] to the impl block",
    )
    .to_compile_error();
    out.extend(Tokens::from(item));
    out.into()
}

/// What `#[tool(...)]` says.
#[derive(Default)]
struct Options {
    name: Option<LitStr>,
    title: Option<LitStr>,
    read_only: bool,
    destructive: Option<LitBool>,
    idempotent: Option<LitBool>,
    open_world: Option<LitBool>,
    tasks: Option<LitStr>,
    task_started_by_handler: bool,
}

const KNOWN: &str = "name = \"…\", title = \"…\", read_only, destructive = bool, idempotent = bool, open_world = bool, tasks = \"optional\" | \"required\", task_started_by_handler";

fn options(attr: &Attribute) -> syn::Result<Options> {
    let mut o = Options::default();
    if matches!(attr.meta, Meta::Path(_)) {
        return Ok(o);
    }
    let items = attr.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)?;
    for item in items {
        let key = item
            .path()
            .get_ident()
            .map(ToString::to_string)
            .unwrap_or_default();
        match (key.as_str(), &item) {
            ("read_only", Meta::Path(_)) => o.read_only = true,
            ("task_started_by_handler", Meta::Path(_)) => o.task_started_by_handler = true,
            ("tasks", Meta::NameValue(nv)) => {
                let support = string(&nv.value)?;
                if !matches!(support.value().as_str(), "optional" | "required") {
                    return Err(syn::Error::new(
                        support.span(),
                        "tasks is \"optional\" or \"required\"",
                    ));
                }
                o.tasks = Some(support);
            }
            ("name", Meta::NameValue(nv)) => o.name = Some(string(&nv.value)?),
            ("title", Meta::NameValue(nv)) => o.title = Some(string(&nv.value)?),
            ("destructive", Meta::NameValue(nv)) => o.destructive = Some(boolean(&nv.value)?),
            ("idempotent", Meta::NameValue(nv)) => o.idempotent = Some(boolean(&nv.value)?),
            ("open_world", Meta::NameValue(nv)) => o.open_world = Some(boolean(&nv.value)?),
            _ => {
                return Err(syn::Error::new(
                    item.span(),
                    format!("unknown #[tool] argument; expected one of: {KNOWN}"),
                ));
            }
        }
    }
    Ok(o)
}

fn string(e: &Expr) -> syn::Result<LitStr> {
    match e {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => Ok(s.clone()),
        _ => Err(syn::Error::new(e.span(), "expected a string literal")),
    }
}

fn boolean(e: &Expr) -> syn::Result<LitBool> {
    match e {
        Expr::Lit(ExprLit {
            lit: Lit::Bool(b), ..
        }) => Ok(b.clone()),
        _ => Err(syn::Error::new(e.span(), "expected `true` or `false`")),
    }
}

/// The doc comment's text, lines joined.
fn docs(attrs: &[Attribute]) -> String {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            Meta::NameValue(nv) => string(&nv.value).ok().map(|s| s.value().trim().to_owned()),
            _ => None,
        })
        .collect();
    let mut text = String::new();
    for line in lines {
        if line.is_empty() {
            if !text.ends_with("\n\n") && !text.is_empty() {
                text.push_str("\n\n");
            }
        } else {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push(' ');
            }
            text.push_str(&line);
        }
    }
    text.trim().to_owned()
}

fn expand(block: &mut ItemImpl) -> syn::Result<Tokens> {
    let mut entries = Vec::new();
    for item in &mut block.items {
        let ImplItem::Fn(method) = item else { continue };
        let Some(at) = method.attrs.iter().position(|a| a.path().is_ident("tool")) else {
            continue;
        };
        let attr = method.attrs.remove(at);
        entries.push(entry(method, &attr)?);
    }
    if entries.is_empty() {
        return Err(syn::Error::new(
            block.span(),
            "#[toolgate_server::tools] found no #[tool] method in this impl block",
        ));
    }
    let self_ty = &block.self_ty;
    let (generics, ty_generics, where_clause) = block.generics.split_for_impl();
    Ok(quote! {
        #block

        impl #generics #self_ty #ty_generics #where_clause {
            /// The `#[tool]` methods of this type, as tools to register
            /// (generated by `#[toolgate::tools]`).
            pub fn tools(self: ::std::sync::Arc<Self>) -> ::std::vec::Vec<::toolgate_server::ToolEntry> {
                ::std::vec![#(#entries),*]
            }
        }
    })
}

fn entry(method: &ImplItemFn, attr: &Attribute) -> syn::Result<Tokens> {
    let o = options(attr)?;
    let sig = &method.sig;
    let ident = &sig.ident;
    match sig.inputs.first() {
        Some(FnArg::Receiver(r)) if r.reference.is_some() && r.mutability.is_none() => {}
        _ => {
            return Err(syn::Error::new(
                sig.span(),
                "a #[tool] method takes `&self` first (tools run concurrently, so not `&mut self` or `self`)",
            ));
        }
    }
    let description = docs(&method.attrs);
    if description.is_empty() {
        return Err(syn::Error::new(
            sig.ident.span(),
            "a #[tool] method needs a doc comment: it becomes the tool's description, which the model reads to decide when to call it",
        ));
    }
    let mut params = Vec::new();
    let mut names = Vec::new();
    for (i, input) in sig.inputs.iter().skip(1).enumerate() {
        let FnArg::Typed(typed) = input else { continue };
        let name = format_ident!("p{i}");
        let ty = &typed.ty;
        params.push(quote! { #name: #ty });
        names.push(name);
    }
    let tool_name = o
        .name
        .unwrap_or_else(|| LitStr::new(&ident.to_string(), ident.span()));
    let call = if sig.asyncness.is_some() {
        quote! { this.#ident(#(#names),*).await }
    } else {
        quote! { this.#ident(#(#names),*) }
    };
    let mut def = quote! {
        ::toolgate_server::ToolDef::new(#tool_name).description(#description)
    };
    if let Some(title) = o.title {
        def.extend(quote! { .title(#title) });
    }
    if o.read_only {
        def.extend(quote! { .read_only() });
    }
    if let Some(b) = o.destructive {
        def.extend(quote! { .destructive(#b) });
    }
    if let Some(b) = o.idempotent {
        def.extend(quote! { .idempotent(#b) });
    }
    if let Some(b) = o.open_world {
        def.extend(quote! { .open_world(#b) });
    }
    if let Some(support) = o.tasks {
        let variant = if support.value() == "required" {
            quote! { Required }
        } else {
            quote! { Optional }
        };
        def.extend(quote! { .task_support(::toolgate_server::tasks::TaskSupport::#variant) });
    }
    if o.task_started_by_handler {
        def.extend(quote! { .task_started_by_handler() });
    }
    Ok(quote! {
        {
            let this = self.clone();
            #def.handler(move |#(#params),*| {
                let this = this.clone();
                async move { #call }
            })
        }
    })
}

// The README is the registry page: its examples are compiled and run as
// doctests, so the page never shows code that does not build.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
