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
mod tests {
    use super::*;

    #[test]
    fn paths_render_like_yaml_paths() {
        let p = Path::root()
            .key("groups")
            .key("ci")
            .key("tolerations")
            .index(0)
            .key("operator");
        assert_eq!(p.to_string(), "groups.ci.tolerations[0].operator");
        let p = Path::root()
            .key("groups")
            .key("ci")
            .key("nodeSelector")
            .key("kubernetes.io/os");
        assert_eq!(p.to_string(), r#"groups.ci.nodeSelector["kubernetes.io/os"]"#);
        assert_eq!(Path::root().to_string(), "(top level)");
    }
}
