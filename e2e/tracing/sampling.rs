//! The promise of `otel/collector.yaml`'s tail sampling, on real traces: every
//! trace of a decision that changes (or would change) something arrives in Jaeger,
//! and only a share of the noop and skipped ones.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::fixtures::{asking_for_pool, with_labels};
use crate::harness::jaeger::{spans, tag, tags};
use crate::harness::{notice, pod};
use crate::{KEPT, SERVICE, jaeger, otel_env, placed_pod, post_mutate, random_hex, sampled, start, undecidable_review};

/// noop and skipped traces each: 10% of 2 × 40 keeps 8 on average; none at all has a
/// probability of 0.9^80 ≈ 0.02%.
const BULK: usize = 40;

#[tokio::test]
async fn the_shipped_tail_sampling_keeps_every_decision_that_changes_something_and_a_share_of_noop_and_skipped() {
    let jaeger = jaeger().await;
    let mut env = start("sampling", otel_env()).await;
    let dry = env.namespace(Some("e2e-dryrun")).await;
    let enforce = env.namespace(Some("e2e-enforce")).await;
    let excluded = env.namespace(Some("e2e-exclusion")).await;
    let unknown = env.namespace(Some("e2e-undefined")).await;

    env.create_admitted_pod(&dry, &pod("would-patch")).await;
    env.create_admitted_pod(&dry, &asking_for_pool("would-deny", "red"))
        .await;
    env.create_admitted_pod(&enforce, &pod("patched")).await;
    let denied = env.create_pod(&enforce, &asking_for_pool("denied", "red")).await;
    assert!(!denied.status.is_success(), "{}", denied.body);
    env.create_admitted_pod(&unknown, &pod("unknown")).await;
    let error_trace = random_hex(32);
    let (status, _) = post_mutate(&mut env, &undecidable_review(), &sampled(&error_trace)).await;
    assert!(status.is_client_error(), "an undecidable review is refused: {status}");

    // Kept: each decision's trace, from its mutate log line.
    let mut kept: BTreeMap<&str, String> = BTreeMap::new();
    for (ns, name, decision) in [
        (&dry, "would-patch", "would_patch"),
        (&dry, "would-deny", "would_deny"),
        (&enforce, "patched", "patched"),
        (&enforce, "denied", "denied"),
        (&unknown, "unknown", "unknown_group"),
    ] {
        let line = env.decision(ns, name, "mutate").await;
        assert_eq!(line.decision(), decision, "{}", line.0);
        kept.insert(decision, line.text("trace_id").to_owned());
    }
    kept.insert("error", error_trace);
    assert_eq!(kept.len(), KEPT.len(), "one trace of each kept decision");

    // The rest: noop (a pod placed as its group wants) and skipped (an excluded pod), dry-run creates.
    let would_be = env.decision(&dry, "would-patch", "mutate").await;
    for i in 0..BULK {
        let noop = env
            .create_pod_dry_run(&dry, &placed_pod(&format!("noop-{i}"), would_be.patch()))
            .await;
        assert!(noop.status.is_success(), "{}", noop.body);
        let skipped = env
            .create_pod_dry_run(
                &excluded,
                &with_labels(pod(&format!("skipped-{i}")), &[("pod-director/exclude", "true")]),
            )
            .await;
        assert!(skipped.status.is_success(), "{}", skipped.body);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let lines = env.logs.decisions().await;
    let mut rest = Vec::new();
    for (ns, prefix, decision) in [(&dry, "noop", "noop"), (&excluded, "skipped", "skipped")] {
        for i in 0..BULK {
            let name = format!("{prefix}-{i}");
            let line = lines
                .iter()
                .find(|d| d.is(ns, &name, "mutate"))
                .unwrap_or_else(|| panic!("no mutate decision for {ns}/{name}; {}", env.log_hint()));
            assert_eq!(line.decision(), decision, "{}", line.0);
            rest.push((decision, line.text("trace_id").to_owned()));
        }
    }

    for decision in KEPT {
        let trace_id = &kept[decision];
        let trace = jaeger
            .wait_for_trace(trace_id, &format!("the {decision} decision's trace"), |t| {
                spans(t)
                    .iter()
                    .any(|(s, span)| s == SERVICE && tags(span).contains_key("placement.decision"))
            })
            .await;
        let span = spans(&trace)
            .into_iter()
            .find(|(s, span)| s == SERVICE && tag(&tags(span), "placement.decision") == decision)
            .unwrap_or_else(|| panic!("trace {trace_id} has no {decision} span of pod-director"));
        assert_eq!(span.1["traceID"], trace_id.as_str());
    }
    // The collector decides a trace 10 s (decision_wait) after its first span and
    // batches for up to 5 s: wait past that for the last noop/skipped trace.
    tokio::time::sleep(Duration::from_secs(18)).await;
    let mut arrived: BTreeMap<&str, usize> = BTreeMap::new();
    for (decision, trace_id) in &rest {
        if jaeger.trace(trace_id).await.is_some() {
            *arrived.entry(decision).or_default() += 1;
        }
    }
    let total: usize = arrived.values().sum();
    let kept = KEPT.len();
    notice(&format!(
        "tail sampling: all {kept} kept decisions arrived ({KEPT:?}); of {BULK} noop and {BULK} skipped traces, {arrived:?} arrived"
    ));
    assert!(
        total > 0,
        "the probabilistic policy keeps a share of noop/skipped, not none: {arrived:?}"
    );
    assert!(
        total <= BULK,
        "only a share (10%) of noop/skipped is kept, not {total} of {}",
        2 * BULK
    );
}
