use super::*;
use serde_json::json;

fn vars(start: f64, end: f64, scrape_ms: u64, group: Selection) -> Variables {
    Variables::new(start, end, Duration::from_millis(scrape_ms), group)
}

fn with_group_variable() -> Value {
    json!({"templating": {"list": [{"name": "group", "allValue": ".*", "multi": true, "includeAll": true}]}})
}

#[test]
fn rate_interval_is_four_scrapes_or_the_interval_plus_one_scrape() {
    // 1 h over 1000 points: 3.6 s, rounded to 5 s; 15 s scrapes: max(5+15, 60) = 60 s.
    let v = vars(0.0, 3600.0, 15_000, Selection::all());
    assert_eq!(v.interval(), Duration::from_secs(15), "never below the scrape interval");
    assert_eq!(v.rate_interval(), Duration::from_secs(60));
    // 24 h: 86.4 s rounds to 1 m; max(60+15, 60) = 75 s.
    let v = vars(0.0, 86_400.0, 15_000, Selection::all());
    assert_eq!(v.interval(), Duration::from_secs(60));
    assert_eq!(v.rate_interval(), Duration::from_secs(75));
}

#[test]
fn grafana_variables_are_substituted_in_every_spelling() {
    let dashboard = with_group_variable();
    let v = vars(0.0, 3600.0, 15_000, Selection::of(&["ci", "web.v2"]));
    assert_eq!(
        v.interpolate(r#"sum(increase(x{group=~"$group"}[$__range])) / rate(y{g=~"${group}", h=~"${group:regex}"}[$__rate_interval]) [[group]] $__interval"#, &dashboard)
            .expect("interpolates"),
        r#"sum(increase(x{group=~"(ci|web\\.v2)"}[3600s])) / rate(y{g=~"(ci|web\\.v2)", h=~"(ci|web\\.v2)"}[60s]) (ci|web\\.v2) 15s"#
    );
    let all = vars(0.0, 60.0, 1000, Selection::all());
    assert_eq!(
        all.interpolate(r#"x{group=~"$group"}"#, &dashboard)
            .expect("interpolates"),
        r#"x{group=~".*"}"#
    );
    assert_eq!(
        all.interpolate(r#"x{a=~"b$"}[5m]"#, &dashboard)
            .expect("a lone $ stays"),
        r#"x{a=~"b$"}[5m]"#
    );
    assert!(
        all.interpolate("x[$__typo]", &dashboard).is_err(),
        "an unknown variable is an error"
    );
}

#[test]
fn a_panel_without_an_expectation_fails_the_coverage_check() {
    let mut dashboards = dashboards();
    assert!(coverage_of(&dashboards).is_empty(), "{:?}", coverage_of(&dashboards));
    let (_, rollout) = dashboards
        .iter_mut()
        .find(|(uid, _)| uid == ROLLOUT)
        .expect("the rollout dashboard");
    let panels = rollout["panels"].as_array_mut().expect("panels");
    panels.push(json!({
        "id": 999, "type": "stat", "title": "A new panel",
        "targets": [{"refId": "A", "expr": "up", "instant": true, "datasource": {"type": "prometheus", "uid": "${datasource}"}}]
    }));
    let problems = coverage_of(&dashboards);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("\"A new panel\" has no expectation")),
        "{problems:?}"
    );
}

#[test]
fn exposition_samples_are_read_with_their_labels() {
    let samples = parse_exposition(
        "# TYPE x counter\nx_total{group=\"a\",mode=\"\"} 3\nb_bucket{le=\"1.0\"} 2 # {trace_id=\"ab\"} 0.1\n",
    );
    assert_eq!(samples.len(), 2);
    assert_eq!(samples[0].name, "x_total");
    assert_eq!(samples[0].labels["group"], "a");
    assert_eq!(samples[0].labels["mode"], "");
    assert_eq!(samples[0].value, 3.0);
    assert_eq!(samples[1].labels["le"], "1.0");
    assert_eq!(samples[1].value, 2.0);
}
