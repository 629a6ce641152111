//! Protocol versions.

/// The revision this crate implements.
pub const LATEST_PROTOCOL_VERSION: &str = "2026-07-28";

/// Modern (per-request `_meta`) versions a toolgate server accepts, newest first.
pub const MODERN_VERSIONS: &[&str] = &[LATEST_PROTOCOL_VERSION];

/// Legacy (initialize-handshake) revisions, newest first, so errors can name
/// them precisely.
pub const LEGACY_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The legacy revisions a dual-era toolgate peer negotiates in `initialize`,
/// newest first. 2024-11-05 is left out: its HTTP+SSE transport is
/// deprecated, and its stdio shape is served by answering as 2025-03-26.
pub const LEGACY_SERVED: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];

/// Whether `version` is a legacy revision a toolgate peer can negotiate.
pub fn is_legacy_served(version: &str) -> bool {
    LEGACY_SERVED.contains(&version)
}

/// Whether `version` is a modern revision this crate understands.
pub fn is_modern(version: &str) -> bool {
    MODERN_VERSIONS.contains(&version)
}
