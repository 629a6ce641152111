//! Who may write calls into a SQLite audit store at once.
//!
//! A gateway with a call log ([`crate::store::calllog`]) gives calls their
//! ids as it appends them, before the store holds them: nothing else may
//! insert into the same store meanwhile, or it could take an id the log has
//! given already. So the log's gateway holds an exclusive lock on
//! `<db>.log/lock`, and everything else that writes calls — a gateway that
//! commits each row (`durability = "commit"`), `toolgate grants revoke` —
//! holds a shared one: any number of those together, or the one log, never
//! both. Readers take no lock.
//!
//! The locks are `flock(2)` locks on a file of their own (not the database,
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

/// How a writer holds the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hold {
    /// The call log's gateway: alone.
    Alone,
    /// A writer of committed rows: beside others like it.
    Shared,
}

/// A held lock; let go of when dropped.
#[derive(Debug)]
pub struct Held {
    _file: File,
}

/// Take the writers' lock of the store at `db`, or say who holds it and
/// what to do.
pub fn hold(db: &Path, how: Hold) -> Result<Held, StoreError> {
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
    let taken = match how {
        Hold::Alone => file.try_lock(),
        Hold::Shared => file.try_lock_shared(),
    };
    match taken {
        Ok(()) => Ok(Held { _file: file }),
        Err(TryLockError::WouldBlock) => Err(StoreError::Other(match how {
            Hold::Alone => format!(
                "the audit store {} is being written by another gateway or `toolgate` command; a call log (`[audit] durability = \"process\"` or \"sync\") needs it alone: give this instance its own [audit] path, share a PostgreSQL store ([store] url), or set durability = \"commit\" on every instance that shares the file",
                db.display()
            ),
            Hold::Shared => format!(
                "the audit store {} is being written by a gateway with a call log (`[audit] durability = \"process\"` or \"sync\"), which needs it alone: use that gateway (its console revokes grants), stop it first, or set durability = \"commit\" on every instance that shares the file",
                db.display()
            ),
        })),
        Err(TryLockError::Error(e)) => Err(failed(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_writes_alone_and_committed_writers_together() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("audit.db");
        let one = hold(&db, Hold::Shared).unwrap();
        let two = hold(&db, Hold::Shared).unwrap();
        let refused = hold(&db, Hold::Alone).unwrap_err().to_string();
        assert!(refused.contains("needs it alone"), "{refused}");
        drop((one, two));
        let log = hold(&db, Hold::Alone).unwrap();
        let refused = hold(&db, Hold::Shared).unwrap_err().to_string();
        assert!(refused.contains("console revokes grants"), "{refused}");
        assert!(hold(&db, Hold::Alone).is_err());
        drop(log);
        hold(&db, Hold::Shared).unwrap();
    }
}
