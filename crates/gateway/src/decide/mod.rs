//! Layer 2, `decide`: the gateway's decisions as functions of the
//! configuration, the call and facts read from stores — the policy's
//! verdict, what a confirmation asks, when a grant holds, whether a call
//! goes round a loop, what a call costs and which caps it falls under.
//! Nothing here performs I/O or knows a store, a transport or a page.

pub mod budget;
pub mod confirm;
pub mod flows;
pub mod grants;
pub mod loops;
pub mod policy;
pub mod search;
pub mod shape;
