//! The key that seals `requestState`: shared by every instance behind one
//! endpoint, so an approval asked by one completes on another.
//!
//! It comes from the environment variable `TOOLGATE_STATE_KEY`, else from
//! `[state] key_file`. Either holds a secret of at least 32 characters
//! (`openssl rand -hex 32` makes one); the key is its SHA-256, so any
//! format works and surrounding whitespace does not count.
//!
//! Layer: `store`.

use sha2::{Digest, Sha256};
use toolgate_server::StateKey;

use crate::config::{ConfigError, StateConfig};

/// The environment variable that holds the state secret.
pub const STATE_KEY_VAR: &str = "TOOLGATE_STATE_KEY";

/// Characters a secret needs at least.
const MIN_SECRET: usize = 32;

/// The state secret, hashed: the default endpoint's key, and each named
/// endpoint's own ([`StateSecret::key_for`]), so a state sealed on one
/// endpoint never opens on another (where the same tool name may be
/// another tool, under another policy).
#[derive(Clone)]
pub struct StateSecret([u8; 32]);

impl std::fmt::Debug for StateSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateSecret(…)")
    }
}

impl StateSecret {
    /// The key of the default endpoint (`/mcp`).
    pub fn key(&self) -> StateKey {
        StateKey::new(self.0)
    }

    /// A key of its own for `purpose` (sealing linked accounts, the connect
    /// page's tickets), unrelated to every other key made from the secret.
    pub fn derive(&self, purpose: &str) -> [u8; 32] {
        let mut hasher = Sha256::new();
        hasher.update(b"toolgate derived key v1\0");
        hasher.update(self.0);
        hasher.update(purpose.as_bytes());
        hasher.finalize().into()
    }

    /// A secret from `text` (at least 32 characters), for tests.
    pub fn from_text(text: &str) -> Result<Self, ConfigError> {
        key_of(text, "the secret")
    }

    /// The key of the endpoint `name`.
    pub fn key_for(&self, name: &str) -> StateKey {
        let mut hasher = Sha256::new();
        hasher.update(b"toolgate endpoint state key v1\0");
        hasher.update(self.0);
        hasher.update(name.as_bytes());
        StateKey::new(hasher.finalize().into())
    }
}

/// The secret from `text`, or why it is unusable (`from` names its source).
fn key_of(secret: &str, from: &str) -> Result<StateSecret, ConfigError> {
    let secret = secret.trim();
    if secret.chars().count() < MIN_SECRET {
        return Err(ConfigError::new(format!(
            "{from}: the state secret has {} characters; it needs at least {MIN_SECRET} (make one with `openssl rand -hex 32`)",
            secret.chars().count()
        )));
    }
    let mut hasher = Sha256::new();
    hasher.update(b"toolgate state key v1\0");
    hasher.update(secret.as_bytes());
    Ok(StateSecret(hasher.finalize().into()))
}

/// The configured key: `None` when neither source is set. A key file
/// that cannot be read keeps the I/O error as the cause.
pub fn load_key(config: &StateConfig) -> Result<Option<StateSecret>, ConfigError> {
    load_key_with(config, std::env::var(STATE_KEY_VAR).ok())
}

fn load_key_with(
    config: &StateConfig,
    env: Option<String>,
) -> Result<Option<StateSecret>, ConfigError> {
    if let Some(secret) = env.filter(|s| !s.is_empty()) {
        return key_of(&secret, STATE_KEY_VAR).map(Some);
    }
    let Some(path) = &config.key_file else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::because(format!("[state] key_file {}", path.display()), e))?;
    key_of(&text, &format!("[state] key_file {}", path.display())).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_secret_is_refused_and_whitespace_does_not_count() {
        let config = StateConfig::default();
        let e = load_key_with(&config, Some("  short  ".into()))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.starts_with("TOOLGATE_STATE_KEY: the state secret has 5 characters"),
            "{e}"
        );
        let a = load_key_with(&config, Some("x".repeat(32)))
            .unwrap()
            .unwrap();
        let b = load_key_with(&config, Some(format!("{}\n", "x".repeat(32))))
            .unwrap()
            .unwrap();
        assert_eq!(a.key().id(), b.key().id());
        // Each endpoint has a key of its own, the same on every instance.
        assert_ne!(a.key_for("coding").id(), a.key().id());
        assert_ne!(a.key_for("coding").id(), a.key_for("support").id());
        assert_eq!(a.key_for("coding").id(), b.key_for("coding").id());
        assert!(load_key_with(&config, None).unwrap().is_none());
    }

    #[test]
    fn the_environment_wins_over_the_file_and_a_missing_file_is_named() {
        let config = StateConfig {
            key_file: Some("/nonexistent/toolgate.key".into()),
            ttl: None,
        };
        assert!(
            load_key_with(&config, Some("y".repeat(40)))
                .unwrap()
                .is_some()
        );
        let e = load_key_with(&config, None).err().unwrap();
        assert!(e.to_string().contains("/nonexistent/toolgate.key"), "{e}");
        // The I/O error is kept as the cause.
        let cause = std::error::Error::source(&e).unwrap().to_string();
        assert!(cause.contains("No such file"), "{cause}");
    }
}
