//! Sealing `requestState`: the keys, and the two formats a state travels in.
//!
//! A multi round-trip flow's state goes to the client and comes back with the
//! retry, so the server keeps nothing between rounds. What it seals: the
//! request it belongs to (method, name, a digest of the arguments), the
//! caller's subject, an expiry, the answers of earlier rounds and the
//! handler's remembered data.
//!
//! - **Signed** (the default): the contents are readable base64 JSON with an
//!   HMAC-SHA-256 tag. The client cannot change them, but it *can read them*:
//!   earlier answers and [`Inputs::remember`](crate::Inputs::remember)ed data
//!   are visible to whoever holds the state. Keep secrets out, or use:
//! - **Encrypted** ([`ServerBuilder::encrypt_state`](crate::ServerBuilder::encrypt_state)):
//!   XChaCha20-Poly1305 with a random 192-bit nonce; the state is opaque and
//!   tamper-proof. It is written `e1.<key id>.<nonce and ciphertext>`.
//!
//! Keys rotate without breaking flows in flight: the server seals with its
//! current key and opens with the current key or any retired one
//! ([`ServerBuilder::retired_state_key`](crate::ServerBuilder::retired_state_key)),
//! found by key id (encrypted) or by trying each (signed). Either format is
//! accepted whatever the server seals with, so switching the mode on does not
//! break flows in flight either.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
#[cfg(feature = "state-encryption")]
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
#[cfg(feature = "state-encryption")]
use chacha20poly1305::{Key, XChaCha20Poly1305, XNonce};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use toolgate_protocol::RpcError;

use crate::mrtr::Binding;

type HmacSha256 = Hmac<Sha256>;

/// Prefix of the encrypted format (version 1).
const ENCRYPTED: &str = "e1.";

/// The secret that seals `requestState`. Share it between processes that
/// serve the same clients so they can complete each other's flows.
///
/// ```
/// use toolgate_server::{Server, StateKey};
/// let current = StateKey::new([7; 32]).with_id("2026-12");
/// let retired = StateKey::new([3; 32]).with_id("2026-11");
/// let server = Server::builder("s", "1")
///     .state_key(current)
///     .retired_state_key(retired) // flows sealed last month still finish
///     .encrypt_state()            // clients cannot read what the state holds
///     .build()
///     .unwrap();
/// # let _ = server;
/// ```
#[derive(Clone)]
pub struct StateKey {
    secret: [u8; 32],
    id: String,
}

impl StateKey {
    /// A key from 32 secret bytes. Its id is derived from the secret (a
    /// one-way fingerprint); name it with [`StateKey::with_id`].
    pub fn new(secret: [u8; 32]) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(b"toolgate requestState key id\0");
        hasher.update(secret);
        let id = hasher
            .finalize()
            .iter()
            .take(4)
            .map(|b| format!("{b:02x}"))
            .collect();
        StateKey { secret, id }
    }

    /// A fresh random key (the default: flows then survive only within one process).
    pub fn random() -> Self {
        StateKey::new(rand::random())
    }

    /// Name the key (for example by the month it was made), so an encrypted
    /// state says which key opens it. An id is 1–32 characters of
    /// `[A-Za-z0-9_-]`; anything else is refused by the server's `build()`.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// The key's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    #[cfg(feature = "state-encryption")]
    fn aead(&self) -> XChaCha20Poly1305 {
        // A key of its own for encryption, so the one secret never serves
        // two algorithms.
        let mut hasher = Sha256::new();
        hasher.update(b"toolgate requestState aead\0");
        hasher.update(self.secret);
        XChaCha20Poly1305::new(Key::from_slice(&hasher.finalize()))
    }

    fn mac(&self) -> HmacSha256 {
        <HmacSha256 as Mac>::new_from_slice(&self.secret)
            .unwrap_or_else(|_| unreachable!("HMAC takes any key length"))
    }
}

impl std::fmt::Debug for StateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StateKey({:?}, ..)", self.id)
    }
}

/// The keys a server seals and opens with, and the format it seals in.
#[derive(Clone, Debug)]
pub(crate) struct StateKeys {
    current: StateKey,
    retired: Vec<StateKey>,
    #[cfg_attr(not(feature = "state-encryption"), allow(dead_code))]
    encrypt: bool,
}

impl StateKeys {
    pub(crate) fn new(
        current: StateKey,
        retired: Vec<StateKey>,
        encrypt: bool,
    ) -> Result<Self, String> {
        for key in std::iter::once(&current).chain(&retired) {
            let valid = (1..=32).contains(&key.id.len())
                && key
                    .id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !valid {
                return Err(format!(
                    "state key id {:?} is invalid: use 1-32 characters of A-Z, a-z, 0-9, _ and -",
                    key.id
                ));
            }
        }
        let mut ids: Vec<&str> = std::iter::once(&current)
            .chain(&retired)
            .map(StateKey::id)
            .collect();
        ids.sort_unstable();
        if let Some(pair) = ids.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!(
                "two state keys share the id {:?}; give each its own with StateKey::with_id",
                pair[0]
            ));
        }
        Ok(StateKeys {
            current,
            retired,
            encrypt,
        })
    }

    fn all(&self) -> impl Iterator<Item = &StateKey> {
        std::iter::once(&self.current).chain(&self.retired)
    }

    /// Seal round state for the client to carry.
    pub(crate) fn seal(
        &self,
        binding: &Binding,
        ttl_secs: u64,
        responses: Map<String, Value>,
        app: Option<Value>,
    ) -> String {
        let sealed = Sealed {
            v: 1,
            m: binding.method.clone(),
            n: binding.name.clone(),
            d: binding.digest.clone(),
            s: binding.subject.clone(),
            e: now().saturating_add(ttl_secs),
            r: responses,
            a: app,
            u: binding.once.then(crate::nonce::new_nonce),
        };
        let json = serde_json::to_vec(&sealed).unwrap_or_default();
        let key = &self.current;
        #[cfg(feature = "state-encryption")]
        if self.encrypt {
            let nonce: [u8; 24] = rand::random();
            let aad = aad(&key.id);
            let Ok(ciphertext) = key.aead().encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: &json,
                    aad: &aad,
                },
            ) else {
                unreachable!("encryption fails only for messages over 256 GiB")
            };
            let mut body = nonce.to_vec();
            body.extend_from_slice(&ciphertext);
            return format!("{ENCRYPTED}{}.{}", key.id, URL_SAFE_NO_PAD.encode(body));
        }
        let payload = URL_SAFE_NO_PAD.encode(json);
        let mut mac = key.mac();
        mac.update(payload.as_bytes());
        let tag = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        format!("{payload}.{tag}")
    }

    /// Open and verify a state presented on `binding`'s request.
    pub(crate) fn open(&self, raw: &str, binding: &Binding) -> Result<Opened, StateRefusal> {
        let json = match raw.strip_prefix(ENCRYPTED) {
            Some(rest) => self.decrypt(rest)?,
            None => self.verify(raw)?,
        };
        let sealed: Sealed = serde_json::from_slice(&json)
            .map_err(|_| refused(StateFault::Tampered, "it is malformed"))?;
        if sealed.m != binding.method || sealed.n != binding.name || sealed.d != binding.digest {
            return Err(refused(
                StateFault::Moved,
                "it belongs to a different request (method, name or arguments differ)",
            ));
        }
        if sealed.s != binding.subject {
            return Err(refused(
                StateFault::Moved,
                "it was issued to a different caller",
            ));
        }
        let t = now();
        if sealed.e <= t {
            return Err(refused(
                StateFault::Expired,
                format!("it expired {} s ago", t - sealed.e),
            ));
        }
        if binding.once && sealed.u.is_none() {
            return Err(refused(
                StateFault::Expired,
                "it was issued before this request's rounds became single-use",
            ));
        }
        Ok(Opened {
            responses: sealed.r,
            app: sealed.a,
            once: sealed.u.filter(|_| binding.once),
        })
    }

    #[cfg(not(feature = "state-encryption"))]
    fn decrypt(&self, _rest: &str) -> Result<Vec<u8>, StateRefusal> {
        Err(tampered(
            "it is encrypted, and this server was built without state encryption",
        ))
    }

    #[cfg(feature = "state-encryption")]
    fn decrypt(&self, rest: &str) -> Result<Vec<u8>, StateRefusal> {
        let (id, body) = rest
            .split_once('.')
            .ok_or_else(|| tampered("it was not issued by this server"))?;
        let key = self.all().find(|k| k.id == id).ok_or_else(|| {
            tampered(
                "it was sealed with a key this server does not have (retired, or another server's)",
            )
        })?;
        let body = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| tampered("it is malformed"))?;
        if body.len() < 24 {
            return Err(tampered("it is malformed"));
        }
        let (nonce, ciphertext) = body.split_at(24);
        key.aead()
            .decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad: &aad(id),
                },
            )
            .map_err(|_| tampered("integrity check failed (it was modified)"))
    }

    fn verify(&self, raw: &str) -> Result<Vec<u8>, StateRefusal> {
        let (payload, tag) = raw
            .split_once('.')
            .ok_or_else(|| tampered("it was not issued by this server"))?;
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| tampered("it was not issued by this server"))?;
        let verified = self.all().any(|key| {
            let mut mac = key.mac();
            mac.update(payload.as_bytes());
            // Constant-time comparison.
            mac.verify_slice(&tag).is_ok()
        });
        if !verified {
            return Err(tampered(
                "integrity check failed (it was modified, or sealed with another server's key)",
            ));
        }
        URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| tampered("it is malformed"))
    }
}

/// Bound into the ciphertext: the format version and the key id, so a state
/// cannot be relabelled with another key's id.
#[cfg(feature = "state-encryption")]
fn aad(id: &str) -> Vec<u8> {
    format!("toolgate requestState v1 {id}").into_bytes()
}

/// A state that opened on its request.
#[derive(Debug, PartialEq)]
pub(crate) struct Opened {
    /// Answers of earlier rounds.
    pub(crate) responses: Map<String, Value>,
    /// The handler's remembered data.
    pub(crate) app: Option<Value>,
    /// The nonce to spend before the round runs (single-use rounds only).
    pub(crate) once: Option<String>,
}

/// What was wrong with a refused state, for the call log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StateFault {
    /// Not sealed by this server's keys, altered, or malformed.
    Tampered,
    /// Genuine, but presented on another request or by another caller.
    Moved,
    /// Genuine, but too old (or sealed before single use was required).
    Expired,
}

/// A refused state: why, and the `-32602` error the client gets.
#[derive(Debug)]
pub(crate) struct StateRefusal {
    pub(crate) fault: StateFault,
    pub(crate) error: RpcError,
}

fn refused(fault: StateFault, detail: impl std::fmt::Display) -> StateRefusal {
    StateRefusal {
        fault,
        error: invalid(detail),
    }
}

fn tampered(detail: impl std::fmt::Display) -> StateRefusal {
    refused(StateFault::Tampered, detail)
}

#[derive(Serialize, Deserialize)]
struct Sealed {
    v: u8,
    m: String,
    n: String,
    d: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    s: Option<String>,
    e: u64,
    #[serde(default)]
    r: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    a: Option<Value>,
    /// The single-use nonce, when the request's rounds are single-use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    u: Option<String>,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn invalid(detail: impl std::fmt::Display) -> RpcError {
    RpcError::invalid_params(format!(
        "Invalid requestState: {detail}; call again without requestState to start over"
    ))
}

/// Opens a `requestState` with `key` and no binding checks: for the fuzz
/// targets, which feed it arbitrary text.
#[cfg(feature = "fuzzing")]
pub fn fuzz_open(key: &StateKey, raw: &str) -> bool {
    let keys = StateKeys {
        current: key.clone(),
        retired: Vec::new(),
        encrypt: false,
    };
    let binding = Binding::new("tools/call", "t", &Value::Null, None);
    keys.open(raw, &binding).is_ok()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn binding(args: Value) -> Binding {
        Binding::new("tools/call", "t", &args, Some("alice"))
    }

    fn keys(encrypt: bool) -> StateKeys {
        StateKeys::new(StateKey::random(), Vec::new(), encrypt).unwrap()
    }

    fn msg(e: StateRefusal) -> String {
        e.error.message
    }

    #[test]
    fn sealed_state_opens_only_on_its_own_request() {
        for encrypt in [false, true] {
            let keys = keys(encrypt);
            let b = binding(json!({"a": 1, "b": [1, 2]}));
            let mut r = Map::new();
            r.insert("k".into(), json!({"action": "accept"}));
            let s = keys.seal(&b, 60, r.clone(), Some(json!(7)));
            assert_eq!(s.starts_with(ENCRYPTED), encrypt);
            let opened = keys.open(&s, &b).unwrap();
            assert_eq!((opened.responses, opened.app), (r, Some(json!(7))));
            assert_eq!(opened.once, None);
            // Same arguments in another key order: same request.
            assert!(
                keys.open(&s, &binding(json!({"b": [1, 2], "a": 1})))
                    .is_ok()
            );
            assert!(
                msg(keys.open(&s, &binding(json!({"a": 2}))).unwrap_err())
                    .contains("different request")
            );
            let args = json!({"a": 1, "b": [1, 2]});
            let other_method = Binding::new("prompts/get", "t", &args, Some("alice"));
            assert!(msg(keys.open(&s, &other_method).unwrap_err()).contains("different request"));
            let other_caller = Binding::new("tools/call", "t", &args, Some("bob"));
            assert!(msg(keys.open(&s, &other_caller).unwrap_err()).contains("different caller"));
            let stranger = self::keys(encrypt);
            let refused = msg(stranger.open(&s, &b).unwrap_err());
            assert!(
                refused.contains("integrity") || refused.contains("does not have"),
                "{refused}"
            );
            let mut tampered = s.clone();
            tampered.insert(s.len() - 5, 'x');
            let refusal = keys.open(&tampered, &b).unwrap_err();
            assert_eq!(
                (refusal.error.code, refusal.fault),
                (-32602, StateFault::Tampered)
            );
            assert!(msg(keys.open("garbage", &b).unwrap_err()).contains("not issued"));
            let expired = keys.seal(&b, 0, Map::new(), None);
            assert!(msg(keys.open(&expired, &b).unwrap_err()).contains("expired"));
        }
    }

    #[test]
    fn a_single_use_state_carries_a_fresh_nonce_and_faults_are_told_apart() {
        for encrypt in [false, true] {
            let keys = keys(encrypt);
            let args = json!({"a": 1});
            let once = binding(args.clone()).single_use(true);
            let first = keys.open(&keys.seal(&once, 60, Map::new(), None), &once);
            let second = keys.open(&keys.seal(&once, 60, Map::new(), None), &once);
            let (first, second) = (first.unwrap().once, second.unwrap().once);
            assert!(first.as_ref().is_some_and(|n| n.len() == 32), "{first:?}");
            assert_ne!(first, second);
            // A state sealed before single use was asked for cannot skip it.
            let plain = keys.seal(&binding(args.clone()), 60, Map::new(), None);
            let refusal = keys.open(&plain, &once).unwrap_err();
            assert_eq!(refusal.fault, StateFault::Expired);
            assert!(refusal.error.message.contains("single-use"), "{refusal:?}");
            // Moved to other arguments or another caller; expired.
            let s = keys.seal(&once, 60, Map::new(), None);
            let fault = |b: &Binding| keys.open(&s, b).unwrap_err().fault;
            assert_eq!(
                fault(&binding(json!({"a": 2})).single_use(true)),
                StateFault::Moved
            );
            let bob = Binding::new("tools/call", "t", &args, Some("bob")).single_use(true);
            assert_eq!(fault(&bob), StateFault::Moved);
            let old = keys.seal(&once, 0, Map::new(), None);
            assert_eq!(
                keys.open(&old, &once).unwrap_err().fault,
                StateFault::Expired
            );
        }
    }

    #[test]
    fn encrypted_state_hides_its_contents() {
        let keys = keys(true);
        let b = binding(json!({}));
        let mut r = Map::new();
        r.insert("secret-answer".into(), json!("hunter2"));
        let s = keys.seal(&b, 60, r, Some(json!("remembered-secret")));
        let body = s.rsplit('.').next().unwrap();
        let bytes = URL_SAFE_NO_PAD.decode(body).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains("hunter2") && !text.contains("remembered-secret"));
        // The signed format, by contrast, is only base64: readable.
        let signed = self::keys(false).seal(&b, 60, Map::new(), Some(json!("visible")));
        let payload = URL_SAFE_NO_PAD
            .decode(signed.split('.').next().unwrap())
            .unwrap();
        assert!(String::from_utf8_lossy(&payload).contains("visible"));
    }

    #[test]
    fn a_retired_key_still_opens_flows_in_flight_in_both_formats() {
        let old = StateKey::new([1; 32]).with_id("old");
        let new = StateKey::new([2; 32]).with_id("new");
        let b = binding(json!({"x": 1}));
        for encrypt in [false, true] {
            let before = StateKeys::new(old.clone(), Vec::new(), encrypt).unwrap();
            let s = before.seal(&b, 60, Map::new(), None);
            let after = StateKeys::new(new.clone(), vec![old.clone()], true).unwrap();
            assert!(after.open(&s, &b).is_ok(), "encrypt={encrypt}");
            // Once the old key is dropped, the flow must start over.
            let dropped = StateKeys::new(new.clone(), Vec::new(), true).unwrap();
            assert!(dropped.open(&s, &b).is_err());
        }
        // An encrypted state relabelled with another key's id is refused.
        let both = StateKeys::new(new.clone(), vec![old.clone()], true).unwrap();
        let s = both.seal(&b, 60, Map::new(), None);
        let relabelled = s.replacen("e1.new.", "e1.old.", 1);
        assert!(msg(both.open(&relabelled, &b).unwrap_err()).contains("integrity"));
    }

    #[test]
    fn key_ids_must_be_plain_and_distinct() {
        let key = |id: &str| StateKey::new([1; 32]).with_id(id);
        assert!(StateKeys::new(key("a.b"), Vec::new(), true).is_err());
        assert!(StateKeys::new(key(""), Vec::new(), true).is_err());
        assert!(StateKeys::new(key(&"x".repeat(33)), Vec::new(), true).is_err());
        let dup = StateKeys::new(key("k"), vec![StateKey::new([2; 32]).with_id("k")], true);
        assert!(dup.unwrap_err().contains("share the id"));
        // Derived ids differ between secrets.
        assert_ne!(StateKey::new([1; 32]).id(), StateKey::new([2; 32]).id());
    }
}
