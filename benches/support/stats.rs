//! The statistics the benches report, defined once.
#![allow(dead_code)]

/// The median of `values`: the middle value of an odd count, the mean of the
/// two middle values of an even count (so 2 rounds report their mean, not the
/// larger one), NaN when there are none. NaNs sort last (`f64::total_cmp`).
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}
