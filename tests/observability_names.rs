//! The dashboards, datasources and collector config in `otel/` only name what
//! pod-director actually emits, so they cannot silently rot: every metric and
//! label in PromQL, every span attribute in TraceQL and the collector config,
//! every log field in LogQL and Grafana's derived fields, every decision /
//! mode / webhook / resolution value they filter on. The emitted names are not
//! a hand-kept list: they come from running real reviews through the
//! production subscriber layers and from rendering the real metrics registry.
//! The book's reference pages (docs/src/reference/log-fields.md, metrics.md) must document each of them too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use pod_director::app::Metrics;
use pod_director::cluster::NodeLookupResult;
use pod_director::cluster::ReconcileResult;
use pod_director::cluster::ScanResult;
use pod_director::metrics::EXEMPLAR_TRACE_LABEL;
use pod_director::server::{ConnectionTimeout, Rejection, ReloadResult};
use pod_director::telemetry::{DECISION_FIELDS, LOG_LINE_KEYS};
use pod_director::testing::telemetry;
use pod_director_engine::audit::reservation::ReservationAudit;
use pod_director_engine::audit::{Audit, AuditDecision, Counts, GroupAudit, Verdict};
use pod_director_engine::config::Mode;
use pod_director_engine::placement::{Decision, Resolution, Webhook};
use serde_json::Value;

/// Everything pod-director emits, by kind.
struct Emitted {
    span_attributes: BTreeSet<String>,
    resource_attributes: BTreeSet<String>,
    /// Decision log line keys (span fields, event fields and the line's own keys).
    log_fields: BTreeSet<String>,
    /// Raw decision log lines, for line filters.
    log_text: String,
    /// Sample name → label names (with `le` for buckets).
    samples: BTreeMap<String, BTreeSet<String>>,
    exemplar_labels: BTreeSet<String>,
    /// Label (or attribute) → every value the code can give it.
    values: BTreeMap<&'static str, BTreeSet<String>>,
}

const TIMEOUTS: [ConnectionTimeout; 4] = [
    ConnectionTimeout::Handshake,
    ConnectionTimeout::FirstByte,
    ConnectionTimeout::HeaderRead,
    ConnectionTimeout::Idle,
];

fn emitted() -> Emitted {
    let run = telemetry::review(telemetry::representative_requests());
    let span_attributes = run
        .spans
        .iter()
        .flat_map(|s| s.attributes.iter().map(|kv| kv.key.to_string()))
        .collect();
    let decisions = run.decisions();
    let log_fields = decisions
        .iter()
        .flat_map(|l| l.as_object().into_iter().flat_map(|o| o.keys().cloned()))
        .collect();
    let log_text = decisions.iter().map(|l| l.to_string()).collect::<Vec<_>>().join("\n");
    // The admission run cannot reload anything: exercise the remaining families on a second registry.
    let others = Metrics::register();
    others.reloads.config_reloaded(ReloadResult::Success);
    others.reloads.config_reloaded(ReloadResult::Error);
    others.reloads.tls_reloaded(ReloadResult::Success);
    others.reloads.tls_reloaded(ReloadResult::Error);
    others.namespaces.set_namespace_cache_size(3);
    others.pods.initialise();
    // The series exported at 0 from the configuration (a group in dryRun: its shadow's disagreements).
    others
        .admission
        .initialise(&pod_director_testkit::config("groups: {shadow: {mode: dryRun}}"));
    others.orphans.set_orphaned_groups(&[("removed".to_owned(), 2)].into());
    for result in ReconcileResult::ALL {
        others.reconciles.webhook_reconciled(result);
    }
    others
        .reconciles
        .yielded_field("enforce.validate.pd.pod-director.io", "namespaceSelector");
    others.nodes.set_node_cache_size(2);
    others.nodes.set_group_nodes(&[("shadow".to_owned(), 1)]);
    others
        .nodes
        .set_group_provisioners(&[("shadow".to_owned(), vec!["nodepool/shadow".to_owned()])]);
    for result in NodeLookupResult::ALL {
        others.nodes.node_looked_up(result);
    }
    for reason in [Rejection::Limit, Rejection::ProbeLimit] {
        others.connections.connection_rejected(reason);
    }
    for timeout in TIMEOUTS {
        others.connections.connection_timed_out(timeout);
    }
    others.admission.observe_decision(
        &pod_director_engine::placement::Outcome::new(Webhook::Validate, Decision::Noop),
        Duration::from_millis(1),
    );
    // A pod of a group that offers alternatives, which chose one.
    let mut chose = pod_director_engine::placement::Outcome::new(Webhook::Mutate, Decision::Patched);
    chose.group = Some("data".to_owned());
    chose.alternative = Some("gpu".to_owned());
    others.admission.observe_decision(&chose, Duration::from_millis(1));
    others.audit.set_audit(&audit());
    for result in ScanResult::ALL {
        others.audit.audit_scanned(result);
    }
    others.audit.set_audit_duration(Duration::from_millis(40));
    let mut samples = BTreeMap::new();
    let mut exemplar_labels = BTreeSet::new();
    for text in [&run.metrics, &others.encode()] {
        parse_exposition(text, &mut samples, &mut exemplar_labels);
    }
    let strings = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<BTreeSet<_>>();
    let mut decision: BTreeSet<String> = Decision::ALL.iter().map(|d| d.as_str().to_owned()).collect();
    decision.extend(AuditDecision::ALL.iter().map(|d| d.as_str().to_owned()));
    let mode = strings(&[Mode::DryRun.as_str(), Mode::Warn.as_str(), Mode::Enforce.as_str()]);
    let webhook = Webhook::ALL.iter().map(|w| w.as_str().to_owned()).collect();
    let resolution = strings(&[
        Resolution::Rejected.as_str(),
        Resolution::Overridden.as_str(),
        Resolution::Ignored.as_str(),
    ]);
    let mut result = strings(&[ReloadResult::Success.as_str(), ReloadResult::Error.as_str()]);
    result.extend(ReconcileResult::ALL.iter().map(|r| r.as_str().to_owned()));
    result.extend(ScanResult::ALL.iter().map(|r| r.as_str().to_owned()));
    result.extend(NodeLookupResult::ALL.iter().map(|r| r.as_str().to_owned()));
    let reason = strings(&[Rejection::Limit.as_str(), Rejection::ProbeLimit.as_str()]);
    let timeout = TIMEOUTS.iter().map(|t| t.as_str().to_owned()).collect();
    let values = BTreeMap::from([
        ("decision", decision),
        ("mode", mode),
        ("webhook", webhook),
        ("resolution", resolution),
        ("result", result),
        ("reason", reason),
        ("timeout", timeout),
    ]);
    Emitted {
        span_attributes,
        resource_attributes: run.resource.into_iter().collect(),
        log_fields,
        log_text,
        samples,
        exemplar_labels,
        values,
    }
}

/// An audit of one group, for the audit gauges.
fn audit() -> Audit {
    let mut audit = Audit::of(
        vec![GroupAudit {
            group: "shadow".to_owned(),
            mode: Mode::DryRun,
            namespaces: 1,
            pods: Counts {
                compliant: 1,
                would_patch: 2,
                would_deny: 1,
                skipped: 0,
            },
            templates: Counts::default(),
            feasible_nodes: Some(1),
            provisionable_by: Vec::new(),
            not_provisionable_by: Vec::new(),
            would_deny: Default::default(),
            would_patch: Default::default(),
            no_feasible_node: Default::default(),
            workloads: Default::default(),
            alternatives: Default::default(),
            verdict: Verdict {
                ready: false,
                blockers: vec!["a blocker".to_owned()],
                warnings: Vec::new(),
            },
        }],
        vec![ReservationAudit {
            group: "shadow".to_owned(),
            mode: Mode::DryRun,
            pool_nodes: Some(1),
            exempt: 1,
            ..ReservationAudit::default()
        }],
    );
    audit.nodes = Some(1);
    audit.elapsed = Duration::from_millis(40);
    audit
}

/// Sample names with their label names, and exemplar label names, of an OpenMetrics text.
fn parse_exposition(text: &str, samples: &mut BTreeMap<String, BTreeSet<String>>, exemplars: &mut BTreeSet<String>) {
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let (sample, exemplar) = match line.split_once(" # ") {
            Some((s, e)) => (s, Some(e)),
            None => (line, None),
        };
        let name_end = sample.find(['{', ' ']).unwrap_or(sample.len());
        let labels = samples.entry(sample[..name_end].to_owned()).or_default();
        if sample[name_end..].starts_with('{') {
            labels.extend(label_names(&sample[name_end..]));
        }
        if let Some(exemplar) = exemplar {
            exemplars.extend(label_names(exemplar));
        }
    }
}

/// The names of a `{a="x",b="y"}` label set.
fn label_names(set: &str) -> Vec<String> {
    let body = set.trim_start_matches('{');
    let body = &body[..body.find('}').unwrap_or(body.len())];
    body.split(',')
        .filter_map(|pair| pair.split_once('=').map(|(k, _)| k.trim().to_owned()))
        .filter(|k| !k.is_empty())
        .collect()
}

// --- a small tokenizer shared by PromQL, TraceQL and LogQL -------------------

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Str(String),
    Op(String),
    Punct(char),
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// Replaces Grafana variables (`${name}`, `${__span.tags["a.b"]}`, `$${…}` in
/// provisioning files) with `$var`, so their inner quotes do not split strings.
fn strip_variables(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(rest[..at].trim_end_matches('$'));
        let mut depth = 0;
        let mut end = rest.len();
        for (i, c) in rest[at + 1..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = at + 1 + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.push_str("$var");
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

fn tokenize(text: &str) -> Vec<Token> {
    let chars: Vec<char> = strip_variables(text).chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '"' || c == '`' || c == '\'' {
            let mut j = i + 1;
            let mut value = String::new();
            while j < chars.len() && chars[j] != c {
                if chars[j] == '\\' && c == '"' && j + 1 < chars.len() {
                    j += 1;
                }
                value.push(chars[j]);
                j += 1;
            }
            tokens.push(Token::Str(value));
            i = j + 1;
        } else if is_ident_start(c) || c == '$' {
            let mut j = i + 1;
            while j < chars.len() && is_ident_char(chars[j]) {
                j += 1;
            }
            tokens.push(Token::Ident(chars[i..j].iter().collect()));
            i = j;
        } else if "=!~<>".contains(c) {
            let mut j = i + 1;
            while j < chars.len() && "=!~<>".contains(chars[j]) {
                j += 1;
            }
            tokens.push(Token::Op(chars[i..j].iter().collect()));
            i = j;
        } else {
            tokens.push(Token::Punct(c));
            i += 1;
        }
    }
    tokens
}

/// The literal alternatives of a matcher value (`a|b` → a, b), skipping
/// variables and anything with regex syntax.
fn literals(value: &str) -> Vec<&str> {
    value
        .split('|')
        .map(|v| v.trim_start_matches('^').trim_end_matches('$'))
        .filter(|v| !v.is_empty() && !v.contains('$') && !v.contains(['.', '*', '+', '[', '(', '?', '\\']))
        .collect()
}

/// Problems found in one artifact.
#[derive(Default)]
struct Findings(Vec<String>);

impl Findings {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.0.push(what());
        }
    }

    fn value(&mut self, emitted: &Emitted, label: &str, value: &str, at: &str) {
        if let Some(allowed) = emitted.values.get(label) {
            for literal in literals(value) {
                self.check(allowed.contains(literal), || {
                    format!("{at}: {label} value {literal:?} is never emitted (emitted: {allowed:?})")
                });
            }
        }
    }
}

// --- PromQL --------------------------------------------------------------------

fn check_promql(expr: &str, at: &str, emitted: &Emitted, findings: &mut Findings) {
    let tokens = tokenize(expr);
    let mut labels_in_expr: BTreeSet<String> = BTreeSet::new();
    let mut grouping: Vec<String> = Vec::new();
    let mut uses_pod_director = false;
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            Token::Ident(name) if name.starts_with("pod_director") => {
                uses_pod_director = true;
                let labels = emitted.samples.get(name);
                findings.check(labels.is_some(), || {
                    format!(
                        "{at}: metric {name} is never emitted (emitted: {:?})",
                        emitted.samples.keys().collect::<Vec<_>>()
                    )
                });
                if let Some(labels) = labels {
                    labels_in_expr.extend(labels.iter().cloned());
                }
                if tokens.get(i + 1) == Some(&Token::Punct('{')) {
                    i += 2;
                    while i < tokens.len() && tokens[i] != Token::Punct('}') {
                        if let (Token::Ident(label), Some(Token::Op(_)), Some(Token::Str(value))) =
                            (&tokens[i], tokens.get(i + 1), tokens.get(i + 2))
                        {
                            findings.check(labels.is_some_and(|l| l.contains(label)), || {
                                format!("{at}: {name} has no label {label:?} (labels: {labels:?})")
                            });
                            findings.value(emitted, label, value, at);
                            i += 3;
                        } else {
                            i += 1;
                        }
                    }
                }
            }
            Token::Ident(kw) if (kw == "by" || kw == "without") && tokens.get(i + 1) == Some(&Token::Punct('(')) => {
                i += 2;
                while i < tokens.len() && tokens[i] != Token::Punct(')') {
                    if let Token::Ident(label) = &tokens[i] {
                        grouping.push(label.clone());
                    }
                    i += 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    if uses_pod_director {
        for label in grouping {
            findings.check(labels_in_expr.contains(&label), || {
                format!("{at}: grouping label {label:?} is not a label of the metrics used ({labels_in_expr:?})")
            });
        }
    }
}

// --- TraceQL --------------------------------------------------------------------

fn check_traceql(query: &str, at: &str, emitted: &Emitted, findings: &mut Findings) {
    let tokens = tokenize(query);
    let mut i = 0;
    while i < tokens.len() {
        let scope = match &tokens[i] {
            Token::Ident(s) if (s == "span" || s == "resource") && tokens.get(i + 1) == Some(&Token::Punct('.')) => {
                s.clone()
            }
            _ => {
                i += 1;
                continue;
            }
        };
        i += 2;
        // span."a.b" or span.a.b (dots between identifiers)
        let name = match tokens.get(i) {
            Some(Token::Str(quoted)) => {
                i += 1;
                quoted.clone()
            }
            Some(Token::Ident(first)) => {
                let mut name = first.clone();
                i += 1;
                while let (Some(Token::Punct('.')), Some(Token::Ident(next))) = (tokens.get(i), tokens.get(i + 1)) {
                    name.push('.');
                    name.push_str(next);
                    i += 2;
                }
                name
            }
            other => {
                findings
                    .0
                    .push(format!("{at}: cannot read the attribute after {scope}. ({other:?})"));
                continue;
            }
        };
        let known = if scope == "span" {
            &emitted.span_attributes
        } else {
            &emitted.resource_attributes
        };
        findings.check(known.contains(&name), || {
            format!("{at}: {scope} attribute {name:?} is never emitted (emitted: {known:?})")
        });
        if let (Some(Token::Op(_)), Some(Token::Str(value))) = (tokens.get(i), tokens.get(i + 1)) {
            let label = name.rsplit('.').next().unwrap_or(&name);
            findings.value(emitted, label, value, at);
        }
    }
}

// --- LogQL -----------------------------------------------------------------------

/// A log field as Loki's `json` parser names it (`placement.group` → `placement_group`).
fn sanitized(field: &str) -> String {
    field
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

fn check_logql(expr: &str, at: &str, emitted: &Emitted, findings: &mut Findings) {
    let fields: BTreeMap<String, &String> = emitted.log_fields.iter().map(|f| (sanitized(f), f)).collect();
    let Some(pipeline_at) = expr.find('|') else {
        return;
    };
    // The stream selector names the log agent's labels, not pod-director's fields.
    let tokens = tokenize(&expr[pipeline_at..]);
    let mut parsed = false;
    let mut i = 0;
    while i < tokens.len() {
        match (&tokens[i], tokens.get(i + 1), tokens.get(i + 2)) {
            (Token::Punct('|'), Some(Token::Ident(parser)), _) if parser == "json" || parser == "logfmt" => {
                parsed = true;
                i += 2;
            }
            (Token::Punct('|'), Some(Token::Op(op)), Some(Token::Str(needle))) if op == "=" => {
                // `|= "text"`: a line filter must match pod-director's decision lines.
                findings.check(emitted.log_text.contains(needle.as_str()), || {
                    format!("{at}: line filter {needle:?} matches no decision log line")
                });
                i += 3;
            }
            (Token::Ident(field), Some(Token::Op(_)), Some(Token::Str(value))) if parsed => {
                findings.check(fields.contains_key(field), || {
                    format!(
                        "{at}: log field {field:?} is never emitted (emitted, as Loki names them: {:?})",
                        fields.keys()
                    )
                });
                if let Some(original) = fields.get(field) {
                    let label = original.rsplit('.').next().unwrap_or(original);
                    findings.value(emitted, label, value, at);
                }
                i += 3;
            }
            (Token::Ident(kw), Some(Token::Str(template)), _) if kw == "line_format" || kw == "label_format" => {
                for reference in template.split("{{").skip(1) {
                    let field: String = reference
                        .trim_start()
                        .trim_start_matches('.')
                        .chars()
                        .take_while(|&c| is_ident_char(c))
                        .collect();
                    findings.check(fields.contains_key(&field), || {
                        format!("{at}: {kw} names log field {field:?}, which is never emitted")
                    });
                }
                i += 2;
            }
            _ => i += 1,
        }
    }
}

// --- the artifacts --------------------------------------------------------------

fn otel_dir() -> PathBuf {
    pod_director_testkit::repo().join("otel")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn yaml(path: &Path) -> Value {
    serde_saphyr::from_str(&read(path)).unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()))
}

fn dashboards() -> Vec<(String, Value)> {
    let dir = otel_dir().join("grafana/dashboards");
    let mut found: Vec<(String, Value)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let value = serde_json::from_str(&read(&p)).unwrap_or_else(|e| panic!("{} is not JSON: {e}", p.display()));
            (p.file_name().unwrap_or_default().to_string_lossy().into_owned(), value)
        })
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(!found.is_empty(), "no dashboards in {}", dir.display());
    found
}

/// Every panel, rows' nested panels included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        out.push(panel);
        out.extend(panel["panels"].as_array().into_iter().flatten());
    }
    out
}

/// The datasource type a panel or target queries (`${var}` uids resolved through the templating).
fn datasource_type(target: &Value, panel: &Value, variables: &BTreeMap<String, String>) -> String {
    let ds = if target["datasource"].is_object() {
        &target["datasource"]
    } else {
        &panel["datasource"]
    };
    if let Some(kind) = ds["type"].as_str() {
        return kind.to_owned();
    }
    let uid = ds["uid"].as_str().unwrap_or_default();
    variables
        .get(uid.trim_start_matches("${").trim_end_matches('}'))
        .cloned()
        .unwrap_or_default()
}

#[test]
fn dashboards_query_only_what_pod_director_emits() {
    let emitted = emitted();
    let mut findings = Findings::default();
    for (file, dashboard) in dashboards() {
        let variables: BTreeMap<String, String> = dashboard["templating"]["list"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|v| v["type"] == "datasource")
            .filter_map(|v| Some((v["name"].as_str()?.to_owned(), v["query"].as_str()?.to_owned())))
            .collect();
        for variable in dashboard["templating"]["list"].as_array().into_iter().flatten() {
            let name = variable["name"].as_str().unwrap_or_default();
            let at = format!("{file} variable {name}");
            match variable["type"].as_str() {
                Some("query") => {
                    let query = variable["query"]["query"]
                        .as_str()
                        .or(variable["query"].as_str())
                        .unwrap_or_default();
                    check_promql(query, &at, &emitted, &mut findings);
                    if let Some(args) = query
                        .strip_prefix("label_values(")
                        .and_then(|rest| rest.rsplit_once(','))
                    {
                        let label = args.1.trim().trim_end_matches(')').trim();
                        check_promql(&format!("sum by ({label}) ({})", args.0), &at, &emitted, &mut findings);
                    }
                }
                Some("custom") => {
                    for value in variable["query"].as_str().unwrap_or_default().split(',') {
                        findings.value(&emitted, name, value.trim(), &at);
                    }
                }
                _ => {}
            }
        }
        let mut queried = 0;
        for panel in panels(&dashboard) {
            let title = panel["title"].as_str().unwrap_or_default();
            for target in panel["targets"].as_array().into_iter().flatten() {
                let at = format!("{file} panel {title:?} target {}", target["refId"]);
                let kind = datasource_type(target, panel, &variables);
                let text = |key: &str| target[key].as_str().unwrap_or_default();
                match kind.as_str() {
                    "prometheus" => check_promql(text("expr"), &at, &emitted, &mut findings),
                    "tempo" => check_traceql(text("query"), &at, &emitted, &mut findings),
                    "loki" => check_logql(text("expr"), &at, &emitted, &mut findings),
                    other => findings.0.push(format!("{at}: unexpected datasource type {other:?}")),
                }
                queried += 1;
            }
        }
        assert!(queried > 0, "{file} has no queries");
    }
    assert!(
        findings.0.is_empty(),
        "dashboards name what is not emitted:\n{}",
        findings.0.join("\n")
    );
}

#[test]
fn the_dashboards_answer_the_rollout_questions() {
    // The admin's questions, each by the metric or attribute that answers it.
    let all: String = dashboards().iter().map(|(_, d)| d.to_string()).collect();
    for needed in [
        r#"decision=\"would_patch\""#,
        r#"decision=\"would_deny\""#,
        "skipped",
        "pod_director_conflicts_total",
        "histogram_quantile(0.5,",
        "histogram_quantile(0.99,",
        r#"pod_director_config_reloads_total{result=\"error\"}"#,
        r#"pod_director_tls_reloads_total{result=\"error\"}"#,
        "pod_director_namespace_cache_size",
        "pod_director_orphaned_group_namespaces",
        r#"pod_director_webhook_reconciles_total{result=\"error\"}"#,
        "pod_director_node_cache_size",
        "pod_director_group_nodes{",
        "pod_director_group_provisioners{",
        "pod_director_group_ready{",
        "pod_director_group_blockers{",
        "pod_director_audit_pods{",
        "pod_director_no_feasible_node_total{",
        r#"span.\"placement.no_feasible_node\" = true"#,
        r#"span.\"placement.decision\" = \"would_patch\""#,
        r#"span.\"placement.patch.json\""#,
    ] {
        assert!(all.contains(needed), "no dashboard uses {needed}");
    }
}

#[test]
fn datasources_link_by_names_pod_director_emits() {
    let emitted = emitted();
    let path = otel_dir().join("grafana/datasources.yaml");
    let file = yaml(&path);
    let datasources = file["datasources"].as_array().cloned().unwrap_or_default();
    let uids: BTreeSet<&str> = datasources.iter().filter_map(|d| d["uid"].as_str()).collect();
    let mut findings = Findings::default();
    for ds in &datasources {
        let at = format!("datasource {}", ds["name"]);
        let json = &ds["jsonData"];
        for link in json
            .as_object()
            .into_iter()
            .flat_map(|o| o.values())
            .flat_map(|v| std::iter::once(v).chain(v.as_array().into_iter().flatten()))
        {
            if let Some(uid) = link["datasourceUid"].as_str() {
                findings.check(uids.contains(uid), || {
                    format!("{at}: links to unknown datasource uid {uid:?}")
                });
            }
        }
        for destination in json["exemplarTraceIdDestinations"].as_array().into_iter().flatten() {
            let name = destination["name"].as_str().unwrap_or_default();
            findings.check(
                name == EXEMPLAR_TRACE_LABEL && emitted.exemplar_labels.contains(name),
                || {
                    format!(
                        "{at}: exemplar label {name:?} is not emitted (emitted: {:?})",
                        emitted.exemplar_labels
                    )
                },
            );
        }
        for field in json["derivedFields"].as_array().into_iter().flatten() {
            let regex = field["matcherRegex"].as_str().unwrap_or_default();
            // JSON keys: quoted strings followed by a colon.
            let parts: Vec<&str> = regex.split('"').collect();
            let keys: Vec<&str> = (1..parts.len().saturating_sub(1))
                .step_by(2)
                .filter(|&i| parts[i + 1].starts_with(':'))
                .map(|i| parts[i])
                .collect();
            findings.check(!keys.is_empty(), || {
                format!("{at}: derived field regex {regex:?} names no JSON key")
            });
            for key in keys {
                findings.check(emitted.log_fields.contains(key), || {
                    format!("{at}: derived field matches log field {key:?}, which is never emitted")
                });
            }
        }
        if let Some(query) = json["tracesToLogsV2"]["query"].as_str() {
            check_logql(query, &format!("{at} tracesToLogsV2"), &emitted, &mut findings);
        }
        for query in json["tracesToMetrics"]["queries"].as_array().into_iter().flatten() {
            let expr = query["query"].as_str().unwrap_or_default();
            let at = format!("{at} tracesToMetrics");
            check_promql(expr, &at, &emitted, &mut findings);
            for tag in expr.split("__span.tags[\"").skip(1) {
                let tag = tag.split('"').next().unwrap_or_default();
                findings.check(emitted.span_attributes.contains(tag), || {
                    format!("{at}: span tag {tag:?} is never emitted")
                });
            }
        }
    }
    for kind in ["prometheus", "tempo", "loki"] {
        findings.check(datasources.iter().any(|d| d["type"] == kind), || {
            format!("no {kind} datasource")
        });
    }
    assert!(findings.0.is_empty(), "{}:\n{}", path.display(), findings.0.join("\n"));
}

#[test]
fn the_collector_config_names_only_emitted_attributes_and_values() {
    let emitted = emitted();
    let path = otel_dir().join("collector.yaml");
    let config = yaml(&path);
    let mut findings = Findings::default();
    // Pipelines only use defined components.
    for (name, pipeline) in config["service"]["pipelines"].as_object().into_iter().flatten() {
        for (section, kind) in [
            ("receivers", "receivers"),
            ("processors", "processors"),
            ("exporters", "exporters"),
        ] {
            for component in pipeline[section].as_array().into_iter().flatten() {
                let component = component.as_str().unwrap_or_default();
                findings.check(config[kind].get(component).is_some(), || {
                    format!("pipeline {name}: {kind} {component:?} is not defined")
                });
            }
        }
    }
    for (name, processor) in config["processors"].as_object().into_iter().flatten() {
        // Policies, and the sub-policies of `and` and `composite` policies.
        let mut policies: Vec<&Value> = processor["policies"].as_array().into_iter().flatten().collect();
        let mut i = 0;
        while i < policies.len() {
            let policy = policies[i];
            policies.extend(policy["and"]["and_sub_policy"].as_array().into_iter().flatten());
            policies.extend(
                policy["composite"]["composite_sub_policy"]
                    .as_array()
                    .into_iter()
                    .flatten(),
            );
            i += 1;
        }
        for policy in policies {
            let at = format!("processor {name} policy {}", policy["name"]);
            for kind in ["string_attribute", "numeric_attribute", "boolean_attribute"] {
                if let Some(key) = policy[kind]["key"].as_str() {
                    findings.check(emitted.span_attributes.contains(key), || {
                        format!("{at}: attribute {key:?} is never emitted")
                    });
                    let label = key.rsplit('.').next().unwrap_or(key);
                    for value in policy[kind]["values"].as_array().into_iter().flatten() {
                        findings.value(&emitted, label, value.as_str().unwrap_or_default(), &at);
                    }
                }
            }
        }
        for dimension in processor["dimensions"].as_array().into_iter().flatten() {
            let key = dimension["name"].as_str().unwrap_or_default();
            findings.check(emitted.span_attributes.contains(key), || {
                format!("processor {name}: dimension {key:?} is never emitted")
            });
        }
    }
    // OTTL anywhere: attributes["name"].
    let text = read(&path);
    for reference in text.split("attributes[\"").skip(1) {
        let key = reference.split('"').next().unwrap_or_default();
        findings.check(emitted.span_attributes.contains(key), || {
            format!("OTTL attribute {key:?} is never emitted")
        });
    }
    assert!(findings.0.is_empty(), "{}:\n{}", path.display(), findings.0.join("\n"));
}

/// The reference pages of the book that must document every emitted name.
const LOG_FIELDS_PAGE: &str = "docs/src/reference/log-fields.md";
const METRICS_PAGE: &str = "docs/src/reference/metrics.md";

#[test]
fn the_docs_document_every_field_attribute_and_metric() {
    let emitted = emitted();
    let page = |path: &str| read(&pod_director_testkit::repo().join(path));
    let (log_fields, metrics) = (page(LOG_FIELDS_PAGE), page(METRICS_PAGE));
    // A log field or decision value is documented where its page names it in backticks (grouped
    // rows such as `trace_id`, `span_id`; the values in the `placement.decision` row); a metric
    // family where a row of the metrics table starts with it.
    let documented = |page: &str, name: &str| page.contains(&format!("`{name}`"));
    let mut missing = Vec::new();
    for field in DECISION_FIELDS.iter().chain(LOG_LINE_KEYS) {
        if !documented(&log_fields, field) {
            missing.push(format!("{LOG_FIELDS_PAGE}: {field}"));
        }
    }
    for decision in Decision::ALL {
        if !documented(&log_fields, decision.as_str()) {
            missing.push(format!("{LOG_FIELDS_PAGE}: {}", decision.as_str()));
        }
    }
    // Each webhook's name in the `webhook` row itself (a value named elsewhere on the page is not enough).
    let webhook_row = log_fields
        .lines()
        .find(|l| l.starts_with("| `webhook` |"))
        .unwrap_or_default();
    for webhook in Webhook::ALL {
        if !documented(webhook_row, webhook.as_str()) {
            missing.push(format!("{LOG_FIELDS_PAGE}: webhook value {}", webhook.as_str()));
        }
    }
    let rows: Vec<&str> = metrics
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|line| line.split('`').next())
        .collect();
    for name in emitted.samples.keys() {
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix))
            .unwrap_or(name);
        if !rows.contains(&family) {
            missing.push(format!("{METRICS_PAGE}: {family}"));
        }
    }
    missing.dedup();
    assert!(missing.is_empty(), "the reference pages do not document: {missing:?}");
    // And the other way: every pod-director family the page lists is exposed.
    let families: Vec<&str> = emitted
        .samples
        .keys()
        .map(|name| {
            ["_bucket", "_sum", "_count", "_total", "_info"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix))
                .unwrap_or(name)
        })
        .collect();
    let stale: Vec<&&str> = rows
        .iter()
        .filter(|row| row.starts_with("pod_director_"))
        .filter(|row| {
            let base = ["_total", "_info"]
                .iter()
                .find_map(|s| row.strip_suffix(s))
                .unwrap_or(row);
            !families.contains(&base)
        })
        .collect();
    assert!(
        stale.is_empty(),
        "{METRICS_PAGE} lists families /metrics does not expose: {stale:?}"
    );
}

#[test]
fn the_tokenizer_reads_the_query_shapes_the_checks_rely_on() {
    let emitted = emitted();
    let mut findings = Findings::default();
    let promql = r#"sum by (group, color) (rate(pod_director_decisions_total{decision="would_patch|maybe"}[5m]))"#;
    let traceql =
        r#"{ span."placement.decision" = "would_pach" && span.placement.grup = "x" } | select(span."placement.group")"#;
    let logql = r#"{app="x"} |= "admission decison" | json | placement_decision="would_patch" | placement_gruop="x" | line_format "{{.placement_group}} {{.nope}}""#;
    check_promql(promql, "p", &emitted, &mut findings);
    check_promql("rate(pod_director_decisions[5m])", "p", &emitted, &mut findings);
    check_traceql(traceql, "t", &emitted, &mut findings);
    check_logql(logql, "l", &emitted, &mut findings);
    let found = findings.0.join("\n");
    for expected in [
        r#"grouping label "color""#,
        r#"decision value "maybe""#,
        "metric pod_director_decisions is never emitted",
        r#"decision value "would_pach""#,
        r#"span attribute "placement.grup""#,
        r#"line filter "admission decison""#,
        r#"log field "placement_gruop""#,
        r#"log field "nope""#,
    ] {
        assert!(
            found.contains(expected),
            "expected a finding with {expected:?} in:\n{found}"
        );
    }
    assert_eq!(findings.0.len(), 8, "{found}");
}
