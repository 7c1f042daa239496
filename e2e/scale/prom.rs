//! The Prometheus text exposition, as far as the simulation reads it: samples with their
//! labels, and cumulative histograms summed over the series a filter keeps, differenced
//! between two scrapes, with Prometheus' `histogram_quantile` interpolation.

use std::collections::BTreeMap;

pub(crate) type Labels = BTreeMap<String, String>;

/// One sample line: `name{labels} value`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sample {
    pub name: String,
    pub labels: Labels,
    pub value: f64,
}

/// Every sample of `text` (comments and unparsable lines skipped).
pub(crate) fn parse(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(parse_line)
        .collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let name_end = line.find(['{', ' '])?;
    let name = line[..name_end].to_owned();
    let mut labels = Labels::new();
    let mut rest = &line[name_end..];
    if let Some(body) = rest.strip_prefix('{') {
        let mut chars = body.char_indices();
        let mut key = String::new();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '}' => break i,
                ',' | ' ' => {}
                '=' => {
                    if chars.next()?.1 != '"' {
                        return None;
                    }
                    let mut value = String::new();
                    loop {
                        match chars.next()?.1 {
                            '\\' => match chars.next()?.1 {
                                'n' => value.push('\n'),
                                other => value.push(other),
                            },
                            '"' => break,
                            other => value.push(other),
                        }
                    }
                    labels.insert(std::mem::take(&mut key), value);
                }
                other => key.push(other),
            }
        };
        rest = &body[end + 1..];
    }
    // `value` or `value timestamp`, and OpenMetrics exemplars after `#`.
    let value = rest.split('#').next()?.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Sample { name, labels, value })
}

/// The sum of the samples named `name` whose labels `keep`.
pub(crate) fn sum(samples: &[Sample], name: &str, keep: impl Fn(&Labels) -> bool) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name && keep(&s.labels))
        .map(|s| s.value)
        .sum()
}

/// The distinct values of label `label` among the samples named `name`.
pub(crate) fn label_values(samples: &[Sample], name: &str, label: &str) -> Vec<String> {
    let mut values: Vec<String> = samples
        .iter()
        .filter(|s| s.name == name)
        .filter_map(|s| s.labels.get(label).cloned())
        .collect();
    values.sort();
    values.dedup();
    values
}

/// A cumulative histogram: `(le, count ≤ le)` sorted by `le` (the last one `+Inf`), sum, count.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Histogram {
    pub buckets: Vec<(f64, f64)>,
    pub sum: f64,
    pub count: f64,
}

impl Histogram {
    /// The histogram `base` (`base_bucket`, `base_sum`, `base_count`) summed over the series `keep` keeps.
    pub(crate) fn of(samples: &[Sample], base: &str, keep: impl Fn(&Labels) -> bool) -> Self {
        let mut by_le: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
        let bucket = format!("{base}_bucket");
        for s in samples.iter().filter(|s| s.name == bucket && keep(&s.labels)) {
            let Some(le) = s.labels.get("le").and_then(|le| parse_le(le)) else {
                continue;
            };
            by_le.entry(le.to_bits()).or_insert((le, 0.0)).1 += s.value;
        }
        let mut buckets: Vec<(f64, f64)> = by_le.into_values().collect();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        Self {
            buckets,
            sum: sum(samples, &format!("{base}_sum"), &keep),
            count: sum(samples, &format!("{base}_count"), &keep),
        }
    }

    /// What was observed between `earlier` and `self` (same buckets).
    pub(crate) fn since(&self, earlier: &Histogram) -> Histogram {
        let before = |le: f64| {
            earlier
                .buckets
                .iter()
                .find(|(l, _)| l.to_bits() == le.to_bits())
                .map_or(0.0, |(_, c)| *c)
        };
        Histogram {
            buckets: self.buckets.iter().map(|&(le, c)| (le, c - before(le))).collect(),
            sum: self.sum - earlier.sum,
            count: self.count - earlier.count,
        }
    }

    /// Adds `other`'s observations (same buckets, or `self` empty).
    pub(crate) fn add(&mut self, other: &Histogram) {
        if self.buckets.is_empty() {
            *self = other.clone();
            return;
        }
        for (le, c) in &mut self.buckets {
            *c += other
                .buckets
                .iter()
                .find(|(l, _)| l.to_bits() == le.to_bits())
                .map_or(0.0, |(_, c)| *c);
        }
        self.sum += other.sum;
        self.count += other.count;
    }

    /// `_sum / _count`.
    pub(crate) fn mean(&self) -> Option<f64> {
        (self.count > 0.0).then(|| self.sum / self.count)
    }

    /// The `le` of the bucket holding quantile `q` (an upper bound of it).
    pub(crate) fn bucket_of(&self, q: f64) -> Option<f64> {
        let total = self.buckets.last()?.1;
        (total > 0.0).then_some(())?;
        self.buckets.iter().find(|(_, c)| *c >= q * total).map(|(le, _)| *le)
    }

    /// Quantile `q`, interpolated linearly inside its bucket as `histogram_quantile` does
    /// (the lowest bucket starts at 0; a quantile in the `+Inf` bucket is the highest finite `le`).
    pub(crate) fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.buckets.last()?.1;
        if total <= 0.0 {
            return None;
        }
        let rank = q * total;
        let mut lower = (0.0, 0.0);
        for &(le, c) in &self.buckets {
            if c >= rank {
                if le.is_infinite() {
                    return Some(lower.0);
                }
                let in_bucket = c - lower.1;
                let share = if in_bucket > 0.0 {
                    (rank - lower.1) / in_bucket
                } else {
                    1.0
                };
                return Some(lower.0 + (le - lower.0) * share);
            }
            lower = (le, c);
        }
        None
    }
}

fn parse_le(le: &str) -> Option<f64> {
    if le == "+Inf" {
        Some(f64::INFINITY)
    } else {
        le.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP x_seconds a histogram
# TYPE x_seconds histogram
x_seconds_bucket{name="a.pod-director.io",type="admit",le="0.005"} 10
x_seconds_bucket{name="a.pod-director.io",type="admit",le="0.025"} 90
x_seconds_bucket{name="a.pod-director.io",type="admit",le="0.1"} 100
x_seconds_bucket{name="a.pod-director.io",type="admit",le="+Inf"} 100
x_seconds_sum{name="a.pod-director.io",type="admit"} 1.5
x_seconds_count{name="a.pod-director.io",type="admit"} 100
x_seconds_bucket{name="b \"quoted\", too",type="validating",le="0.005"} 1
x_seconds_bucket{name="b \"quoted\", too",type="validating",le="0.025"} 1
x_seconds_bucket{name="b \"quoted\", too",type="validating",le="0.1"} 1
x_seconds_bucket{name="b \"quoted\", too",type="validating",le="+Inf"} 1
x_seconds_sum{name="b \"quoted\", too",type="validating"} 0.001
x_seconds_count{name="b \"quoted\", too",type="validating"} 1
plain_total 7 1700000000
exemplified_total{a="1"} 3 # {trace_id="abc"} 1.0
"#;

    #[test]
    fn samples_are_parsed_with_escaped_labels_timestamps_and_exemplars() {
        let samples = parse(TEXT);
        assert_eq!(sum(&samples, "plain_total", |_| true), 7.0);
        assert_eq!(sum(&samples, "exemplified_total", |l| l["a"] == "1"), 3.0);
        assert_eq!(
            label_values(&samples, "x_seconds_count", "name"),
            ["a.pod-director.io", "b \"quoted\", too"]
        );
    }

    #[test]
    fn a_histogram_is_summed_over_series_and_differenced_between_scrapes() {
        let samples = parse(TEXT);
        let both = Histogram::of(&samples, "x_seconds", |_| true);
        assert_eq!(both.count, 101.0);
        assert_eq!(both.buckets.last(), Some(&(f64::INFINITY, 101.0)));
        let a = Histogram::of(&samples, "x_seconds", |l| l["name"] == "a.pod-director.io");
        assert_eq!(a.mean(), Some(0.015));
        let none = a.since(&a);
        assert_eq!((none.count, none.quantile(0.5)), (0.0, None));
        let mut twice = a.clone();
        twice.add(&a);
        assert_eq!(twice.count, 200.0);
        assert_eq!(twice.quantile(0.5), a.quantile(0.5));
    }

    #[test]
    fn quantiles_interpolate_inside_their_bucket_like_histogram_quantile() {
        let a = Histogram::of(&parse(TEXT), "x_seconds", |l| l["type"] == "admit");
        // rank 50 of 100: 40 of the 80 observations between 5 and 25 ms.
        let p50 = a.quantile(0.5).expect("observed");
        assert!((p50 - 0.015).abs() < 1e-9, "{p50}");
        assert_eq!(a.bucket_of(0.5), Some(0.025));
        assert_eq!(a.bucket_of(0.99), Some(0.1));
        let p99 = a.quantile(0.99).expect("observed");
        assert!((p99 - (0.025 + 0.075 * 0.9)).abs() < 1e-9, "{p99}");
    }
}
