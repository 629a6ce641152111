//! Sealing what the gateway keeps for people: their linked accounts'
//! tokens at rest, and the tickets of the connect page in URLs.
//!
//! XChaCha20-Poly1305 (a random 24-byte nonce per seal) under a key
//! derived from the gateway's state secret and the purpose, with
//! associated data that names what the bytes belong to (a subject and an
//! upstream): a sealed account copied to another person's row, or a ticket
//! of one purpose used for another, does not open. A changed state secret
//! opens nothing that was sealed before: the gateway then asks people to
//! link again rather than fail.
//!
//! Layer: `store`.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{Key, XChaCha20Poly1305, XNonce};

use crate::store::state_key::StateSecret;

/// Why something sealed did not open.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("it does not open under this gateway's state key (changed, or the bytes were altered)")]
pub struct Unsealable;

/// A key for one purpose.
#[derive(Clone)]
pub struct Sealer {
    aead: XChaCha20Poly1305,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(…)")
    }
}

const NONCE: usize = 24;

impl Sealer {
    /// The key for `purpose` under `secret`.
    pub fn new(secret: &StateSecret, purpose: &str) -> Self {
        Self {
            aead: XChaCha20Poly1305::new(Key::from_slice(&secret.derive(purpose))),
        }
    }

    /// `message` sealed, bound to `bound_to`.
    pub fn seal(&self, message: &[u8], bound_to: &[u8]) -> Vec<u8> {
        let nonce: [u8; NONCE] = rand::random();
        let sealed = self.aead.encrypt(
            XNonce::from_slice(&nonce),
            Payload {
                msg: message,
                aad: bound_to,
            },
        );
        let mut out = nonce.to_vec();
        // Encryption fails only for messages over 256 GiB.
        out.extend_from_slice(&sealed.unwrap_or_default());
        out
    }

    /// What `sealed` holds, if it was sealed by this key bound to `bound_to`.
    pub fn open(&self, sealed: &[u8], bound_to: &[u8]) -> Result<Vec<u8>, Unsealable> {
        if sealed.len() < NONCE + 16 {
            return Err(Unsealable);
        }
        let (nonce, body) = sealed.split_at(NONCE);
        self.aead
            .decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg: body,
                    aad: bound_to,
                },
            )
            .map_err(|_| Unsealable)
    }

    /// [`Sealer::seal`], as URL-safe text.
    pub fn seal_text(&self, message: &[u8], bound_to: &[u8]) -> String {
        URL_SAFE_NO_PAD.encode(self.seal(message, bound_to))
    }

    /// [`Sealer::open`] of URL-safe text.
    pub fn open_text(&self, text: &str, bound_to: &[u8]) -> Result<Vec<u8>, Unsealable> {
        // A ticket is a few hundred bytes: anything far longer is not one.
        if text.len() > 8 * 1024 {
            return Err(Unsealable);
        }
        let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| Unsealable)?;
        self.open(&bytes, bound_to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(text: &str) -> StateSecret {
        StateSecret::from_text(text).unwrap()
    }

    #[test]
    fn what_is_sealed_opens_only_with_the_same_key_purpose_and_binding() {
        let a = Sealer::new(&secret(&"a".repeat(40)), "accounts");
        let sealed = a.seal(b"tokens", b"alice\0crm");
        assert_eq!(a.open(&sealed, b"alice\0crm").unwrap(), b"tokens");
        // Another person's row, another purpose, another secret: nothing.
        assert_eq!(a.open(&sealed, b"bob\0crm"), Err(Unsealable));
        let other_purpose = Sealer::new(&secret(&"a".repeat(40)), "tickets");
        assert_eq!(other_purpose.open(&sealed, b"alice\0crm"), Err(Unsealable));
        let rotated = Sealer::new(&secret(&"b".repeat(40)), "accounts");
        assert_eq!(rotated.open(&sealed, b"alice\0crm"), Err(Unsealable));
        // Altered, cut short, or not base64 at all.
        let mut altered = sealed.clone();
        let last = altered.len() - 1;
        altered[last] ^= 1;
        assert_eq!(a.open(&altered, b"alice\0crm"), Err(Unsealable));
        assert_eq!(a.open(&sealed[..10], b"alice\0crm"), Err(Unsealable));
        assert_eq!(a.open_text("not base64!", b""), Err(Unsealable));
        assert_eq!(a.open_text(&"A".repeat(9000), b""), Err(Unsealable));
        // Each seal is different (a fresh nonce).
        assert_ne!(a.seal(b"tokens", b"x"), a.seal(b"tokens", b"x"));
        let text = a.seal_text(b"ticket", b"t");
        assert_eq!(a.open_text(&text, b"t").unwrap(), b"ticket");
    }
}
