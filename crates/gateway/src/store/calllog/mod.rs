//! The call log: an append-only file of the gateway's own in front of the
//! indexed audit store (issue #62).
//!
//! A call's record (begun, then its outcome) is appended to the log by one
//! writer that batches whatever is waiting into one write; an indexer
//! feeds the SQLite (or PostgreSQL) store from it in the background, and
//! the log is removed behind it. This module holds the parts that stand
//! on their own: the record format ([`record`]: length-prefixed,
//! checksummed, the arguments as the bytes at hand) and the segment files
//! ([`segment`]: appending, reading from a position, a torn last record
//! cut off, an altered segment set aside), and the writer thread
//! ([`writer`]: batches, durability `process` or `sync`, a failed write
//! undone).
//!
//! Layer: `store`.

pub mod indexer;
pub mod logged;
pub mod record;
pub mod segment;
pub mod verify;
pub mod writer;
