//! Serving certificates for rotation: a new key and certificate signed by the
//! webhook CA of the e2e/cluster.sh state dir (the caBundle of the webhook
//! configurations), made with openssl exactly as cluster.sh makes the first one.

use std::path::Path;
use std::process::{Command, Stdio};

/// A PEM certificate and its PEM key.
pub struct Pair {
    pub cert: Vec<u8>,
    pub key: Vec<u8>,
}

/// A new serving certificate for 127.0.0.1/localhost from `webhook_dir`'s `ca.crt` + `ca.key`.
pub fn issue(webhook_dir: &Path, common_name: &str) -> Pair {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = |name: &str| dir.path().join(name);
    let (key, csr, crt, ext) = (file("tls.key"), file("tls.csr"), file("tls.crt"), file("ext.cnf"));
    std::fs::write(
        &ext,
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n\
         extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .expect("extensions file");
    let subject = format!("/CN={common_name}");
    openssl(
        &["req", "-new", "-newkey", "rsa:2048", "-nodes", "-subj", &subject],
        &[("-keyout", &key), ("-out", &csr)],
    );
    openssl(
        &["x509", "-req", "-sha256", "-days", "2", "-CAcreateserial"],
        &[
            ("-in", &csr),
            ("-CA", &webhook_dir.join("ca.crt")),
            ("-CAkey", &webhook_dir.join("ca.key")),
            ("-CAserial", &file("ca.srl")),
            ("-extfile", &ext),
            ("-out", &crt),
        ],
    );
    Pair {
        cert: std::fs::read(&crt).expect("certificate written"),
        key: std::fs::read(&key).expect("key written"),
    }
}

/// `openssl FLAGS… OPTION FILE…`.
fn openssl(flags: &[&str], files: &[(&str, &Path)]) {
    let mut command = Command::new("openssl");
    command.args(flags).stdin(Stdio::null());
    for (option, file) in files {
        command.arg(option).arg(file);
    }
    let output = command.output().expect("openssl runs");
    assert!(
        output.status.success(),
        "{command:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The DER of the first certificate in a PEM text.
pub fn first_der(pem: &[u8]) -> Vec<u8> {
    use tokio_rustls::rustls::pki_types::CertificateDer;
    use tokio_rustls::rustls::pki_types::pem::PemObject as _;
    CertificateDer::pem_slice_iter(pem)
        .next()
        .expect("a certificate in the PEM")
        .expect("a readable certificate")
        .to_vec()
}
