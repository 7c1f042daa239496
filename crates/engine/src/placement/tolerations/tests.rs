use super::*;
use crate::testing::toleration;

#[test]
fn omitted_operator_is_equal() {
    let a = toleration("dedicated", "", "ci", "NoSchedule", None);
    let b = toleration("dedicated", "Equal", "ci", "NoSchedule", None);
    assert!(is_superset(&a, &b));
    assert!(is_superset(&b, &a));
}

#[test]
fn keyless_exists_tolerates_everything() {
    let all = toleration("", "Exists", "", "", None);
    assert!(is_superset(
        &all,
        &toleration("dedicated", "Equal", "ci", "NoSchedule", None)
    ));
    assert!(is_superset(&all, &toleration("x", "Exists", "", "NoExecute", Some(5))));
    assert!(!is_superset(
        &toleration("dedicated", "Equal", "ci", "NoSchedule", None),
        &all
    ));
}

#[test]
fn empty_effect_matches_every_effect_but_not_the_reverse() {
    let any = toleration("dedicated", "Equal", "ci", "", None);
    let one = toleration("dedicated", "Equal", "ci", "NoSchedule", None);
    assert!(is_superset(&any, &one));
    assert!(!is_superset(&one, &any));
}

#[test]
fn exists_on_a_key_covers_every_value_of_it() {
    let exists = toleration("dedicated", "Exists", "", "NoSchedule", None);
    assert!(is_superset(
        &exists,
        &toleration("dedicated", "Equal", "ci", "NoSchedule", None)
    ));
    assert!(!is_superset(
        &exists,
        &toleration("other", "Equal", "ci", "NoSchedule", None)
    ));
    assert!(!is_superset(
        &toleration("dedicated", "Equal", "ci", "NoSchedule", None),
        &exists
    ));
}

#[test]
fn toleration_seconds_bound_no_execute_supersets() {
    let limited = toleration("k", "Exists", "", "NoExecute", Some(60));
    assert!(is_superset(
        &limited,
        &toleration("k", "Exists", "", "NoExecute", Some(30))
    ));
    assert!(!is_superset(
        &limited,
        &toleration("k", "Exists", "", "NoExecute", Some(90))
    ));
    assert!(!is_superset(
        &limited,
        &toleration("k", "Exists", "", "NoExecute", None)
    ));
    let forever = toleration("k", "Exists", "", "NoExecute", None);
    assert!(is_superset(&forever, &limited));
}

#[test]
fn different_values_do_not_tolerate_each_other() {
    assert!(!is_superset(
        &toleration("dedicated", "Equal", "gpu", "NoSchedule", None),
        &toleration("dedicated", "Equal", "ci", "NoSchedule", None)
    ));
}

#[test]
fn same_agrees_with_comparing_the_normalized_tolerations() {
    let texts = [None, Some(""), Some("a"), Some("b")];
    let operators = [None, Some(""), Some("Equal"), Some("Exists")];
    let mut spellings = Vec::new();
    for key in texts {
        for operator in operators {
            for value in texts {
                for (effect, seconds) in [(None, None), (Some("NoExecute"), Some(30)), (Some(""), None)] {
                    spellings.push(Toleration {
                        key: key.map(str::to_owned),
                        operator: operator.map(str::to_owned),
                        value: value.map(str::to_owned),
                        effect: effect.map(str::to_owned),
                        toleration_seconds: seconds,
                    });
                }
            }
        }
    }
    for a in &spellings {
        for b in &spellings {
            assert_eq!(same(a, b), normalized(a) == normalized(b), "{a:?} vs {b:?}");
        }
    }
    // Borrowed or built, the normalized form is the one spelled out field by field.
    let keep = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
    for t in &spellings {
        let spelled = Toleration {
            key: keep(&t.key),
            operator: Some(keep(&t.operator).unwrap_or_else(|| "Equal".to_owned())),
            value: keep(&t.value),
            effect: keep(&t.effect),
            toleration_seconds: t.toleration_seconds,
        };
        let normal = normalized(t);
        assert_eq!(*normal, spelled, "{t:?}");
        assert_eq!(matches!(normal, Cow::Borrowed(_)), *t == spelled, "{t:?}");
    }
}
