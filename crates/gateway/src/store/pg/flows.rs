//! Flow labels in PostgreSQL (layer `store`): every instance sharing the
//! store sees what entered a flow through any of them.

use std::sync::Arc;

use super::PgStore;
use crate::decide::flows::Label;
use crate::store::flows::{FlowStore, MAX_LABELS, class_of};
use crate::store::{StoreError, StoreFuture};

impl PgStore {
    async fn flow_labels(&self, key: &str, now: i64) -> Result<Vec<Label>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT class, tool, time_ms, origin FROM toolgate_flow_labels WHERE key = $1 AND expires_ms > $2 ORDER BY time_ms LIMIT $3",
                &[&key, &now, &(MAX_LABELS as i64)],
            )
            .await
            .map_err(|e| self.inner.fail(e))?;
        Ok(rows
            .iter()
            .filter_map(|r| {
                Some(Label {
                    class: class_of(r.get::<_, &str>(0))?,
                    tool: r.get(1),
                    time_ms: r.get(2),
                    from: r.get(3),
                })
            })
            .collect())
    }

    async fn add_flow_label(
        &self,
        key: &str,
        label: &Label,
        expires: i64,
    ) -> Result<(), StoreError> {
        let client = self.client().await?;
        // One statement: at most MAX_LABELS per flow, once per class and
        // tool (its expiry moved on), expired ones of this flow dropped.
        client
            .execute(
                "WITH gone AS (DELETE FROM toolgate_flow_labels WHERE key = $1 AND expires_ms <= $4)
                 INSERT INTO toolgate_flow_labels (key, class, tool, time_ms, origin, expires_ms)
                 SELECT $1, $2, $3, $4, $5, $6
                 WHERE (SELECT count(*) FROM toolgate_flow_labels WHERE key = $1) < $7
                 ON CONFLICT (key, class, tool) DO UPDATE SET expires_ms = GREATEST(toolgate_flow_labels.expires_ms, EXCLUDED.expires_ms)",
                &[
                    &key,
                    &label.class.label(),
                    &label.tool,
                    &label.time_ms,
                    &label.from,
                    &expires,
                    &(MAX_LABELS as i64),
                ],
            )
            .await
            .map_err(|e| self.inner.fail(e))?;
        // Every flow's expired labels, now and then.
        if label.time_ms % 64 == 0 {
            client
                .execute(
                    "DELETE FROM toolgate_flow_labels WHERE expires_ms <= $1",
                    &[&label.time_ms],
                )
                .await
                .map_err(|e| self.inner.fail(e))?;
        }
        Ok(())
    }
}

impl FlowStore for PgStore {
    fn labels(self: Arc<Self>, key: String, now_ms: i64) -> StoreFuture<Vec<Label>> {
        Box::pin(async move { self.flow_labels(&key, now_ms).await })
    }

    fn add(self: Arc<Self>, key: String, label: Label, expires_ms: i64) -> StoreFuture<()> {
        Box::pin(async move { self.add_flow_label(&key, &label, expires_ms).await })
    }
}
