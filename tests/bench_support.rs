//! The benches' shared statistics (`pod_director_testkit::stats`, crates/testkit/src/stats.rs), tested where `cargo test` runs them.

use pod_director_testkit::stats;

use stats::median;

#[test]
fn the_median_of_an_odd_count_is_its_middle_value() {
    assert_eq!(median(vec![9.0, 1.0, 5.0]), 5.0);
    assert_eq!(median(vec![7.0]), 7.0);
}

#[test]
fn the_median_of_an_even_count_is_the_mean_of_its_two_middle_values() {
    assert_eq!(median(vec![4.0, 1.0, 3.0, 10.0]), 3.5);
    assert_eq!(median(vec![2.0, 6.0]), 4.0);
}

#[test]
fn the_median_of_nothing_is_nan_and_nans_sort_last() {
    assert!(median(Vec::new()).is_nan());
    assert_eq!(median(vec![f64::NAN, 1.0, 2.0]), 2.0);
}

#[test]
fn paired_rounds_alternate_which_goes_first_and_drop_the_warm_up_round() {
    let mut calls = Vec::new();
    let samples = stats::paired_rounds(2, |i| {
        calls.push(i);
        calls.len()
    });
    assert_eq!(calls, [0, 1, 1, 0, 0, 1]);
    assert_eq!(samples, [vec![4, 5], vec![3, 6]]);
}
