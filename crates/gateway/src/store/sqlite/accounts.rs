//! Linked accounts in the SQLite audit store (layer `store`). They change
//! rarely (a link, a refresh, an unlink), so each operation opens its own
//! connection beside the writer's, as revoking a grant does.

use std::path::{Path, PathBuf};

use rusqlite::{OptionalExtension as _, params};

use crate::store::accounts::{AccountStore, LinkedAccount, StoredAccount};
use crate::store::{StoreError, StoreFuture};

/// The table (schema 8).
pub(crate) const TABLE: &str = "
CREATE TABLE IF NOT EXISTS accounts (
    subject TEXT NOT NULL,
    server TEXT NOT NULL,
    sealed BLOB NOT NULL,
    linked_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL,
    PRIMARY KEY (subject, server)
);
";

fn failed(path: &Path) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |source| StoreError::Sqlite {
        context: format!("the audit store {}", path.display()),
        source,
    }
}

fn account(path: &Path, subject: &str, server: &str) -> Result<Option<StoredAccount>, StoreError> {
    let conn = crate::store::sqlite::query::open_for_reading(path)?;
    conn.query_row(
        "SELECT sealed, linked_ms, updated_ms FROM accounts WHERE subject = ?1 AND server = ?2",
        params![subject, server],
        |r| {
            Ok(StoredAccount {
                subject: subject.to_owned(),
                server: server.to_owned(),
                sealed: r.get(0)?,
                linked_ms: r.get(1)?,
                updated_ms: r.get(2)?,
            })
        },
    )
    .optional()
    .map_err(failed(path))
}

fn keep(path: &Path, a: &StoredAccount) -> Result<(), StoreError> {
    let conn = crate::store::sqlite::open_for_writing(path)?;
    conn.execute(
        "INSERT INTO accounts (subject, server, sealed, linked_ms, updated_ms) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (subject, server) DO UPDATE SET sealed = excluded.sealed, updated_ms = excluded.updated_ms",
        params![a.subject, a.server, a.sealed, a.linked_ms, a.updated_ms],
    )
    .map(drop)
    .map_err(failed(path))
}

fn unlink(path: &Path, subject: &str, server: &str) -> Result<bool, StoreError> {
    let conn = crate::store::sqlite::open_for_writing(path)?;
    conn.execute(
        "DELETE FROM accounts WHERE subject = ?1 AND server = ?2",
        params![subject, server],
    )
    .map(|n| n > 0)
    .map_err(failed(path))
}

fn accounts_of(path: &Path, subject: &str) -> Result<Vec<LinkedAccount>, StoreError> {
    let conn = crate::store::sqlite::query::open_for_reading(path)?;
    let mut stmt = conn
        .prepare(
            "SELECT server, linked_ms, updated_ms FROM accounts WHERE subject = ?1 ORDER BY server",
        )
        .map_err(failed(path))?;
    let rows = stmt
        .query_map(params![subject], |r| {
            Ok(LinkedAccount {
                server: r.get(0)?,
                linked_ms: r.get(1)?,
                updated_ms: r.get(2)?,
            })
        })
        .map_err(failed(path))?;
    rows.collect::<Result<_, _>>().map_err(failed(path))
}

/// Run `job` on the blocking pool (SQLite blocks).
fn blocking<T: Send + 'static>(
    path: PathBuf,
    job: impl FnOnce(&Path) -> Result<T, StoreError> + Send + 'static,
) -> StoreFuture<T> {
    Box::pin(async move {
        tokio::task::spawn_blocking(move || job(&path))
            .await
            .map_err(|e| StoreError::Other(format!("the audit store: {e}")))?
    })
}

impl AccountStore for super::AuditStore {
    fn account(&self, subject: String, server: String) -> StoreFuture<Option<StoredAccount>> {
        blocking(self.path().to_owned(), move |p| {
            account(p, &subject, &server)
        })
    }

    fn keep(&self, a: StoredAccount) -> StoreFuture<()> {
        blocking(self.path().to_owned(), move |p| keep(p, &a))
    }

    fn unlink(&self, subject: String, server: String) -> StoreFuture<bool> {
        blocking(self.path().to_owned(), move |p| {
            unlink(p, &subject, &server)
        })
    }

    fn accounts_of(&self, subject: String) -> StoreFuture<Vec<LinkedAccount>> {
        blocking(self.path().to_owned(), move |p| accounts_of(p, &subject))
    }
}
