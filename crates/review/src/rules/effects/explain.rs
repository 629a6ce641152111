//! Whether a description explains a claim its evidence seems to contradict.
//!
//! A query tool that says "runs in a read-only transaction" still looks like
//! it executes, but its author has told the reader why `readOnlyHint: true`
//! holds. That is a claim to verify, not a sign of spoofing. The phrases are
//! matched on the lower-cased description.

/// An annotation that makes a claim about the tool's effects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Claim {
    /// `readOnlyHint: true`.
    ReadOnly,
    /// `destructiveHint: false`.
    NotDestructive,
    /// `openWorldHint: false`.
    ClosedWorld,
}

impl Claim {
    pub(super) fn annotation(self) -> &'static str {
        match self {
            Claim::ReadOnly => "readOnlyHint: true",
            Claim::NotDestructive => "destructiveHint: false",
            Claim::ClosedWorld => "openWorldHint: false",
        }
    }

    fn phrases(self) -> &'static [&'static str] {
        match self {
            Claim::ReadOnly => &[
                "read-only",
                "read only",
                "readonly",
                "only select",
                "select statements only",
                "select queries only",
                "select-only",
                "no side effect",
                "no side-effect",
                "without side effect",
                "does not modify",
                "doesn't modify",
                "cannot modify",
                "never modif",
                "does not change",
                "never change",
                "cannot change",
                "does not write",
                "never write",
                "cannot write",
                "writes are",
                "write operations are",
                "rejects write",
                "rejects insert",
                "rejects any statement",
                "dry run",
                "dry-run",
                "rolled back",
                "rolls back",
            ],
            Claim::NotDestructive => &[
                "trash",
                "recycle bin",
                "soft delete",
                "soft-delete",
                "can be restored",
                "can be undone",
                "can be recovered",
                "undo",
                "reversible",
                "recoverable",
                "archived",
                "sandbox",
                "allowlist",
                "allow-list",
                "allowed commands",
                "only the commands",
                "only the listed",
                "whitelist",
                "read-only",
                "does not delete",
                "never delete",
                "cannot delete",
                "only additive",
                "nothing is lost",
            ],
            Claim::ClosedWorld => &[
                "sandbox",
                "no network",
                "network access is disabled",
                "without network",
                "offline",
                "local only",
                "locally",
                "localhost",
                "loopback",
                "allowlist",
                "allow-list",
                "allowed hosts",
                "allowed domains",
                "allowed recipients",
                "only the channels",
                "only the listed",
                "only to ",
                "within the workspace",
                "isolated",
                "air-gapped",
                "internal",
            ],
        }
    }

    /// The phrase of `description` that explains the claim, if any.
    pub(super) fn explained_by(self, description: &str) -> Option<&'static str> {
        let lower = description.to_lowercase();
        self.phrases().iter().copied().find(|p| lower.contains(p))
    }
}
