//! Which call log writes a SQLite audit store.
//!
//! A store has at most one call log ([`crate::store::calllog`]): its
//! gateway holds an exclusive lock on `<db>.log/lock` while it appends.
//! Writers of committed rows (gateways with `durability = "commit"`,
//! `toolgate grants revoke`) take no lock: the ids a log gives are
//! reserved in the store ([`crate::store::calllog::ids`]), and they take
//! ids above them, so they write beside a log. What needs the lock besides
//! the log's gateway is bringing a stopped log's records into the store
//! ([`crate::store::calllog::logged::drain`]), which must not run beside a
//! live indexer that removes the segments it reads.
//!
//! The lock is a `flock(2)` lock on a file of its own (not the database,
//! whose locks are SQLite's), let go of when the file is closed or the
//! process ends, however it ends.
//!
//! Layer: `store`.

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};

use crate::store::StoreError;

/// Where the call log of the store at `db` lives: beside it.
pub fn log_dir(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_owned();
    name.push(".log");
    db.with_file_name(name)
}

/// A held lock; let go of when dropped.
#[derive(Debug)]
pub struct Held {
    _file: File,
}

/// Take the call log's lock of the store at `db`: `Ok(None)` while another
/// gateway's log holds it.
pub fn hold(db: &Path) -> Result<Option<Held>, StoreError> {
    let dir = log_dir(db);
    let failed = |e: std::io::Error| {
        StoreError::Other(format!(
            "the audit store's lock {}: {e}",
            dir.join("lock").display()
        ))
    };
    std::fs::create_dir_all(&dir).map_err(failed)?;
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join("lock"))
        .map_err(failed)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(Held { _file: file })),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(e)) => Err(failed(e)),
    }
}

/// Why a call log cannot be kept on the store at `db` now: another
/// gateway's log writes it.
pub fn held_by_another(db: &Path) -> StoreError {
    StoreError::Other(format!(
        "the audit store {} has a call log written by another gateway, and a store keeps one: give this instance its own [audit] path, share a PostgreSQL store ([store] url), or leave `durability` unset (this instance then commits each row beside that log)",
        db.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_log_writes_a_store_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("audit.db");
        let log = hold(&db).unwrap().expect("the first log holds it");
        assert!(hold(&db).unwrap().is_none());
        assert!(
            held_by_another(&db)
                .to_string()
                .contains("leave `durability` unset")
        );
        drop(log);
        assert!(hold(&db).unwrap().is_some());
    }
}
