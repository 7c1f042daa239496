//! JSON Patch rendering.

/// Escapes one JSON Pointer reference token (RFC 6901): `~` → `~0`, `/` → `~1`.
pub fn escape_pointer_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}
