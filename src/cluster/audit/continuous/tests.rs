#[test]
fn each_replica_writes_the_lease_under_a_field_manager_of_its_own() {
    let (a, b) = (super::field_manager("pod-a-1"), super::field_manager("pod-b-1"));
    assert_ne!(a, b, "one shared manager lets two replicas take the Lease at once");
    assert_eq!(a, "pod-director-audit-pod-a-1");
    let long = super::field_manager(&"é".repeat(100));
    assert!(
        long.len() <= 128,
        "the API server refuses longer field managers: {long}"
    );
}
