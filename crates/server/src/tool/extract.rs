//! What a handler's parameters can be, in the manner of axum's extractors:
//! the arguments (any `T: Deserialize + JsonSchema`, or [`Args<T>`]),
//! shared [`State<S>`], the [`RequestContext`], the caller's
//! [`AuthContext`] — in any order, each at most once.
//!
//! ```
//! use std::sync::Arc;
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//! use toolgate_server::{Server, State, ToolDef};
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct Lookup { sku: String }
//!
//! struct Catalog { names: Vec<(String, String)> }
//!
//! let server = Server::builder("shop", "1")
//!     .state(Arc::new(Catalog { names: vec![("A1".into(), "tea".into())] }))
//!     .tool(ToolDef::new("lookup").description("Names an item.").read_only().handler(
//!         |State(catalog): State<Arc<Catalog>>, args: Lookup| async move {
//!             catalog.names.iter().find(|(s, _)| *s == args.sku)
//!                 .map(|(_, n)| n.clone())
//!                 .unwrap_or_else(|| format!("no item {}", args.sku))
//!         },
//!     ))
//!     .build()
//!     .unwrap();
//! # let _ = server;
//! ```

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::ToolError;
use super::schema_gen::schema_for;
use crate::AuthContext;
use crate::context::RequestContext;

/// The tool's arguments, explicitly (a bare `T` works as well): `T` gives
/// the tool's `inputSchema`, and every call is checked against it before
/// the handler runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Args<T>(pub T);

/// Shared state registered once with
/// [`ServerBuilder::state`](crate::ServerBuilder::state), handed to every
/// handler that asks for it (a clone: wrap anything large in an `Arc`). A
/// tool asking for state the server was not given fails registration,
/// naming the type.
#[derive(Clone, Debug, PartialEq)]
pub struct State<S>(pub S);

/// Values registered with [`ServerBuilder::state`](crate::ServerBuilder::state), by type.
#[derive(Clone, Default)]
pub(crate) struct StateMap(HashMap<TypeId, Arc<dyn Any + Send + Sync>>);

impl StateMap {
    pub(crate) fn insert<S: Clone + Send + Sync + 'static>(&mut self, state: S) {
        self.0.insert(TypeId::of::<S>(), Arc::new(state));
    }

    pub(crate) fn get<S: Clone + Send + Sync + 'static>(&self) -> Option<S> {
        self.0.get(&TypeId::of::<S>())?.downcast_ref::<S>().cloned()
    }

    pub(crate) fn contains(&self, id: TypeId) -> bool {
        self.0.contains_key(&id)
    }
}

/// What one call offers its handler's parameters.
pub struct CallParts {
    args: Option<Map<String, Value>>,
    ctx: RequestContext,
}

impl CallParts {
    pub(crate) fn new(args: Map<String, Value>, ctx: RequestContext) -> Self {
        Self {
            args: Some(args),
            ctx,
        }
    }
}

/// Marks a parameter that is the arguments themselves.
#[doc(hidden)]
pub enum ViaArgs {}

/// Marks a parameter taken from the call's context.
#[doc(hidden)]
pub enum ViaContext {}

/// What a handler parameter needs from the server, checked at registration.
#[derive(Clone, Copy, Debug, Default)]
pub struct Needs {
    /// The parameter is the arguments (it gives the `inputSchema`).
    pub(crate) arguments: bool,
    /// The parameter is state of this type.
    pub(crate) state: Option<(TypeId, &'static str)>,
}

/// A handler parameter. Implemented for the arguments (`T: Deserialize +
/// JsonSchema`, [`Args<T>`]), [`State<S>`], [`RequestContext`],
/// [`AuthContext`] and `Option<AuthContext>`; `M` only tells the
/// implementations apart.
pub trait FromCall<M>: Sized + Send + 'static {
    /// What the parameter needs; arguments bring their `inputSchema`.
    fn needs() -> Needs {
        Needs::default()
    }

    /// The `inputSchema`, for the parameter that is the arguments.
    fn input_schema() -> Option<Map<String, Value>> {
        None
    }

    /// Take the parameter's value from the call.
    fn from_call(parts: &mut CallParts) -> Result<Self, ToolError>;
}

/// The arguments as `T`, or a tool error naming the field at fault.
fn arguments<T: DeserializeOwned>(parts: &mut CallParts) -> Result<T, ToolError> {
    let args = parts.args.take().unwrap_or_default();
    serde_path_to_error::deserialize(Value::Object(args)).map_err(|e| {
        let path = e.path().to_string();
        ToolError::new(format!(
            "Invalid arguments at {}: {}. Correct the arguments to match the tool's inputSchema and call it again.",
            if path == "." { "(root)".to_owned() } else { path },
            e.inner()
        ))
    })
}

impl<T: DeserializeOwned + JsonSchema + Send + 'static> FromCall<ViaArgs> for T {
    fn needs() -> Needs {
        Needs {
            arguments: true,
            state: None,
        }
    }

    fn input_schema() -> Option<Map<String, Value>> {
        Some(schema_for::<T>())
    }

    fn from_call(parts: &mut CallParts) -> Result<Self, ToolError> {
        arguments(parts)
    }
}

impl<T: DeserializeOwned + JsonSchema + Send + 'static> FromCall<ViaContext> for Args<T> {
    fn needs() -> Needs {
        <T as FromCall<ViaArgs>>::needs()
    }

    fn input_schema() -> Option<Map<String, Value>> {
        Some(schema_for::<T>())
    }

    fn from_call(parts: &mut CallParts) -> Result<Self, ToolError> {
        arguments(parts).map(Args)
    }
}

impl<S: Clone + Send + Sync + 'static> FromCall<ViaContext> for State<S> {
    fn needs() -> Needs {
        Needs {
            arguments: false,
            state: Some((TypeId::of::<S>(), std::any::type_name::<S>())),
        }
    }

    fn from_call(parts: &mut CallParts) -> Result<Self, ToolError> {
        // Registration checked that the state exists.
        parts
            .ctx
            .state::<S>()
            .map(State)
            .ok_or_else(|| ToolError::protocol(toolgate_protocol::RpcError::internal()))
    }
}

impl FromCall<ViaContext> for RequestContext {
    fn from_call(parts: &mut CallParts) -> Result<Self, ToolError> {
        Ok(parts.ctx.clone())
    }
}

impl FromCall<ViaContext> for Option<AuthContext> {
    fn from_call(parts: &mut CallParts) -> Result<Self, ToolError> {
        Ok(parts.ctx.auth().cloned())
    }
}

impl FromCall<ViaContext> for AuthContext {
    fn from_call(parts: &mut CallParts) -> Result<Self, ToolError> {
        parts.ctx.auth().cloned().ok_or_else(|| {
            ToolError::new(
                "This tool acts for an authenticated caller, and the request carried no verified identity. Call it through a connection that authenticates (a bearer token).",
            )
        })
    }
}
