//! Paths into a configuration document, rendered the way errors name them:
//! `groups.ci.tolerations[0].operator`, `groups.ci.nodeSelector["kubernetes.io/os"]`.

use std::fmt;

/// A position in the configuration document, as errors name it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Path(String);

impl Path {
    pub(super) fn root() -> Self {
        Self::default()
    }

    /// The value under `key`: `.key`, or `["key"]` when the key is not a plain word.
    #[must_use]
    pub(super) fn key(&self, key: &str) -> Self {
        let plain = key.starts_with(|c: char| c.is_ascii_alphanumeric())
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        Self(match (plain, self.0.is_empty()) {
            (true, true) => key.to_owned(),
            (true, false) => format!("{}.{key}", self.0),
            (false, _) => format!("{}[{key:?}]", self.0),
        })
    }

    #[must_use]
    pub(super) fn index(&self, index: usize) -> Self {
        Self(format!("{}[{index}]", self.0))
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() { "(top level)" } else { &self.0 })
    }
}

#[cfg(test)]
mod tests;
