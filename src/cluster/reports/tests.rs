use super::*;

fn api_error(code: u16, reason: &str) -> PassError {
    let status: kube::core::Status =
        serde_json::from_value(serde_json::json!({"code": code, "reason": reason, "message": "no"})).expect("a Status");
    PassError::api("list reports", kube::Error::Api(Box::new(status)))
}

#[test]
fn the_same_failure_at_every_scan_is_one_state_and_a_404_means_the_crd_is_gone() {
    let forbidden = || -> Result<Written, PassError> { Err(api_error(403, "Forbidden")) };
    let first = log_pass(CrdState::Writing, true, &forbidden());
    assert_eq!(first, CrdState::Failing("forbidden"));
    assert_eq!(
        state_of(&forbidden()),
        first,
        "a second scan refused alike logs nothing new"
    );
    assert_eq!(state_of(&Err(api_error(404, "NotFound"))), CrdState::Absent);
    assert_eq!(
        state_of(&Err(api_error(500, "InternalError"))),
        CrdState::Failing("api")
    );
    assert_eq!(state_of(&Ok(Written::default())), CrdState::Writing);
}

#[test]
fn a_namespace_being_deleted_is_not_an_rbac_refusal() {
    let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "code": 403, "reason": "Forbidden",
            "message": "reports.openreports.io \"pod-director\" is forbidden: unable to create new content in namespace x because it is being terminated",
            "details": {"name": "pod-director", "group": "openreports.io", "kind": "reports",
                        "causes": [{"reason": "NamespaceTerminating", "message": "namespace x is being terminated", "field": "metadata.namespace"}]}
        }))
        .expect("a Status");
    let err = PassError::api("apply report x/pod-director", kube::Error::Api(Box::new(status)));
    assert!(err.namespace_terminating());
    assert!(!err.forbidden());
    assert!(api_error(403, "Forbidden").forbidden());
    assert!(!api_error(403, "Forbidden").namespace_terminating());
}
