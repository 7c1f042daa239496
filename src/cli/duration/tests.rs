use super::*;

#[test]
fn durations_parse_with_units() {
    assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
    assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
    assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
    assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
    assert!(parse_duration("ten seconds").is_err());
    assert!(parse_duration("5 fortnights").is_err());
}

#[test]
fn a_duration_too_long_to_represent_is_refused_not_a_panic() {
    let err = parse_duration("99999999999999999999h").expect_err("overflows");
    assert!(err.starts_with("\"99999999999999999999h\": "), "{err}");
}
