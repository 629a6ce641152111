//! Random identifiers (layer `base`).

/// A fresh random id: 128 bits, hex (approval page ids and secrets,
/// parked calls, grants).
pub fn new_nonce() -> String {
    let bytes: [u8; 16] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
