//! Kubernetes name syntax, checked the way the API server checks it
//! (`k8s.io/apimachinery/pkg/util/validation`). Each function returns `None`
//! when the input is valid, or the reason it is not.

const QUALIFIED_NAME_MAX: usize = 63;
const LABEL_VALUE_MAX: usize = 63;
const DNS1123_LABEL_MAX: usize = 63;
const DNS1123_SUBDOMAIN_MAX: usize = 253;

fn is_alnum(c: char) -> bool {
    c.is_ascii_alphanumeric()
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn is_qualified_name_part(s: &str) -> bool {
    let (Some(first), Some(last)) = (s.chars().next(), s.chars().last()) else {
        return false;
    };
    is_alnum(first) && is_alnum(last) && s.chars().all(|c| is_alnum(c) || c == '-' || c == '_' || c == '.')
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn is_dns1123_label_chars(s: &str) -> bool {
    let lower_alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let (Some(first), Some(last)) = (s.chars().next(), s.chars().last()) else {
        return false;
    };
    lower_alnum(first) && lower_alnum(last) && s.chars().all(|c| lower_alnum(c) || c == '-')
}

/// Why `s` is invalid, each message after `part`: longer than `max`, or not `valid` (`rule`).
fn check(s: &str, part: &str, max: usize, valid: fn(&str) -> bool, rule: &str) -> Option<String> {
    if s.len() > max {
        Some(format!("{part}must be no more than {max} characters"))
    } else {
        (!valid(s)).then(|| format!("{part}{rule}"))
    }
}

const DNS1123_LABEL_RULE: &str =
    "must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_RULE: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// A DNS-1123 label: namespace names.
pub fn dns1123_label(s: &str) -> Option<String> {
    check(s, "", DNS1123_LABEL_MAX, is_dns1123_label_chars, DNS1123_LABEL_RULE)
}

/// A DNS-1123 subdomain: label key prefixes.
pub(crate) fn dns1123_subdomain(s: &str) -> Option<String> {
    if s.len() > DNS1123_SUBDOMAIN_MAX {
        return Some(format!("must be no more than {DNS1123_SUBDOMAIN_MAX} characters"));
    }
    s.split('.').any(|part| !is_dns1123_label_chars(part)).then(|| {
        "prefix must be a DNS subdomain: lower case alphanumeric characters, '-' or '.', starting and ending with an alphanumeric character"
            .to_owned()
    })
}

/// A label key (qualified name): optional `prefix/` plus a name of at most 63 characters.
pub(crate) fn label_key(s: &str) -> Option<String> {
    let name = match s.split_once('/') {
        Some(("", _)) => return Some("prefix part must be non-empty".to_owned()),
        Some((prefix, name)) => {
            if let Some(reason) = dns1123_subdomain(prefix) {
                return Some(reason);
            }
            name
        }
        None => s,
    };
    if name.is_empty() {
        return Some("name part must be non-empty".to_owned());
    }
    check(
        name,
        "name part ",
        QUALIFIED_NAME_MAX,
        is_qualified_name_part,
        QUALIFIED_NAME_RULE,
    )
}

/// A label value: empty, or at most 63 characters of the qualified-name alphabet.
pub fn label_value(s: &str) -> Option<String> {
    if s.is_empty() {
        return None;
    }
    check(s, "", LABEL_VALUE_MAX, is_qualified_name_part, QUALIFIED_NAME_RULE)
}

/// A node selector written `k1=v1,k2=v2` as a label map, the way the API server's
/// `labels.ConvertSelectorToLabelsMap` reads it: empty is no label; each comma-separated part is one
/// `=` between a key and a value, both trimmed of white space and valid; a key written twice keeps
/// its last value.
pub(crate) fn selector_labels(selector: &str) -> Result<std::collections::BTreeMap<String, String>, String> {
    let mut labels = std::collections::BTreeMap::new();
    if selector.is_empty() {
        return Ok(labels);
    }
    for part in selector.split(',') {
        let Some((key, value)) = part.split_once('=').filter(|(_, value)| !value.contains('=')) else {
            return Err(format!("invalid selector: {part:?} is not key=value"));
        };
        let (key, value) = (key.trim(), value.trim());
        if let Some(reason) = label_key(key) {
            return Err(format!("{key:?} is not a valid label key: {reason}"));
        }
        if let Some(reason) = label_value(value) {
            return Err(format!("{value:?} is not a valid value of label {key}: {reason}"));
        }
        labels.insert(key.to_owned(), value.to_owned());
    }
    Ok(labels)
}

#[cfg(test)]
mod tests;
