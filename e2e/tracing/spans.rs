//! Decision spans through the collector into Jaeger: attributes, the shared trace
//! with the API server, and the SIGTERM flush over OTLP/HTTP.

use serde_json::{Value, json};

use crate::harness::jaeger::{spans, tag, tags};
use crate::harness::{env_var, pod};
use crate::{APISERVER_SERVICE, SERVICE, jaeger, otel_env, post_mutate, random_hex, start, variables};

/// A span's tag value as the log line holds it: JSON fields are strings on spans.
fn as_tag(value: &Value, key: &str) -> Value {
    if pod_director::telemetry::JSON_FIELDS.contains(&key) {
        Value::String(value.to_string())
    } else {
        value.clone()
    }
}

/// A pod created through the API server: pod-director's dryRun decision span
/// arrives in Jaeger through the collector (`otel/collector.yaml`) over OTLP/gRPC,
/// with the decision's attributes and the would-be patch of its log line, as a
/// child of the API server's span in one trace.
#[tokio::test]
async fn a_dry_run_decision_span_arrives_in_jaeger_through_the_collector_inside_the_api_servers_trace() {
    let jaeger = jaeger().await;
    let env = start("spans", otel_env()).await;
    let namespace = env.namespace(Some("e2e-dryrun")).await;
    env.create_admitted_pod(&namespace, &pod("traced-pod")).await;
    let decision = env.decision(&namespace, "traced-pod", "mutate").await;
    let line = &decision.0;
    assert_eq!(decision.decision(), "would_patch", "{line}");
    let trace_id = decision.text("trace_id").to_owned();
    let span_id = decision.text("span_id").to_owned();
    // The trace holds both webhooks' spans (mutate, then validate); the log line names the mutate one.
    let by_id = |t: &Value| -> Option<Value> {
        spans(t)
            .into_iter()
            .find(|(service, s)| service == SERVICE && s["spanID"] == span_id.as_str())
            .map(|(_, s)| s.clone())
    };
    let trace = jaeger
        .wait_for_trace(&trace_id, "pod-director's decision span", |t| by_id(t).is_some())
        .await;
    let span = &by_id(&trace).expect("found above");
    assert!(
        spans(&trace)
            .iter()
            .any(|(s, span)| s == SERVICE && tags(span).get("webhook").map(|(_, v)| v) == Some(&json!("validate"))),
        "the validate webhook's span is in the same trace"
    );
    crate::harness::notice(&format!(
        "pod-director decision span as Jaeger returned it:\n{}\nits log line:\n{line}",
        serde_json::to_string_pretty(span).unwrap_or_default()
    ));
    assert_eq!(span["traceID"], trace_id.as_str());
    assert_eq!(span["spanID"], span_id.as_str(), "the log line names the span");
    assert_eq!(span["operationName"], "POST /mutate");
    let span_tags = tags(span);
    for (key, expected) in [
        ("span.kind", json!("server")),
        ("webhook", json!("mutate")),
        ("placement.group", json!("e2e-dryrun")),
        ("placement.mode", json!("dryRun")),
        ("placement.decision", json!("would_patch")),
        ("admission.request.operation", json!("CREATE")),
        ("admission.request.namespace", json!(namespace)),
        ("admission.request.name", json!("traced-pod")),
        ("admission.request.dryrun", json!(false)),
    ] {
        assert_eq!(tag(&span_tags, key), &expected, "tag {key}");
    }
    for key in [
        "admission.request.uid",
        "config.revision",
        "placement.summary",
        "placement.patch.paths",
        "latency_ms",
    ] {
        assert_eq!(
            tag(&span_tags, key),
            &as_tag(&line[key], key),
            "tag {key} = log field {key}"
        );
    }
    for key in [
        "placement.patch.op_count",
        "placement.feasible_nodes",
        "placement.feasible_nodes_before",
    ] {
        assert_eq!(
            span_tags.get(key).map(|t| t.0.as_str()),
            Some("int64"),
            "{key} is a number on the span"
        );
        assert_eq!(tag(&span_tags, key), &line[key], "tag {key} = log field {key}");
    }
    let patch: Value = serde_json::from_str(tag(&span_tags, "placement.patch.json").as_str().unwrap_or_default())
        .expect("the span's patch is whole JSON (it is small)");
    assert_eq!(&patch, decision.patch(), "the span's patch is the log line's");
    assert!(
        patch
            .as_array()
            .is_some_and(|ops| ops.iter().any(|op| op["path"] == "/spec/nodeSelector")),
        "the would-be patch sets the group's nodeSelector: {patch}"
    );
    let process = &trace["processes"][span["processID"].as_str().unwrap_or_default()];
    let resource = tags(process);
    assert_eq!(
        tag(&resource, "deployment.environment"),
        "e2e-tracing",
        "OTEL_RESOURCE_ATTRIBUTES"
    );
    assert!(resource.contains_key("service.version"), "{resource:?}");

    let found = jaeger
        .search(
            SERVICE,
            &json!({"admission.request.name": "traced-pod", "admission.request.namespace": namespace}),
            20,
        )
        .await;
    assert!(
        found.iter().any(|t| t["traceID"] == trace_id.as_str()),
        "/api/traces?service={SERVICE}&tags=… does not find trace {trace_id}"
    );

    if env_var("E2E_EXPECT_APISERVER_TRACE").is_none_or(|v| v != "true") {
        crate::harness::notice(
            "NOTICE: E2E_EXPECT_APISERVER_TRACE is not true (see e2e/tracing/run): the shared-trace assertion is skipped",
        );
        return;
    }
    // One trace: the API server's spans and pod-director's, pod-director's parent being the API server's.
    let parent = span["references"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["refType"] == "CHILD_OF"))
        .and_then(|r| r["spanID"].as_str())
        .unwrap_or_else(|| panic!("pod-director's span has no parent: {span}"))
        .to_owned();
    let trace = jaeger
        .wait_for_trace(&trace_id, "the API server's spans", |t| {
            spans(t)
                .iter()
                .any(|(service, s)| service == APISERVER_SERVICE && s["spanID"] == parent.as_str())
        })
        .await;
    let apiserver_spans: Vec<String> = spans(&trace)
        .into_iter()
        .filter(|(service, _)| service == APISERVER_SERVICE)
        .map(|(_, s)| s["operationName"].as_str().unwrap_or_default().to_owned())
        .collect();
    crate::harness::notice(&format!(
        "trace {trace_id}: API server spans {apiserver_spans:?}; pod-director's POST /mutate is a child of {parent}"
    ));
    assert!(spans(&trace).iter().all(|(_, s)| s["traceID"] == trace_id.as_str()));
}

/// Over OTLP/HTTP to the collector, with an export delay far beyond the test: the
/// span of a request that joined an *unsampled* caller trace reaches Jaeger only
/// because SIGTERM flushes the exporter before pod-director exits.
#[tokio::test]
async fn sigterm_flushes_a_decision_span_of_an_unsampled_trace_over_otlp_http() {
    let jaeger = jaeger().await;
    let mut otel = otel_env();
    otel.retain(|(k, _)| !k.starts_with("OTEL_EXPORTER_OTLP") && k != "OTEL_BSP_SCHEDULE_DELAY");
    let endpoint = format!("http://{}", crate::required("E2E_COLLECTOR_OTLP_HTTP"));
    otel.extend(variables(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ("OTEL_BSP_SCHEDULE_DELAY", "600000"),
    ]));
    let mut env = start("flush", otel).await;
    let namespace = env.namespace(Some("e2e-dryrun")).await;
    let trace_id = random_hex(32);
    let parent = random_hex(16);
    let uid = format!("e2e-tracing-{}", random_hex(8));
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "flushed-", "namespace": namespace},
        "spec": {"containers": [{"name": "app", "image": "registry.example.com/app:1.0"}]}
    });
    let review = pod_director_testkit::fixtures::Review::pod("CREATE", pod)
        .uid(&uid)
        .user("e2e", &[])
        .value();
    let (status, answer) = post_mutate(&mut env, &review, &format!("00-{trace_id}-{parent}-00")).await;
    assert_eq!(status, reqwest::StatusCode::OK, "{answer}");
    assert_eq!(answer["response"]["allowed"], true);
    assert!(
        answer["response"].get("patch").is_none(),
        "dryRun does not patch: {answer}"
    );

    let status = env.pod_director().stop().expect("pod-director was running");
    assert!(status.success(), "pod-director exits cleanly on SIGTERM: {status}");
    let lines = env.decisions_with(&[("admission.request.uid", &uid)]).await;
    let line = lines
        .first()
        .unwrap_or_else(|| panic!("no decision line; {}", env.log_hint()));
    assert_eq!(line.text("trace_id"), trace_id, "the log line is in the caller's trace");

    let trace = jaeger
        .wait_for_trace(&trace_id, "the flushed decision span", |t| {
            spans(t).iter().any(|(service, _)| service == SERVICE)
        })
        .await;
    let (_, span) = spans(&trace)
        .into_iter()
        .find(|(service, _)| service == SERVICE)
        .expect("found above");
    let span_tags = tags(span);
    assert_eq!(tag(&span_tags, "admission.request.uid"), &json!(uid));
    assert_eq!(tag(&span_tags, "placement.decision"), "would_patch");
    assert_eq!(tag(&span_tags, "placement.group"), "e2e-dryrun");
    assert_eq!(
        span["references"][0]["spanID"],
        parent.as_str(),
        "the unsampled caller span is the parent"
    );
}
