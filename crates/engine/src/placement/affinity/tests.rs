use super::*;

fn req(key: &str, op: &str, vals: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.to_owned(),
        operator: op.to_owned(),
        values: (!vals.is_empty()).then(|| vals.iter().map(|v| (*v).to_owned()).collect()),
    }
}

fn term(reqs: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_expressions: Some(reqs),
        match_fields: None,
    }
}

#[test]
fn narrower_in_implies_wider_in() {
    assert!(requirement_implies(
        &req("p", "In", &["a"]),
        &req("p", "In", &["a", "b"])
    ));
    assert!(!requirement_implies(
        &req("p", "In", &["a", "c"]),
        &req("p", "In", &["a", "b"])
    ));
    assert!(requirement_implies(&req("p", "In", &["a"]), &req("p", "Exists", &[])));
    assert!(requirement_implies(&req("p", "In", &["a"]), &req("p", "NotIn", &["b"])));
    assert!(requirement_implies(
        &req("p", "NotIn", &["a", "b"]),
        &req("p", "NotIn", &["b"])
    ));
    assert!(requirement_implies(&req("c", "Gt", &["8"]), &req("c", "Gt", &["4"])));
    assert!(requirement_implies(
        &req("c", "In", &["5", "6"]),
        &req("c", "Gt", &["4"])
    ));
    assert!(!requirement_implies(&req("c", "Gt", &["2"]), &req("c", "Gt", &["4"])));
    assert!(!requirement_implies(&req("q", "In", &["a"]), &req("p", "In", &["a"])));
}

#[test]
fn disjoint_in_sets_and_exists_vs_does_not_exist_are_unsatisfiable() {
    assert_eq!(
        unsatisfiable(&term(vec![req("p", "In", &["a"]), req("p", "In", &["b"])])),
        Some("p".into())
    );
    assert_eq!(
        unsatisfiable(&term(vec![req("p", "In", &["a"]), req("p", "NotIn", &["a"])])),
        Some("p".into())
    );
    assert_eq!(
        unsatisfiable(&term(vec![req("p", "Exists", &[]), req("p", "DoesNotExist", &[])])),
        Some("p".into())
    );
    assert_eq!(
        unsatisfiable(&term(vec![req("c", "Gt", &["4"]), req("c", "Lt", &["5"])])),
        Some("c".into())
    );
    assert_eq!(
        unsatisfiable(&term(vec![req("c", "In", &["3"]), req("c", "Gt", &["4"])])),
        Some("c".into())
    );
    assert_eq!(
        unsatisfiable(&term(vec![req("p", "In", &["a", "b"]), req("p", "In", &["b"])])),
        None
    );
    assert_eq!(
        unsatisfiable(&term(vec![req("c", "Gt", &["4"]), req("c", "Lt", &["6"])])),
        None
    );
    assert_eq!(
        unsatisfiable(&term(vec![req("p", "NotIn", &["a"]), req("p", "DoesNotExist", &[])])),
        None
    );
    let in_ab_bc = vec![req("p", "In", &["a", "b"]), req("p", "In", &["b", "c"])];
    assert_eq!(unsatisfiable(&term(in_ab_bc.clone())), None, "b is in both");
    let mut without_b = in_ab_bc;
    without_b.push(req("p", "NotIn", &["b"]));
    assert_eq!(unsatisfiable(&term(without_b)), Some("p".into()));
    let two_keys = vec![
        req("z", "In", &["a"]),
        req("z", "In", &["b"]),
        req("a", "Exists", &[]),
        req("a", "DoesNotExist", &[]),
    ];
    assert_eq!(
        unsatisfiable(&term(two_keys)),
        Some("a".into()),
        "the first key in sorted order"
    );
}

fn empty_terms() -> Vec<NodeSelectorTerm> {
    vec![
        NodeSelectorTerm::default(),
        term(vec![]),
        NodeSelectorTerm {
            match_expressions: Some(vec![]),
            match_fields: Some(vec![]),
        },
    ]
}

#[test]
fn an_empty_term_matches_no_node_and_anded_with_anything_stays_empty() {
    let group = term(vec![req("pool", "In", &["gpu"])]);
    for empty in empty_terms() {
        assert!(is_empty(&empty) && matches_no_node(&empty), "{empty:?}");
        assert_eq!(and_terms(&empty, &group), NodeSelectorTerm::default());
        assert_eq!(and_terms(&group, &empty), NodeSelectorTerm::default());
        assert!(
            term_implies(&empty, &group),
            "no node at all is within the group's nodes"
        );
        assert!(
            !term_implies(&group, &empty),
            "the group's nodes are not within no node"
        );
    }
    assert!(!matches_no_node(&group));
    assert!(matches_no_node(&term(vec![
        req("p", "In", &["a"]),
        req("p", "In", &["b"])
    ])));
}

#[test]
fn match_fields_are_anded_beside_match_expressions() {
    let by_name = NodeSelectorTerm {
        match_expressions: None,
        match_fields: Some(vec![req("metadata.name", "In", &["node-1"])]),
    };
    let group = term(vec![req("pool", "In", &["gpu"])]);
    let merged = and_terms(&by_name, &group);
    assert_eq!(merged.match_expressions, Some(vec![req("pool", "In", &["gpu"])]));
    assert_eq!(merged.match_fields, by_name.match_fields);
    assert!(!term_implies(&by_name, &group));
    assert!(term_implies(&merged, &group));
    let other_name = NodeSelectorTerm {
        match_expressions: None,
        match_fields: Some(vec![req("metadata.name", "In", &["node-2"])]),
    };
    assert!(matches_no_node(&and_terms(&by_name, &other_name)));
}

#[test]
fn override_keeps_the_pods_other_keys_or_takes_the_group_term_alone() {
    let group = term(vec![req("pool", "In", &["gpu"])]);
    let pod = term(vec![req("pool", "In", &["ci"]), req("zone", "In", &["a"])]);
    assert_eq!(
        overridden(&pod, &group).match_expressions.unwrap(),
        vec![req("zone", "In", &["a"]), req("pool", "In", &["gpu"])]
    );
    assert_eq!(overridden(&term(vec![req("pool", "In", &["ci"])]), &group), group);
}

#[test]
fn and_adds_only_what_the_pod_term_does_not_imply() {
    let pod = term(vec![req("zone", "In", &["a"]), req("pool", "In", &["ci"])]);
    let group = term(vec![req("pool", "In", &["ci", "ci2"]), req("arch", "In", &["amd64"])]);
    let merged = and_terms(&pod, &group);
    assert_eq!(
        merged.match_expressions.unwrap(),
        vec![
            req("zone", "In", &["a"]),
            req("pool", "In", &["ci"]),
            req("arch", "In", &["amd64"])
        ]
    );
}
