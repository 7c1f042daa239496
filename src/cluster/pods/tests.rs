use std::sync::Arc;

use super::*;

/// A source that answers after `delay` with `answer`.
struct Slow {
    delay: Duration,
    answer: Result<Option<Pod>, String>,
}

impl PodSource for Slow {
    fn fetch<'a>(&'a self, _: &'a str, _: &'a str) -> BoxFuture<'a, Result<Option<Pod>, String>> {
        Box::pin(async move {
            tokio::time::sleep(self.delay).await;
            self.answer.clone()
        })
    }
}

fn exposition(metrics: &PodMetrics, registry: &Registry) -> String {
    let _ = metrics;
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap_or_default();
    text
}

#[tokio::test]
async fn a_lookup_is_bounded_by_its_timeout_and_every_result_is_counted() {
    let mut registry = Registry::default();
    let metrics = PodMetrics::register(&mut registry);
    let pod = Pod::default();
    let cases: Vec<(Arc<Slow>, &str)> = vec![
        (
            Arc::new(Slow {
                delay: Duration::ZERO,
                answer: Ok(Some(pod)),
            }),
            "found",
        ),
        (
            Arc::new(Slow {
                delay: Duration::ZERO,
                answer: Ok(None),
            }),
            "not_found",
        ),
        (
            Arc::new(Slow {
                delay: Duration::ZERO,
                answer: Err("forbidden".to_owned()),
            }),
            "error",
        ),
        (
            Arc::new(Slow {
                delay: Duration::from_secs(30),
                answer: Ok(None),
            }),
            "error",
        ),
    ];
    let started = std::time::Instant::now();
    let mut errors = Vec::new();
    for (source, _) in &cases {
        let found = lookup(source.as_ref(), "a", "p", Duration::from_millis(50), &metrics).await;
        if let Err(error) = found {
            errors.push(error.to_string());
        }
    }
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].contains("forbidden"), "{errors:?}");
    assert!(errors[1].contains("within 50ms"), "{errors:?}");
    let text = exposition(&metrics, &registry);
    for (result, count) in [("found", 1), ("not_found", 1), ("error", 2)] {
        let sample = format!("binding_pod_lookups_total{{result=\"{result}\"}} {count}");
        assert!(text.contains(&sample), "{sample} in {text}");
    }
}
