//! The call log: an append-only file of the gateway's own in front of the
//! indexed audit store (issue #62).
//!
//! A call's record (begun, then its outcome) is appended to the log by the
//! call itself, one write under one lock; a syncer thread makes it durable;
//! an indexer feeds the SQLite store from the records just written, in the
//! background, and the log is removed behind it. This module holds the parts that stand
//! on their own: the record format ([`record`]: length-prefixed,
//! checksummed, the arguments as the bytes at hand) and the segment files
//! ([`segment`]: appending, reading from a position, a torn last record
//! cut off, an altered segment set aside), the appending side
//! ([`writer`]: durability `process` or `sync`, a failed write undone, the
//! records waiting for the indexer), the indexer ([`indexer`]), the store
//! behind its log ([`logged`]) and `toolgate log --verify` ([`verify`]).
//!
//! Layer: `store`.

pub mod ids;
pub mod indexer;
pub mod logged;
pub mod record;
pub mod segment;
pub mod verify;
pub mod writer;
