use super::*;

#[test]
fn label_keys_are_checked_like_the_api_server() {
    for ok in [
        "a",
        "node-pool",
        "kubernetes.io/os",
        "pod-director/group",
        "example.com/My_Key.1",
        "A",
    ] {
        assert_eq!(label_key(ok), None, "{ok}");
    }
    for bad in [
        "",
        "/x",
        "x/",
        "-a",
        "a-",
        "Example.com/x",
        "a/b/c",
        "a b",
        &"x".repeat(64),
        "a~b",
    ] {
        assert!(label_key(bad).is_some(), "{bad:?} should be rejected");
    }
}

#[test]
fn label_values_allow_empty_and_reject_bad_characters() {
    assert_eq!(label_value(""), None);
    assert_eq!(label_value("ci"), None);
    assert_eq!(label_value("1.10"), None);
    assert!(label_value("a/b").is_some());
    assert!(label_value("-a").is_some());
    assert!(label_value(&"v".repeat(64)).is_some());
}

#[test]
fn namespace_names_are_dns_labels() {
    assert_eq!(dns1123_label("kube-system"), None);
    assert!(dns1123_label("Kube").is_some());
    assert!(dns1123_label("a.b").is_some());
    assert!(dns1123_label("").is_some());
}
