//! Where authorization outlives a process: a [`TokenStore`] keeps, per MCP
//! server, the tokens, the client registrations (each bound to the issuer
//! that made it) and the DPoP key. [`MemoryTokenStore`] keeps them for the
//! process; [`FileTokenStore`] in one JSON file only its owner can read.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::ClientError;

/// Tokens from one authorization.
#[derive(Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct TokenSet {
    /// The access token.
    pub access_token: String,
    /// `Bearer` or `DPoP`.
    pub token_type: String,
    /// When it expires (seconds since the epoch), if the server said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// When it was issued (seconds since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issued_at: Option<u64>,
    /// The refresh token, if one was issued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// The scopes granted (or requested, when the server did not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

impl TokenSet {
    /// When to renew it: a minute before it expires, or half-way through
    /// a shorter life; `None` if it does not expire.
    pub fn renew_at(&self) -> Option<u64> {
        let expires = self.expires_at?;
        let life = self
            .issued_at
            .map_or(u64::MAX, |issued| expires.saturating_sub(issued));
        Some(expires.saturating_sub((life / 2).min(60)))
    }
}

impl std::fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSet")
            .field("access_token", &"<redacted>")
            .field("token_type", &self.token_type)
            .field("expires_at", &self.expires_at)
            .field("issued_at", &self.issued_at)
            .field(
                "refresh_token",
                &self.refresh_token.as_ref().map(|_| "<redacted>"),
            )
            .field("scope", &self.scope)
            .finish()
    }
}

/// A client identity at one authorization server.
#[derive(Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct ClientRegistration {
    /// The client id (a URL for a Client ID Metadata Document).
    pub client_id: String,
    /// The secret, for a confidential client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// The token endpoint authentication method the server assigned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_method: Option<String>,
    /// The redirect URI registered with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_uri: Option<String>,
}

impl std::fmt::Debug for ClientRegistration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientRegistration")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("auth_method", &self.auth_method)
            .field("redirect_uri", &self.redirect_uri)
            .finish()
    }
}

/// Everything kept for one MCP server.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoredAuth {
    /// The issuer the token came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// Its token endpoint, so a refresh needs no discovery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint: Option<String>,
    /// The resource identifier the token is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// The current tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<TokenSet>,
    /// The scopes asked for so far (step-up asks for more, never fewer).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// Client registrations by the issuer that made them: a registration is
    /// never used at another authorization server.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub registrations: BTreeMap<String, ClientRegistration>,
    /// The DPoP key (PKCS#8, base64url) its DPoP-bound tokens need.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dpop_key: Option<String>,
}

/// Keeps [`StoredAuth`] per MCP server (keyed by its URL). Implement it
/// over a keyring or a database; errors are reported, never fatal to a call
/// already authorized.
pub trait TokenStore: Send + Sync {
    /// What is kept for `server`, if anything.
    fn load(&self, server: &str) -> Result<Option<StoredAuth>, ClientError>;
    /// Keep `auth` for `server`, replacing what was there.
    fn save(&self, server: &str, auth: &StoredAuth) -> Result<(), ClientError>;
    /// Forget `server`; `true` if something was kept.
    fn remove(&self, server: &str) -> Result<bool, ClientError>;
}

/// A store for the life of the process (the default).
#[derive(Debug, Default)]
pub struct MemoryTokenStore {
    entries: Mutex<BTreeMap<String, StoredAuth>>,
}

impl TokenStore for MemoryTokenStore {
    fn load(&self, server: &str) -> Result<Option<StoredAuth>, ClientError> {
        Ok(self.entries.lock().get(server).cloned())
    }
    fn save(&self, server: &str, auth: &StoredAuth) -> Result<(), ClientError> {
        self.entries.lock().insert(server.to_owned(), auth.clone());
        Ok(())
    }
    fn remove(&self, server: &str) -> Result<bool, ClientError> {
        Ok(self.entries.lock().remove(server).is_some())
    }
}

/// A JSON file of every server's [`StoredAuth`], created with mode 0600
/// and replaced atomically (written beside, then renamed), so a crash never
/// leaves half a file and no other user can read a token.
#[derive(Debug)]
pub struct FileTokenStore {
    path: PathBuf,
    /// Serializes this process's read-modify-write cycles.
    guard: Mutex<()>,
}

impl FileTokenStore {
    /// The store at `path` (created on first save).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            guard: Mutex::new(()),
        }
    }

    /// `$XDG_CONFIG_HOME/toolgate/credentials.json` (or under `~/.config`).
    pub fn default_path() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
        Some(base.join("toolgate").join("credentials.json"))
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> Result<BTreeMap<String, StoredAuth>, ClientError> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                ClientError::Authorization(format!(
                    "the credentials file {} is damaged ({e}); remove it and log in again",
                    self.path.display()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
            Err(e) => Err(self.io(e)),
        }
    }

    fn io(&self, e: std::io::Error) -> ClientError {
        ClientError::Authorization(format!("credentials file {}: {e}", self.path.display()))
    }

    fn write(&self, all: &BTreeMap<String, StoredAuth>) -> Result<(), ClientError> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| self.io(e))?;
        }
        let tmp = self.path.with_extension("json.tmp");
        let body = serde_json::to_vec_pretty(all)
            .map_err(|e| ClientError::Authorization(e.to_string()))?;
        {
            use std::io::Write as _;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create(true).truncate(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt as _;
                options.mode(0o600);
            }
            let mut file = options.open(&tmp).map_err(|e| self.io(e))?;
            // An existing file keeps its old mode through open: set it.
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt as _;
                file.set_permissions(std::fs::Permissions::from_mode(0o600))
                    .map_err(|e| self.io(e))?;
            }
            file.write_all(&body).map_err(|e| self.io(e))?;
            file.sync_all().map_err(|e| self.io(e))?;
        }
        std::fs::rename(&tmp, &self.path).map_err(|e| self.io(e))
    }
}

impl TokenStore for FileTokenStore {
    fn load(&self, server: &str) -> Result<Option<StoredAuth>, ClientError> {
        let _g = self.guard.lock();
        Ok(self.read()?.remove(server))
    }
    fn save(&self, server: &str, auth: &StoredAuth) -> Result<(), ClientError> {
        let _g = self.guard.lock();
        let mut all = self.read()?;
        all.insert(server.to_owned(), auth.clone());
        self.write(&all)
    }
    fn remove(&self, server: &str) -> Result<bool, ClientError> {
        let _g = self.guard.lock();
        let mut all = self.read()?;
        let had = all.remove(server).is_some();
        if had {
            self.write(&all)?;
        }
        Ok(had)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> StoredAuth {
        StoredAuth {
            issuer: Some("https://as.example.com".into()),
            token: Some(TokenSet {
                access_token: "secret-access".into(),
                token_type: "Bearer".into(),
                refresh_token: Some("secret-refresh".into()),
                ..TokenSet::default()
            }),
            ..StoredAuth::default()
        }
    }

    #[test]
    fn a_token_is_renewed_a_minute_early_or_half_way_through_a_short_life() {
        let token = |issued, expires| TokenSet {
            issued_at: issued,
            expires_at: expires,
            ..TokenSet::default()
        };
        assert_eq!(token(Some(1000), Some(4600)).renew_at(), Some(4540));
        assert_eq!(token(Some(1000), Some(1030)).renew_at(), Some(1015));
        assert_eq!(token(None, Some(4600)).renew_at(), Some(4540));
        assert_eq!(token(Some(1000), None).renew_at(), None);
    }

    #[test]
    fn debug_output_never_shows_a_token_or_secret() {
        let mut auth = sample();
        auth.registrations.insert(
            "https://as.example.com".into(),
            ClientRegistration {
                client_id: "id".into(),
                client_secret: Some("secret-client".into()),
                ..ClientRegistration::default()
            },
        );
        let shown = format!("{auth:?}");
        assert!(!shown.contains("secret-"), "{shown}");
    }

    #[test]
    fn the_file_store_round_trips_and_only_its_owner_can_read_it() {
        let dir = std::env::temp_dir().join(format!("toolgate-store-{}", std::process::id()));
        let store = FileTokenStore::new(dir.join("sub").join("credentials.json"));
        assert_eq!(store.load("https://a/mcp").ok().flatten(), None);
        store
            .save("https://a/mcp", &sample())
            .unwrap_or_else(|e| panic!("{e}"));
        store
            .save("https://b/mcp", &StoredAuth::default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(store.load("https://a/mcp").ok().flatten(), Some(sample()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(store.path())
                .map(|m| m.permissions().mode())
                .unwrap_or(0);
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(store.remove("https://a/mcp").unwrap_or(false));
        assert!(!store.remove("https://a/mcp").unwrap_or(true));
        assert!(store.load("https://b/mcp").ok().flatten().is_some());
        std::fs::write(store.path(), b"{not json").ok();
        let err = store
            .load("https://b/mcp")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("damaged"), "{err}");
        let _ = std::fs::remove_dir_all(dir);
    }
}
