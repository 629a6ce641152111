//! Definitions the lock file withholds, and a person approving one on the
//! console: the lock file is rewritten, the approval recorded, the tool
//! offered again.
//!
//! What the person approves is exactly what they were shown: the form
//! carries the digest of the definition on the page, and an approval whose
//! digest is no longer the live one is refused (the upstream changed it
//! again in between).
//!
//! Layer: `gateway`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::SystemTime;

use toolgate_protocol::types::Tool;
use toolgate_review::lock::{Change, LockFile, lock_tool};
use toolgate_server::Withheld;

use super::Gateway;
use crate::decide::policy::ToolFacts;

/// A tool the lock file withholds.
#[derive(Clone, Debug)]
pub struct Drift {
    /// Its upstream's slot.
    pub(crate) upstream: usize,
    /// Its upstream's name (the lock file's key).
    pub server: String,
    /// The live definition, as the upstream lists it (its own name).
    pub definition: Tool,
    /// Why: `changed`, `added` (to a locked server) or `not locked` (the
    /// server is not in the lock file).
    pub kind: &'static str,
    /// For `changed`: what changed, a field per line.
    pub changes: Vec<String>,
    /// The `sha256:` digest of the live definition, as the lock keeps it.
    pub digest: String,
}

/// The tools of upstream `i` that the lock file withholds, by gateway name.
pub(super) fn drifted(
    i: usize,
    server: &str,
    wanted: &BTreeMap<String, (Tool, ToolFacts, Option<Withheld>)>,
    changes: &[Change],
) -> Vec<(String, Drift)> {
    wanted
        .iter()
        .filter_map(|(name, (tool, _, refusal))| {
            let rule = refusal.as_ref()?.notes.get("rule")?.as_str()?;
            let kind = match rule {
                "lock file: definition changed" => "changed",
                "lock file: tool added" => "added",
                "lock file: server not locked" => "not locked",
                _ => return None,
            };
            let lines = changes
                .iter()
                .find(|c| matches!(c, Change::Changed(t, _) if *t == tool.name))
                .map(Change::lines)
                .unwrap_or_default();
            Some((
                name.clone(),
                Drift {
                    upstream: i,
                    server: server.to_owned(),
                    definition: tool.clone(),
                    kind,
                    changes: lines,
                    digest: lock_tool(tool).digest,
                },
            ))
        })
        .collect()
}

/// Why a definition was not approved.
#[derive(Debug, thiserror::Error)]
pub enum NotApproved {
    /// No such tool is withheld by the lock file (approved already, or
    /// never withheld).
    #[error("the lock file does not withhold {0}: it was approved already, or is not withheld")]
    Unknown(String),
    /// The definition changed again since the page showed it.
    #[error("the definition of {0} changed again since this page showed it: review it anew")]
    Moved(String),
    /// The lock file could not be written.
    #[error("the lock file {path} cannot be written")]
    Write {
        /// The lock file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl Gateway {
    /// Whether a lock file is enforced (every offered tool is then pinned:
    /// the others are withheld).
    pub fn is_locked(&self) -> bool {
        self.lock.read().is_some()
    }

    /// The tools the lock file withholds, by gateway name.
    pub fn drift(&self) -> Vec<(String, Drift)> {
        let mut list: Vec<(String, Drift)> = self
            .drift
            .read()
            .iter()
            .map(|(n, d)| (n.clone(), d.clone()))
            .collect();
        list.sort_by(|a, b| a.0.cmp(&b.0));
        list
    }

    /// Approve the withheld definition of `name` whose digest is `digest`
    /// (the one the person was shown): it goes into the lock file (written
    /// back when the gateway has its path), the approval is recorded in
    /// the audit store as `by`'s, and the upstream's tools are listed again
    /// so the tool is offered.
    pub async fn approve_definition(
        &self,
        name: &str,
        digest: &str,
        by: &str,
    ) -> Result<(), NotApproved> {
        let Some(drift) = self.drift.read().get(name).cloned() else {
            return Err(NotApproved::Unknown(name.to_owned()));
        };
        if drift.digest != digest {
            return Err(NotApproved::Moved(name.to_owned()));
        }
        let updated = {
            let mut lock = self.lock.write();
            let file = lock.get_or_insert_with(LockFile::default);
            file.servers
                .entry(drift.server.clone())
                .or_default()
                .tools
                .insert(drift.definition.name.clone(), lock_tool(&drift.definition));
            file.clone()
        };
        if let Some(path) = &self.lock_file
            && let Err(e) = write_lock(path, &updated)
        {
            return Err(NotApproved::Write {
                path: path.display().to_string(),
                source: e,
            });
        }
        tracing::info!(tool = %name, %digest, by, "definition approved on the console");
        if let Some(store) = &self.audit {
            let row = crate::store::AuditRow {
                time_ms: crate::base::time::now_ms(SystemTime::now()),
                caller: Some(by.to_owned()),
                upstream: Some(drift.server.clone()),
                tool: "toolgate.lock".into(),
                arguments_digest: digest.to_owned(),
                rule: Some(format!(
                    "approved the definition of {name} ({})",
                    drift.kind
                )),
                status: "locked".into(),
                ..Default::default()
            };
            if let Err(e) = store.write(row).await {
                tracing::warn!(error = %e, "the approved definition was not recorded in the audit store");
            }
        }
        self.refresh(drift.upstream).await;
        Ok(())
    }
}

/// Write `lock` to `path` whole or not at all (a temporary file beside it,
/// then renamed), so a reader never sees half a lock file.
fn write_lock(path: &Path, lock: &LockFile) -> std::io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "lock".into());
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let written = std::fs::File::create(&tmp).and_then(|mut f| {
        std::io::Write::write_all(&mut f, lock.render().as_bytes())?;
        f.sync_all()
    });
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(())
}
