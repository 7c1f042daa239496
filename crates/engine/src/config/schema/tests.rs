use super::*;
use crate::config::Group;
use crate::config::{Mode, NamespaceGuard};

#[test]
fn serde_names_come_in_declaration_order_as_written_in_the_file() {
    assert_eq!(names::<Mode>(), ["dryRun", "warn", "enforce"]);
    assert_eq!(
        names::<NamespaceGuard>(),
        ["mode", "allowedUsers", "allowedGroups", "allowedServiceAccounts"]
    );
    assert_eq!(names::<Group>()[..3], ["mode", "onConflict", "allowPodExclusion"]);
}

#[test]
fn the_schema_knows_each_setting_s_type_and_values() {
    let root = Node::root();
    assert_eq!(root.keys().first(), Some(&"namespaceLabel"));
    let group = root.child("groups").and_then(|g| g.child("any-name")).unwrap();
    assert_eq!(group.keys(), names::<Group>());
    assert_eq!(group.child("mode").unwrap().variants(), ["dryRun", "warn", "enforce"]);
    assert!(group.child("allowDaemonSets").unwrap().is("boolean"));
    let toleration = group.child("tolerations").and_then(|t| t.item()).unwrap();
    assert!(toleration.child("tolerationSeconds").unwrap().is("integer"));
    assert!(root.child("excludedNamespaces").unwrap().is_string_list());
    assert!(root.child("defaultGroup").unwrap().is_nullable());
    assert!(!root.child("defaultMode").unwrap().is_nullable());
    assert!(root.child("namespaceGuard").unwrap().is_fixed_mapping());
    assert!(!root.child("groups").unwrap().is_fixed_mapping());
}

#[test]
fn the_printed_schema_has_no_internal_keywords() {
    assert!(!schema_json().to_string().contains(KEYS));
}
