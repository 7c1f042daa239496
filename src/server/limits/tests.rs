use super::*;

#[test]
fn the_cap_leaves_the_reserve_and_the_probe_port_their_descriptors() {
    assert_eq!(derived_max_connections(1024), 1024 - 64 - 32);
    assert_eq!(derived_max_connections(4192), 4096);
    assert_eq!(
        derived_max_connections(1_048_576),
        MEMORY_CEILING,
        "memory runs out first"
    );
    assert_eq!(derived_max_connections(100), FLOOR);
    assert_eq!(derived_max_connections(0), FLOOR);
}

#[test]
fn the_flag_wins_over_the_derived_cap() {
    assert_eq!(max_connections(Some(5)), 5);
    assert!(open_files_limit().is_some_and(|limit| limit > 0));
}
