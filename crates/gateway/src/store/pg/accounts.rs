//! Linked accounts in PostgreSQL (layer `store`): every instance sharing
//! the store knows the accounts people linked through any of them, and a
//! refresh made by one is the token the others use.

use super::PgStore;
use crate::store::accounts::{AccountStore, LinkedAccount, StoredAccount};
use crate::store::{StoreError, StoreFuture};

impl PgStore {
    async fn account_row(
        &self,
        subject: &str,
        server: &str,
    ) -> Result<Option<StoredAccount>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT sealed, linked_ms, updated_ms FROM toolgate_accounts WHERE subject = $1 AND server = $2",
                &[&subject, &server],
            )
            .await
            .map_err(|e| self.inner.fail(e))?;
        Ok(row.map(|r| StoredAccount {
            subject: subject.to_owned(),
            server: server.to_owned(),
            sealed: r.get(0),
            linked_ms: r.get(1),
            updated_ms: r.get(2),
        }))
    }

    async fn keep_account(&self, a: &StoredAccount) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO toolgate_accounts (subject, server, sealed, linked_ms, updated_ms) VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (subject, server) DO UPDATE SET sealed = EXCLUDED.sealed, updated_ms = EXCLUDED.updated_ms",
                &[&a.subject, &a.server, &a.sealed, &a.linked_ms, &a.updated_ms],
            )
            .await
            .map(drop)
            .map_err(|e| self.inner.fail(e))
    }

    async fn unlink_account(&self, subject: &str, server: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "DELETE FROM toolgate_accounts WHERE subject = $1 AND server = $2",
                &[&subject, &server],
            )
            .await
            .map(|n| n > 0)
            .map_err(|e| self.inner.fail(e))
    }

    async fn accounts_of_subject(&self, subject: &str) -> Result<Vec<LinkedAccount>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT server, linked_ms, updated_ms FROM toolgate_accounts WHERE subject = $1 ORDER BY server",
                &[&subject],
            )
            .await
            .map_err(|e| self.inner.fail(e))?;
        Ok(rows
            .iter()
            .map(|r| LinkedAccount {
                server: r.get(0),
                linked_ms: r.get(1),
                updated_ms: r.get(2),
            })
            .collect())
    }
}

impl AccountStore for PgStore {
    fn account(&self, subject: String, server: String) -> StoreFuture<Option<StoredAccount>> {
        let store = self.clone();
        Box::pin(async move { store.account_row(&subject, &server).await })
    }

    fn keep(&self, account: StoredAccount) -> StoreFuture<()> {
        let store = self.clone();
        Box::pin(async move { store.keep_account(&account).await })
    }

    fn unlink(&self, subject: String, server: String) -> StoreFuture<bool> {
        let store = self.clone();
        Box::pin(async move { store.unlink_account(&subject, &server).await })
    }

    fn accounts_of(&self, subject: String) -> StoreFuture<Vec<LinkedAccount>> {
        let store = self.clone();
        Box::pin(async move { store.accounts_of_subject(&subject).await })
    }
}
