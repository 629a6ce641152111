//! Protocol data types, named and shaped as in the 2026-07-28 schema.
//!
//! Optional fields are `Option`s that are omitted when `None`, so a value
//! read from the wire serializes back to the same JSON.

mod capabilities;
mod common;
mod content;
mod input;
mod mrtr;
mod notifications;
mod prompt;
mod requests;
mod resource;
mod results;
mod tasks;
mod tool;

pub use capabilities::*;
pub use common::*;
pub use content::*;
pub use input::*;
pub use mrtr::*;
pub use notifications::*;
pub use prompt::*;
pub use requests::*;
pub use resource::*;
pub use results::*;
pub use tasks::*;
pub use tool::*;

/// A `_meta` object.
pub type Meta = serde_json::Map<String, serde_json::Value>;
