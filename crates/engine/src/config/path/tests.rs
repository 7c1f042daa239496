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
