//! Paths into a configuration document, rendered the way errors name them:
//! `groups.ci.tolerations[0].operator`, `groups.ci.nodeSelector["kubernetes.io/os"]`.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Key(String),
    Index(usize),
}

/// A position in the configuration document.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Path(Vec<Segment>);

impl Path {
    pub fn root() -> Self {
        Self::default()
    }

    #[must_use]
    pub fn key(&self, key: &str) -> Self {
        let mut segments = self.0.clone();
        segments.push(Segment::Key(key.to_owned()));
        Self(segments)
    }

    #[must_use]
    pub fn index(&self, index: usize) -> Self {
        let mut segments = self.0.clone();
        segments.push(Segment::Index(index));
        Self(segments)
    }

    /// The key holding the list or mapping whose item this is (`matchFields` of `matchFields[0]`).
    pub fn parent_key(&self) -> Option<&str> {
        match self.0.iter().rev().nth(1) {
            Some(Segment::Key(key)) => Some(key),
            _ => None,
        }
    }
}

fn is_plain(key: &str) -> bool {
    key.starts_with(|c: char| c.is_ascii_alphanumeric())
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("(top level)");
        }
        for (i, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Key(key) if is_plain(key) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    f.write_str(key)?;
                }
                Segment::Key(key) => write!(f, "[{key:?}]")?,
                Segment::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
