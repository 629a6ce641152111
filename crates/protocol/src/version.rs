//! Protocol versions.

/// The revision this crate implements.
pub const LATEST_PROTOCOL_VERSION: &str = "2026-07-28";

/// Modern (per-request `_meta`) versions a toolgate server accepts, newest first.
pub const MODERN_VERSIONS: &[&str] = &[LATEST_PROTOCOL_VERSION];

/// Legacy (initialize-handshake) revisions, newest first. toolgate does not
/// serve them yet; they are listed so errors can name them precisely.
pub const LEGACY_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Whether `version` is a modern revision this crate understands.
pub fn is_modern(version: &str) -> bool {
    MODERN_VERSIONS.contains(&version)
}
