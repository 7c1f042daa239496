use super::*;

fn pair() -> (String, String) {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("rcgen");
    (cert.cert.pem(), cert.signing_key.serialize_pem())
}

fn files() -> TlsFiles {
    TlsFiles {
        cert: "tls.crt".into(),
        key: "tls.key".into(),
    }
}

#[test]
fn a_matching_pair_loads() {
    let (cert, key) = pair();
    assert!(certified_key(&files(), cert.as_bytes(), key.as_bytes()).is_ok());
}

#[test]
fn a_key_from_another_pair_is_refused() {
    let (cert, _) = pair();
    let (_, other_key) = pair();
    let err = certified_key(&files(), cert.as_bytes(), other_key.as_bytes()).expect_err("mismatch");
    assert!(matches!(err, TlsError::KeyMismatch { .. }), "{err}");
}

#[test]
fn a_half_written_certificate_is_refused() {
    let (cert, key) = pair();
    let half = &cert.as_bytes()[..cert.len() / 2];
    assert!(certified_key(&files(), half, key.as_bytes()).is_err());
    assert!(certified_key(&files(), b"", key.as_bytes()).is_err());
    assert!(certified_key(&files(), cert.as_bytes(), b"").is_err());
}
