//! The statistics the benches report, defined once: the median, the process's
//! on-CPU time and paired rounds.

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

/// On-CPU time of every thread of this process, in nanoseconds (from
/// `/proc/self/task/*/schedstat`, which excludes time spent waiting for a CPU).
pub fn process_cpu_ns() -> u64 {
    std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// The samples of `rounds` paired rounds of `measure(0)` and `measure(1)`, the
/// two taking turns going first (a noisy machine slows both alike); a first
/// round warms up and is dropped.
pub fn paired_rounds<T>(rounds: usize, mut measure: impl FnMut(usize) -> T) -> [Vec<T>; 2] {
    let mut samples = [Vec::new(), Vec::new()];
    for round in 0..=rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let sample = measure(i);
            if round > 0 {
                samples[i].push(sample);
            }
        }
    }
    samples
}
