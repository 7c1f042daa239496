use super::is_json;

#[test]
fn json_content_types_are_recognised() {
    assert!(is_json("application/json"));
    assert!(is_json("application/json; charset=utf-8"));
    assert!(is_json("Application/JSON"));
    assert!(is_json("application/merge-patch+json"));
    assert!(!is_json("text/plain"));
    assert!(!is_json("application/x-www-form-urlencoded"));
}
