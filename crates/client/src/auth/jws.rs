//! Signed JWTs the client makes itself: DPoP proofs (RFC 9449) and client
//! assertions (RFC 7523). Keys are `ring`'s, already in the tree for TLS:
//! ES256 generated in memory or read from PKCS#8, and RS256 read from PKCS#8.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{self, EcdsaKeyPair, KeyPair as _, RsaKeyPair};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::fetch::fail;
use crate::ClientError;

/// A private key the client signs with.
pub(crate) enum SigningKey {
    /// P-256 with SHA-256 (`ES256`); keeps its PKCS#8 so it can be stored.
    Es256 { pair: EcdsaKeyPair, pkcs8: Vec<u8> },
    /// RSA PKCS#1 v1.5 with SHA-256 (`RS256`).
    Rs256(RsaKeyPair),
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Es256 { .. } => "SigningKey(ES256, redacted)",
            Self::Rs256(_) => "SigningKey(RS256, redacted)",
        })
    }
}

/// `n` random bytes, base64url.
pub(crate) fn random_b64(n: usize) -> Result<String, ClientError> {
    let mut bytes = vec![0u8; n];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| fail("the system random number generator failed"))?;
    Ok(B64.encode(bytes))
}

/// base64url(SHA-256(text)), for PKCE challenges and DPoP `ath`.
pub(crate) fn sha256_b64(text: &str) -> String {
    B64.encode(Sha256::digest(text.as_bytes()))
}

/// Seconds since the epoch.
pub(crate) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The DER inside a PEM block (or the input, if it is no PEM).
fn pem_der(pem: &str) -> Result<Vec<u8>, ClientError> {
    let body: String = pem
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("-----"))
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .map_err(|_| fail("the private key is not PEM"))
}

impl SigningKey {
    /// A fresh ES256 key.
    pub fn generate() -> Result<Self, ClientError> {
        let rng = SystemRandom::new();
        let doc = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| fail("cannot generate a DPoP key"))?;
        Self::es256(doc.as_ref().to_vec())
    }

    fn es256(pkcs8: Vec<u8>) -> Result<Self, ClientError> {
        let pair = EcdsaKeyPair::from_pkcs8(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &pkcs8,
            &SystemRandom::new(),
        )
        .map_err(|_| fail("the private key is not a PKCS#8 P-256 key"))?;
        Ok(Self::Es256 { pair, pkcs8 })
    }

    /// A PKCS#8 key in PEM for `alg` (`ES256` or `RS256`).
    pub fn from_pem(pem: &str, alg: &str) -> Result<Self, ClientError> {
        let der = pem_der(pem)?;
        match alg {
            "ES256" => Self::es256(der),
            "RS256" => RsaKeyPair::from_pkcs8(&der)
                .map(Self::Rs256)
                .map_err(|_| fail("the private key is not a PKCS#8 RSA key")),
            other => Err(fail(format!(
                "signing algorithm {other:?} is not supported (ES256, RS256)"
            ))),
        }
    }

    /// An ES256 key stored earlier by [`SigningKey::pkcs8_b64`].
    pub fn from_stored(b64: &str) -> Result<Self, ClientError> {
        let der = B64
            .decode(b64)
            .map_err(|_| fail("a stored DPoP key is damaged"))?;
        Self::es256(der)
    }

    /// The PKCS#8 of an ES256 key, base64url, for a token store.
    pub fn pkcs8_b64(&self) -> Option<String> {
        match self {
            Self::Es256 { pkcs8, .. } => Some(B64.encode(pkcs8)),
            Self::Rs256(_) => None,
        }
    }

    pub fn alg(&self) -> &'static str {
        match self {
            Self::Es256 { .. } => "ES256",
            Self::Rs256(_) => "RS256",
        }
    }

    /// The public key as a JWK (EC keys only: DPoP proofs carry it).
    pub fn public_jwk(&self) -> Option<Value> {
        let Self::Es256 { pair, .. } = self else {
            return None;
        };
        // An uncompressed point: 0x04, then x and y of 32 bytes each.
        let point = pair.public_key().as_ref();
        let (x, y) = point.get(1..33).zip(point.get(33..65))?;
        Some(json!({"kty": "EC", "crv": "P-256", "x": B64.encode(x), "y": B64.encode(y)}))
    }

    /// A compact JWS of `claims` under `header` (whose `alg` is set here).
    pub fn sign(&self, mut header: Value, claims: &Value) -> Result<String, ClientError> {
        header["alg"] = json!(self.alg());
        let input = format!(
            "{}.{}",
            B64.encode(header.to_string()),
            B64.encode(claims.to_string())
        );
        let rng = SystemRandom::new();
        let signature = match self {
            Self::Es256 { pair, .. } => pair
                .sign(&rng, input.as_bytes())
                .map(|s| s.as_ref().to_vec())
                .map_err(|_| fail("signing failed"))?,
            Self::Rs256(pair) => {
                let mut out = vec![0; pair.public().modulus_len()];
                pair.sign(
                    &signature::RSA_PKCS1_SHA256,
                    &rng,
                    input.as_bytes(),
                    &mut out,
                )
                .map_err(|_| fail("signing failed"))?;
                out
            }
        };
        Ok(format!("{input}.{}", B64.encode(signature)))
    }

    /// A DPoP proof for `method url`, bound to `access_token` and carrying
    /// the server's `nonce` when given.
    pub fn dpop_proof(
        &self,
        method: &str,
        url: &reqwest::Url,
        access_token: Option<&str>,
        nonce: Option<&str>,
    ) -> Result<String, ClientError> {
        let jwk = self
            .public_jwk()
            .ok_or_else(|| fail("DPoP needs an EC key"))?;
        // htu is the URI without query and fragment (RFC 9449 §4.2).
        let mut htu = url.clone();
        htu.set_query(None);
        htu.set_fragment(None);
        let mut claims = json!({
            "jti": random_b64(16)?,
            "htm": method,
            "htu": htu.as_str(),
            "iat": now(),
        });
        if let Some(token) = access_token {
            claims["ath"] = json!(sha256_b64(token));
        }
        if let Some(nonce) = nonce {
            claims["nonce"] = json!(nonce);
        }
        self.sign(json!({"typ": "dpop+jwt", "jwk": jwk}), &claims)
    }

    /// An RFC 7523 client assertion: `client_id` as issuer and subject,
    /// the authorization server's issuer as audience, valid five minutes.
    pub fn client_assertion(&self, client_id: &str, audience: &str) -> Result<String, ClientError> {
        let now = now();
        self.sign(
            json!({"typ": "JWT"}),
            &json!({
                "iss": client_id,
                "sub": client_id,
                "aud": audience,
                "iat": now,
                "exp": now + 300,
                "jti": random_b64(16)?,
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(jws: &str, i: usize) -> Value {
        let seg = jws.split('.').nth(i).unwrap_or_default();
        serde_json::from_slice(&B64.decode(seg).unwrap_or_default()).unwrap_or(Value::Null)
    }

    #[test]
    fn a_dpop_proof_verifies_with_the_key_in_its_header() {
        let key = SigningKey::generate().unwrap_or_else(|e| panic!("{e}"));
        let url = reqwest::Url::parse("https://mcp.example.com/mcp?x=1#y")
            .unwrap_or_else(|e| panic!("{e}"));
        let proof = key
            .dpop_proof("POST", &url, Some("tok"), Some("n1"))
            .unwrap_or_else(|e| panic!("{e}"));
        let header = part(&proof, 0);
        let claims = part(&proof, 1);
        assert_eq!(header["typ"], "dpop+jwt");
        assert_eq!(header["alg"], "ES256");
        assert!(
            header["jwk"].get("d").is_none(),
            "no private part in the proof"
        );
        assert_eq!(claims["htu"], "https://mcp.example.com/mcp");
        assert_eq!(claims["htm"], "POST");
        assert_eq!(claims["nonce"], "n1");
        assert_eq!(claims["ath"], sha256_b64("tok"));
        // Check the signature against the public point the header carries.
        let x = B64
            .decode(header["jwk"]["x"].as_str().unwrap_or_default())
            .unwrap_or_default();
        let y = B64
            .decode(header["jwk"]["y"].as_str().unwrap_or_default())
            .unwrap_or_default();
        let point = [&[4u8][..], &x, &y].concat();
        let (input, sig) = proof.rsplit_once('.').unwrap_or_default();
        let sig = B64.decode(sig).unwrap_or_default();
        signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point)
            .verify(input.as_bytes(), &sig)
            .unwrap_or_else(|_| panic!("the proof does not verify"));
        let again = key.dpop_proof("POST", &url, None, None).unwrap_or_default();
        assert_ne!(
            part(&again, 1)["jti"],
            claims["jti"],
            "every proof is fresh"
        );
    }

    #[test]
    fn a_stored_key_comes_back_the_same() {
        let key = SigningKey::generate().unwrap_or_else(|e| panic!("{e}"));
        let stored = key.pkcs8_b64().unwrap_or_default();
        let back = SigningKey::from_stored(&stored).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(key.public_jwk(), back.public_jwk());
        assert!(SigningKey::from_stored("garbage").is_err());
        assert!(
            SigningKey::from_pem(
                "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----",
                "ES256"
            )
            .is_err()
        );
        assert!(SigningKey::from_pem("x", "HS256").is_err());
    }
}
