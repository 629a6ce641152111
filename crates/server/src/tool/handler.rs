//! Handlers of any shape: a function or closure of up to six parameters,
//! each one something the call provides ([`FromCall`]), returning anything
//! that becomes a tool result ([`IntoToolResult`]).
//!
//! ```
//! use toolgate_server::{RequestContext, ToolDef};
//!
//! // No arguments, nothing fallible: no types to spell.
//! let ping = ToolDef::new("ping").description("Answers pong.").read_only()
//!     .handler(|| async { "pong" });
//! // The context, when the handler talks back.
//! let slow = ToolDef::new("slow").description("Reports progress.").read_only()
//!     .handler(|ctx: RequestContext| async move {
//!         ctx.progress(1.0, Some(1.0), Some("done")).await;
//!         "finished"
//!     });
//! # let _ = (ping, slow);
//! ```

use std::future::Future;
use std::marker::PhantomData;

use serde_json::{Map, Value};

use super::extract::{CallParts, FromCall, Needs};
use super::{DynToolHandler, HandlerFuture, IntoToolReply, ToolError, ToolReply};
use crate::context::RequestContext;

/// What a handler may return: any [`IntoToolReply`] value (text,
/// [`Structured`](super::Structured), content, a whole result), or a
/// `Result<_, ToolError>` of one (`?` converts any `std::error::Error`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not something a tool can return",
    note = "return text (String, &'static str), Structured<T>, content (ContentBlock, Vec<ContentBlock>), a CallToolResult, or a Result<_, ToolError> of one"
)]
pub trait IntoToolResult: Send + 'static {
    /// The reply, or the error to report.
    fn into_tool_result(self) -> Result<ToolReply, ToolError>;

    /// The `outputSchema` the successful value implies, if any.
    fn output_schema() -> Option<Map<String, Value>> {
        None
    }
}

impl<R: IntoToolReply> IntoToolResult for R {
    fn into_tool_result(self) -> Result<ToolReply, ToolError> {
        self.into_reply()
    }

    fn output_schema() -> Option<Map<String, Value>> {
        R::output_schema()
    }
}

// `Result<R, ToolError>` only, not any `E: Into<ToolError>`: with one
// error type to choose from, the compiler infers it, so a handler writes
// `Ok(value)` and uses `?` on any `std::error::Error` without naming types.
impl<R: IntoToolReply> IntoToolResult for Result<R, ToolError> {
    fn into_tool_result(self) -> Result<ToolReply, ToolError> {
        self?.into_reply()
    }

    fn output_schema() -> Option<Map<String, Value>> {
        R::output_schema()
    }
}

/// A tool handler: implemented for every `Fn(P1, …, Pn) -> impl Future`
/// (n ≤ 6) whose parameters are [`FromCall`] and whose output is
/// [`IntoToolResult`]. `M` only tells the implementations apart.
#[diagnostic::on_unimplemented(
    message = "this function cannot be a tool handler",
    label = "not a tool handler",
    note = "each parameter must be the arguments (a type deriving Deserialize and JsonSchema, or Args<T>), State<S>, RequestContext, AuthContext or Option<AuthContext>, at most six",
    note = "it must be async (or return a future) and give text, Structured<T>, content, or a Result<_, ToolError> of one"
)]
pub trait ToolHandler<M>: Send + Sync + 'static {
    /// What each parameter needs, in order.
    fn needs() -> Vec<Needs>;
    /// The `inputSchema`, from the parameter that is the arguments.
    fn input_schema() -> Option<Map<String, Value>>;
    /// The `outputSchema`, from the return type.
    fn output_schema() -> Option<Map<String, Value>>;
    /// Run it.
    fn call(&self, parts: CallParts) -> HandlerFuture;
}

macro_rules! tool_handler {
    ($($P:ident $M:ident),*) => {
        impl<F, Fut, Out, $($P, $M,)*> ToolHandler<($($M, $P,)*)> for F
        where
            F: Fn($($P),*) -> Fut + Send + Sync + 'static,
            Fut: Future<Output = Out> + Send + 'static,
            Out: IntoToolResult,
            $($P: FromCall<$M>, $M: 'static,)*
        {
            fn needs() -> Vec<Needs> {
                vec![$(<$P as FromCall<$M>>::needs()),*]
            }

            fn input_schema() -> Option<Map<String, Value>> {
                None$(.or_else(<$P as FromCall<$M>>::input_schema))*
            }

            fn output_schema() -> Option<Map<String, Value>> {
                Out::output_schema()
            }

            #[allow(non_snake_case, unused_mut, unused_variables)]
            fn call(&self, mut parts: CallParts) -> HandlerFuture {
                $(
                    let $P = match <$P as FromCall<$M>>::from_call(&mut parts) {
                        Ok(value) => value,
                        Err(e) => return Box::pin(async move { Err(e) }),
                    };
                )*
                let fut = (self)($($P),*);
                Box::pin(async move { fut.await.into_tool_result() })
            }
        }
    };
}

tool_handler!();
tool_handler!(P1 M1);
tool_handler!(P1 M1, P2 M2);
tool_handler!(P1 M1, P2 M2, P3 M3);
tool_handler!(P1 M1, P2 M2, P3 M3, P4 M4);
tool_handler!(P1 M1, P2 M2, P3 M3, P4 M4, P5 M5);
tool_handler!(P1 M1, P2 M2, P3 M3, P4 M4, P5 M5, P6 M6);

/// A [`ToolHandler`] as the server stores it.
pub(crate) struct Handled<H, M> {
    pub(crate) handler: H,
    pub(crate) marker: PhantomData<fn() -> M>,
}

impl<H: ToolHandler<M>, M: 'static> DynToolHandler for Handled<H, M> {
    fn call(&self, args: Map<String, Value>, ctx: RequestContext) -> HandlerFuture {
        self.handler.call(CallParts::new(args, ctx))
    }
}
