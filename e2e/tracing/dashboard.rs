//! Every PromQL expression of every dashboard panel, evaluated by a real
//! Prometheus after a real rollout, against a table of what each panel must show.
//!
//! [`EXPECTATIONS`] names every panel of every dashboard in `otel/grafana/dashboards/`
//! with one check per query (`refId`); a panel without an entry, an entry without a
//! panel, a query without a check, all fail. Template variables are substituted the
//! way Grafana does ([`Variables`]): `$group` (All, one group, two groups),
//! `$__range`, `$__interval`, `$__rate_interval` (max(`$__interval` + scrape interval,
//! 4 × scrape interval)). Stat, table and bar-gauge panels are read at the end of the
//! time range (instant query; Grafana shows their last value); time series over the
//! range (range query, step `$__interval`).
//!
//! The wanted values come from what the rollout did, read from pod-director's decision
//! log lines (held to the rollout's own pods in `rollout.rs`) and, for counters that
//! no decision moves (reloads, reconciles), from the difference of two `/metrics`
//! scrapes; gauges from the last scrape.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::Value;

use crate::harness::prometheus::Prometheus;

/// Series keyed by the values of a panel's grouping labels (in the order named).
pub(crate) type Series = BTreeMap<Vec<String>, f64>;

/// What the rollout did.
pub(crate) struct Observed {
    /// pod-director's decision log lines of the time range.
    pub decisions: Vec<Value>,
    /// pod-director's `/metrics` at the start and at the end of the time range.
    pub before: Vec<Sample>,
    pub after: Vec<Sample>,
}

/// One sample of an OpenMetrics exposition.
#[derive(Debug, Clone)]
pub(crate) struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Parses the samples of an exposition (exemplars and comments dropped).
pub(crate) fn parse_exposition(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let line = line.split(" # ").next().unwrap_or(line);
        let (series, value) = match line.rfind(' ') {
            Some(at) => (&line[..at], &line[at + 1..]),
            None => continue,
        };
        let Ok(value) = value.parse::<f64>() else { continue };
        let (name, labels) = match series.find('{') {
            Some(at) => (&series[..at], &series[at + 1..series.len().saturating_sub(1)]),
            None => (series, ""),
        };
        out.push(Sample {
            name: name.to_owned(),
            labels: parse_labels(labels),
            value,
        });
    }
    out
}

fn parse_labels(text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut rest = text;
    while let Some(eq) = rest.find("=\"") {
        let name = rest[..eq].trim_start_matches(',').trim().to_owned();
        let mut value = String::new();
        let mut chars = rest[eq + 2..].char_indices();
        let mut end = rest.len() - eq - 2;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, escaped)) = chars.next() {
                        value.push(if escaped == 'n' { '\n' } else { escaped });
                    }
                }
                '"' => {
                    end = i;
                    break;
                }
                c => value.push(c),
            }
        }
        labels.insert(name, value);
        rest = &rest[(eq + 2 + end + 1).min(rest.len())..];
    }
    labels
}

/// A `$group` selection, as a Grafana user makes it.
#[derive(Debug, Clone)]
pub(crate) struct Selection {
    /// `None`: All.
    pub groups: Option<Vec<String>>,
}

impl Selection {
    pub(crate) fn all() -> Self {
        Self { groups: None }
    }

    pub(crate) fn of(groups: &[&str]) -> Self {
        Self {
            groups: Some(groups.iter().map(|g| (*g).to_owned()).collect()),
        }
    }

    pub(crate) fn admits(&self, group: &str) -> bool {
        self.groups.as_ref().is_none_or(|g| g.iter().any(|x| x == group))
    }

    /// What Grafana's Prometheus datasource puts in the query for a multi-value,
    /// include-All variable: the All value as configured, else each value escaped
    /// for a regex (`prometheusSpecialRegexEscape`) and several joined as `(a|b)`.
    fn interpolated(&self, all_value: &str) -> String {
        match &self.groups {
            None => all_value.to_owned(),
            Some(groups) => {
                let escaped: Vec<String> = groups.iter().map(|g| regex_escape(g)).collect();
                if escaped.len() == 1 {
                    escaped[0].clone()
                } else {
                    format!("({})", escaped.join("|"))
                }
            }
        }
    }

    fn describe(&self) -> String {
        match &self.groups {
            None => "All".to_owned(),
            Some(g) => g.join("+"),
        }
    }
}

fn regex_escape(value: &str) -> String {
    let mut out = String::new();
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\\\\\"),
            '$' | '^' | '*' | '{' | '}' | '[' | ']' | '\'' | '+' | '?' | '.' | '(' | ')' | '|' => {
                out.push_str("\\\\");
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// The dashboard's variables for one evaluation: Grafana's built-ins for the time
/// range, and `$group`.
pub(crate) struct Variables {
    pub start: f64,
    pub end: f64,
    /// The Prometheus datasource's scrape interval (Grafana: "Scrape interval").
    pub scrape_interval: Duration,
    pub group: Selection,
}

/// Grafana's max data points (the panel width in pixels; a wide panel).
const MAX_DATA_POINTS: f64 = 1000.0;

impl Variables {
    pub(crate) fn new(start: f64, end: f64, scrape_interval: Duration, group: Selection) -> Self {
        Self {
            start,
            end,
            scrape_interval,
            group,
        }
    }

    fn range_seconds(&self) -> u64 {
        (self.end - self.start).round().max(1.0) as u64
    }

    /// `$__interval`: the range over max data points, rounded as Grafana rounds it,
    /// never below the scrape interval (the datasource's minimum).
    pub(crate) fn interval(&self) -> Duration {
        let raw = (self.end - self.start) * 1000.0 / MAX_DATA_POINTS;
        Duration::from_millis(round_interval(raw)).max(self.scrape_interval)
    }

    /// `$__rate_interval` = max(`$__interval` + scrape interval, 4 × scrape interval).
    pub(crate) fn rate_interval(&self) -> Duration {
        (self.interval() + self.scrape_interval).max(self.scrape_interval * 4)
    }

    /// The value of `name` for `dashboard`, or `None` when Grafana would not know it.
    fn value(&self, name: &str, dashboard: &Value) -> Option<String> {
        Some(match name {
            "__range" => format!("{}s", self.range_seconds()),
            "__range_s" => self.range_seconds().to_string(),
            "__range_ms" => (self.range_seconds() * 1000).to_string(),
            "__interval" => duration(self.interval()),
            "__interval_ms" => self.interval().as_millis().to_string(),
            "__rate_interval" => duration(self.rate_interval()),
            other => {
                let variable = dashboard["templating"]["list"]
                    .as_array()?
                    .iter()
                    .find(|v| v["name"] == other)?;
                match other {
                    "group" => self.group.interpolated(variable["allValue"].as_str().unwrap_or(".*")),
                    _ => return None,
                }
            }
        })
    }

    /// `expr` with every `$name`, `${name}`, `${name:format}` and `[[name]]` replaced.
    pub(crate) fn interpolate(&self, expr: &str, dashboard: &Value) -> Result<String, String> {
        let mut out = String::new();
        let mut rest = expr;
        while let Some(at) = rest.find(['$', '[']) {
            out.push_str(&rest[..at]);
            let tail = &rest[at..];
            let (name, used) = if let Some(inner) = tail.strip_prefix("${") {
                let Some(close) = inner.find('}') else {
                    return Err(format!("unclosed ${{ in {expr:?}"));
                };
                let spec = &inner[..close];
                let name = spec.split(':').next().unwrap_or(spec);
                if let Some(format) = spec.split_once(':').map(|(_, f)| f)
                    && format != "regex"
                {
                    return Err(format!(
                        "variable format {format:?} of ${{{name}}} is not modelled here"
                    ));
                }
                (name, close + 3)
            } else if let Some(inner) = tail.strip_prefix("[[") {
                match inner.find("]]") {
                    Some(close) if inner[..close].chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => {
                        (&inner[..close], close + 4)
                    }
                    _ => {
                        out.push('[');
                        rest = &tail[1..];
                        continue;
                    }
                }
            } else if let Some(inner) = tail.strip_prefix('$') {
                let len = inner
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(inner.len());
                if len == 0 {
                    // A lone `$` (a regex anchor): Grafana leaves it.
                    out.push('$');
                    rest = &tail[1..];
                    continue;
                }
                (&inner[..len], len + 1)
            } else {
                out.push('[');
                rest = &tail[1..];
                continue;
            };
            match self.value(name, dashboard) {
                Some(value) => out.push_str(&value),
                None => return Err(format!("Grafana knows no variable ${name} in this dashboard: {expr:?}")),
            }
            rest = &tail[used..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

/// Grafana's `rangeutil.roundInterval` (milliseconds), up to a day.
fn round_interval(ms: f64) -> u64 {
    const STEPS: [(f64, u64); 26] = [
        (15.0, 10),
        (35.0, 20),
        (75.0, 50),
        (150.0, 100),
        (350.0, 200),
        (750.0, 500),
        (1_500.0, 1_000),
        (3_500.0, 2_000),
        (7_500.0, 5_000),
        (12_500.0, 10_000),
        (17_500.0, 15_000),
        (25_000.0, 20_000),
        (45_000.0, 30_000),
        (90_000.0, 60_000),
        (210_000.0, 120_000),
        (450_000.0, 300_000),
        (750_000.0, 600_000),
        (1_050_000.0, 900_000),
        (1_500_000.0, 1_200_000),
        (2_700_000.0, 1_800_000),
        (5_400_000.0, 3_600_000),
        (9_000_000.0, 7_200_000),
        (16_200_000.0, 10_800_000),
        (32_400_000.0, 21_600_000),
        (86_400_000.0, 43_200_000),
        (604_800_000.0, 86_400_000),
    ];
    STEPS
        .iter()
        .find(|(below, _)| ms < *below)
        .map_or(604_800_000, |(_, v)| *v)
}

fn duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

// --- what the rollout did, as series -----------------------------------------------

/// The log field of a metric label.
fn field_of(label: &str) -> &str {
    match label {
        "group" => "placement.group",
        "mode" => "placement.mode",
        "decision" => "placement.decision",
        other => other,
    }
}

fn text<'a>(line: &'a Value, field: &str) -> &'a str {
    line[field].as_str().unwrap_or_default()
}

impl Sample {
    /// The values of the labels `by`.
    fn key(&self, by: &[&str]) -> Vec<String> {
        by.iter()
            .map(|l| self.labels.get(*l).cloned().unwrap_or_default())
            .collect()
    }
}

impl Observed {
    /// Decision lines passing `keep`, counted by the labels `by`.
    pub(crate) fn decisions(&self, by: &[&str], keep: impl Fn(&Value) -> bool) -> Series {
        let mut out = Series::new();
        for line in self.decisions.iter().filter(|l| keep(l)) {
            let key = by.iter().map(|l| text(line, field_of(l)).to_owned()).collect();
            *out.entry(key).or_default() += 1.0;
        }
        out
    }

    /// Conflicts of the decision lines passing `keep`, by `by` (`resolution`: the
    /// parenthesised end of each `placement.conflicts` entry).
    pub(crate) fn conflicts(&self, by: &[&str], keep: impl Fn(&Value) -> bool) -> Series {
        let mut out = Series::new();
        for line in self.decisions.iter().filter(|l| keep(l)) {
            let conflicts: Vec<String> = match &line["placement.conflicts"] {
                Value::Array(items) => items.iter().filter_map(|i| i.as_str().map(str::to_owned)).collect(),
                Value::String(s) => serde_json::from_str(s).unwrap_or_default(),
                _ => Vec::new(),
            };
            for conflict in conflicts {
                let resolution = conflict
                    .rsplit_once('(')
                    .map(|(_, r)| r.trim_end_matches(')').to_owned())
                    .unwrap_or_default();
                let key = by
                    .iter()
                    .map(|l| match *l {
                        "resolution" => resolution.clone(),
                        l => text(line, field_of(l)).to_owned(),
                    })
                    .collect();
                *out.entry(key).or_default() += 1.0;
            }
        }
        out
    }

    /// The increase of counter samples `name` between the two scrapes, by `by`.
    pub(crate) fn increase(&self, name: &str, by: &[&str]) -> Series {
        let sum = |samples: &[Sample]| {
            let mut out = Series::new();
            for s in samples.iter().filter(|s| s.name == name) {
                *out.entry(s.key(by)).or_default() += s.value;
            }
            out
        };
        let (before, after) = (sum(&self.before), sum(&self.after));
        after
            .into_iter()
            .map(|(k, v)| {
                let was = before.get(&k).copied().unwrap_or_default();
                (k, v - was)
            })
            .collect()
    }

    /// Gauge samples `name` at the end, by `by` (max per key, as `max by`), where `keep` holds.
    pub(crate) fn gauge(&self, name: &str, by: &[&str], keep: impl Fn(&Sample) -> bool) -> Series {
        let mut out = Series::new();
        for s in self.after.iter().filter(|s| s.name == name && keep(s)) {
            let entry = out.entry(s.key(by)).or_insert(f64::MIN);
            *entry = entry.max(s.value);
        }
        out
    }
}

fn is(line: &Value, field: &str, values: &[&str]) -> bool {
    values.contains(&text(line, field))
}

fn mutate(line: &Value) -> bool {
    is(line, "webhook", &["mutate"])
}

fn in_group(line: &Value, sel: &Selection) -> bool {
    sel.admits(text(line, "placement.group"))
}

mod expectations;

pub(crate) use self::expectations::{Check, EXPECTATIONS};
use self::expectations::{REF_IDS, ROLLOUT};

// --- the evaluation ----------------------------------------------------------------------

/// The dashboards of `otel/grafana/dashboards/`, by uid.
pub(crate) fn dashboards() -> Vec<(String, Value)> {
    let dir = crate::harness::repo().join("otel/grafana/dashboards");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|e| e == "json") {
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let dashboard: Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
            let uid = dashboard["uid"].as_str().unwrap_or_default().to_owned();
            out.push((uid, dashboard));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Every panel of a dashboard, rows and their nested panels included.
fn all_panels(dashboard: &Value) -> impl Iterator<Item = &Value> {
    fn panels(of: &Value) -> impl Iterator<Item = &Value> {
        of["panels"].as_array().into_iter().flatten()
    }
    panels(dashboard).flat_map(|panel| std::iter::once(panel).chain(panels(panel)))
}

/// Every panel of a dashboard, rows' nested panels included, rows themselves excluded.
pub(crate) fn panels(dashboard: &Value) -> Vec<&Value> {
    all_panels(dashboard).filter(|p| p["type"] != "row").collect()
}

fn is_prometheus(panel: &Value, target: &Value) -> bool {
    let datasource = if target["datasource"].is_object() {
        &target["datasource"]
    } else {
        &panel["datasource"]
    };
    datasource["type"] == "prometheus" || datasource["uid"] == "${datasource}"
}

/// The table and the dashboards agree: every panel has exactly one entry, every
/// query of it a check; returns the problems.
pub(crate) fn coverage() -> Vec<String> {
    coverage_of(&dashboards())
}

fn coverage_of(dashboards: &[(String, Value)]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for (uid, dashboard) in dashboards {
        let mut ids = BTreeSet::new();
        let mut titles = BTreeSet::new();
        for panel in all_panels(dashboard) {
            if let Some(id) = panel["id"].as_u64()
                && !ids.insert(id)
            {
                problems.push(format!(
                    "{uid}: panel id {id} is used twice (Grafana links panels by id)"
                ));
            }
        }
        for panel in panels(dashboard) {
            let title = panel["title"].as_str().unwrap_or_default();
            if !titles.insert(title) {
                problems.push(format!("{uid}: two panels are titled {title:?}"));
            }
            let Some(expectation) = EXPECTATIONS.iter().find(|e| e.dashboard == uid && e.panel == title) else {
                problems.push(format!(
                    "{uid}: panel {title:?} has no expectation in e2e/tracing/dashboard.rs EXPECTATIONS: \
                     say what it must show after the rollout"
                ));
                continue;
            };
            seen.insert((expectation.dashboard, expectation.panel));
            let targets = panel["targets"].as_array().cloned().unwrap_or_default();
            if targets.is_empty() {
                problems.push(format!("{uid}: panel {title:?} has no query"));
            }
            for target in &targets {
                let ref_id = target["refId"].as_str().unwrap_or_default();
                match expectation.check(ref_id) {
                    None => problems.push(format!("{uid}: panel {title:?} query {ref_id} has no check")),
                    Some(Check::NotPrometheus(_)) if is_prometheus(panel, target) => problems.push(format!(
                        "{uid}: panel {title:?} query {ref_id} is PromQL: it must be evaluated, not skipped"
                    )),
                    Some(check) if !matches!(check, Check::NotPrometheus(_)) && !is_prometheus(panel, target) => {
                        problems.push(format!(
                            "{uid}: panel {title:?} query {ref_id} is not a Prometheus query"
                        ))
                    }
                    Some(check) => {
                        // Stats, tables, bar gauges: instant queries (their value at the end of the
                        // range); time series: range queries.
                        let instant = target["instant"] == true;
                        let wants_instant = matches!(check, Check::Total(_) | Check::AtEnd(..));
                        let either = matches!(check, Check::Gauge(..) | Check::NotPrometheus(_));
                        if !either && instant != wants_instant {
                            problems.push(format!(
                                "{uid}: panel {title:?} query {ref_id} is {} query; its check reads {}",
                                if instant { "an instant" } else { "a range" },
                                if wants_instant {
                                    "one value at the end (instant: true)"
                                } else {
                                    "a range"
                                }
                            ));
                        }
                    }
                }
            }
            for ref_id in REF_IDS.iter().take(expectation.checks.len()) {
                if !targets.iter().any(|t| t["refId"] == *ref_id) {
                    problems.push(format!(
                        "{uid}: panel {title:?} has no query {ref_id} (stale expectation)"
                    ));
                }
            }
        }
    }
    for e in EXPECTATIONS {
        if !seen.contains(&(e.dashboard, e.panel)) {
            problems.push(format!("{}: no panel {:?} (stale expectation)", e.dashboard, e.panel));
        }
    }
    problems
}

/// The labels of a result series, by `by`.
fn key_of(series: &Value, by: &[&str]) -> Vec<String> {
    by.iter()
        .map(|l| series["metric"][*l].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn number(v: &Value) -> f64 {
    v.as_str().and_then(|s| s.parse().ok()).unwrap_or(f64::NAN)
}

fn show(series: &Series) -> String {
    let parts: Vec<String> = series.iter().map(|(k, v)| format!("{}={v}", k.join("/"))).collect();
    format!("{{{}}}", parts.join(", "))
}

/// One evaluated query, for the report.
pub(crate) struct Evaluated {
    pub panel: String,
    pub ref_id: String,
    pub selection: String,
    pub expr: String,
    pub shown: String,
}

/// Evaluates every Prometheus query of every dashboard for each `$group` selection;
/// returns what each showed and every mismatch with [`EXPECTATIONS`].
pub(crate) async fn evaluate(
    prometheus: &Prometheus,
    observed: &Observed,
    selections: &[Selection],
    start: f64,
    end: f64,
) -> (Vec<Evaluated>, Vec<String>) {
    let mut report = Vec::new();
    let mut problems = coverage();
    for (uid, dashboard) in dashboards() {
        for panel in panels(&dashboard) {
            let title = panel["title"].as_str().unwrap_or_default();
            let Some(expectation) = EXPECTATIONS.iter().find(|e| e.dashboard == uid && e.panel == title) else {
                continue;
            };
            for target in panel["targets"].as_array().into_iter().flatten() {
                let ref_id = target["refId"].as_str().unwrap_or_default();
                let Some(check) = expectation.check(ref_id) else {
                    continue;
                };
                if let Check::NotPrometheus(what) = check {
                    report.push(Evaluated {
                        panel: title.to_owned(),
                        ref_id: ref_id.to_owned(),
                        selection: "-".to_owned(),
                        expr: target["query"]
                            .as_str()
                            .or(target["expr"].as_str())
                            .unwrap_or_default()
                            .to_owned(),
                        shown: format!("not evaluated here: {what}, names checked by tests/observability_names.rs"),
                    });
                    continue;
                }
                let at = format!("{uid} / {title:?} / {ref_id}");
                let raw = target["expr"].as_str().unwrap_or_default();
                for selection in selections {
                    let vars = Variables::new(start, end, prometheus.scrape_interval, selection.clone());
                    let at = format!("{at} [group={}]", selection.describe());
                    let expr = match vars.interpolate(raw, &dashboard) {
                        Ok(expr) => expr,
                        Err(e) => {
                            problems.push(format!("{at}: {e}"));
                            continue;
                        }
                    };
                    let want = match check {
                        Check::Total(w)
                        | Check::AtEnd(_, w)
                        | Check::Active(_, w)
                        | Check::Quantiles(_, w)
                        | Check::Gauge(_, w) => w(observed, selection),
                        Check::NotPrometheus(_) => continue,
                    };
                    let shown = if target["instant"] == true {
                        let decimals = panel["fieldConfig"]["defaults"]["decimals"].as_u64();
                        if decimals.is_none() && matches!(check, Check::Total(_) | Check::AtEnd(..)) {
                            problems.push(format!(
                                "{at}: a count without fieldConfig.defaults.decimals (Grafana would show \
                                 increase()'s extrapolated fractions of pods)"
                            ));
                        }
                        let decimals = decimals.unwrap_or(0);
                        instant(prometheus, &expr, end, check, &want, &at, &mut problems, decimals).await
                    } else {
                        over_range(prometheus, &expr, &vars, check, &want, &at, &mut problems).await
                    };
                    report.push(Evaluated {
                        panel: title.to_owned(),
                        ref_id: ref_id.to_owned(),
                        selection: selection.describe(),
                        expr,
                        shown,
                    });
                }
            }
        }
    }
    (report, problems)
}

/// `v` as a panel shows it: rounded to its `decimals`.
fn rounded(v: f64, decimals: u64) -> f64 {
    let scale = 10f64.powi(i32::try_from(decimals).unwrap_or(0));
    (v * scale).round() / scale
}

#[allow(clippy::too_many_arguments)]
async fn instant(
    prometheus: &Prometheus,
    expr: &str,
    end: f64,
    check: &Check,
    want: &Series,
    at: &str,
    problems: &mut Vec<String>,
    decimals: u64,
) -> String {
    let data = match prometheus.query(expr, Some(end)).await {
        Ok(data) => data,
        Err(e) => {
            problems.push(format!("{at}: Prometheus refuses {expr:?}: {e}"));
            return format!("error: {e}");
        }
    };
    let result = data["result"].as_array().cloned().unwrap_or_default();
    let mut got = Series::new();
    for series in &result {
        let key = key_of(series, check.labels());
        if got.insert(key.clone(), number(&series["value"][1])).is_some() {
            problems.push(format!(
                "{at}: two series with the labels {key:?} (the panel would show them twice)"
            ));
        }
    }
    let shown = show(&got);
    match check {
        Check::Total(_) => {
            let wanted = want.values().sum::<f64>() + 0.0;
            match got.get(&Vec::new()) {
                // An empty result is "No data" in Grafana: wrong even when 0 is wanted.
                None => problems.push(format!("{at}: no data (wanted {wanted}) from {expr:?}")),
                Some(v) if rounded(*v, decimals) != wanted || !v.is_finite() => problems.push(format!(
                    "{at}: shows {} ({v} from Prometheus), the rollout made {wanted}: {expr:?}",
                    rounded(*v, decimals)
                )),
                Some(_) if result.len() != 1 => {
                    problems.push(format!("{at}: {} series, a stat wants one", result.len()))
                }
                Some(_) => {}
            }
        }
        Check::AtEnd(..) => {
            let wanted: Series = want
                .iter()
                .filter(|(_, v)| **v != 0.0)
                .map(|(k, v)| (k.clone(), *v))
                .collect();
            if wanted.is_empty() && got.is_empty() {
                problems.push(format!("{at}: no data at all (not even zeros) from {expr:?}"));
            }
            for (key, v) in &wanted {
                match got.get(key) {
                    Some(g) if rounded(*g, decimals) == *v => {}
                    Some(g) => problems.push(format!("{at}: {key:?} shows {g}, the rollout made {v}: {expr:?}")),
                    None => problems.push(format!("{at}: no series {key:?} (the rollout made {v}): {expr:?}")),
                }
            }
            for (key, g) in &got {
                if !wanted.contains_key(key) && rounded(*g, decimals) != 0.0 {
                    problems.push(format!(
                        "{at}: series {key:?} shows {g}, the rollout made none: {expr:?}"
                    ));
                }
            }
        }
        Check::Gauge(..) if &got != want => {
            problems.push(format!(
                "{at}: shows {shown}, pod-director exports {}: {expr:?}",
                show(want)
            ));
        }
        _ => {}
    }
    shown
}

async fn over_range(
    prometheus: &Prometheus,
    expr: &str,
    vars: &Variables,
    check: &Check,
    want: &Series,
    at: &str,
    problems: &mut Vec<String>,
) -> String {
    let step = vars.interval();
    let step_s = step.as_secs_f64();
    // Grafana aligns the range to the step.
    let (start, end) = (
        (vars.start / step_s).floor() * step_s,
        (vars.end / step_s).ceil() * step_s,
    );
    let data = match prometheus.query_range(expr, start, end, step).await {
        Ok(data) => data,
        Err(e) => {
            problems.push(format!("{at}: Prometheus refuses {expr:?}: {e}"));
            return format!("error: {e}");
        }
    };
    let result = data["result"].as_array().cloned().unwrap_or_default();
    let (by, finite) = (check.labels(), matches!(check, Check::Quantiles(..)));
    if let Check::Gauge(..) = check {
        // A gauge over time: what the panel shows last.
        let got: Series = result
            .iter()
            .filter_map(|series| {
                let last = series["values"].as_array()?.last()?;
                Some((key_of(series, by), number(&last[1])))
            })
            .collect();
        if &got != want {
            problems.push(format!(
                "{at}: ends at {}, pod-director exports {}: {expr:?}",
                show(&got),
                show(want)
            ));
        }
        return show(&got);
    }
    let mut active = BTreeSet::new();
    let mut all = BTreeSet::new();
    for series in &result {
        let key = key_of(series, by);
        all.insert(key.clone());
        let points = series["values"].as_array().cloned().unwrap_or_default();
        let hit = points.iter().any(|p| {
            let v = number(&p[1]);
            if finite {
                v.is_finite()
            } else {
                v.is_finite() && v != 0.0
            }
        });
        if hit {
            active.insert(key);
        }
    }
    let wanted: BTreeSet<Vec<String>> = want
        .iter()
        .filter(|(_, v)| **v != 0.0)
        .map(|(k, _)| k.clone())
        .collect();
    if all.is_empty() {
        problems.push(format!("{at}: no data at all (not even zeros) from {expr:?}"));
    }
    for key in wanted.difference(&active) {
        problems.push(format!(
            "{at}: {key:?} never shows (the rollout made {}): {expr:?}",
            want.get(key).copied().unwrap_or_default()
        ));
    }
    for key in active.difference(&wanted) {
        problems.push(format!(
            "{at}: {key:?} shows activity the rollout did not make: {expr:?}"
        ));
    }
    let listed: Vec<String> = active.iter().map(|k| k.join("/")).collect();
    format!("active: [{}] of {} series", listed.join(", "), all.len())
}

#[cfg(test)]
mod tests;
