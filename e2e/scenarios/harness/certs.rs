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
    let (key, csr, crt, ext) = (
        dir.path().join("tls.key"),
        dir.path().join("tls.csr"),
        dir.path().join("tls.crt"),
        dir.path().join("ext.cnf"),
    );
    std::fs::write(
        &ext,
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n\
         extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .expect("extensions file");
    openssl(&[
        "req",
        "-new",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        path(&key),
        "-out",
        path(&csr),
        "-subj",
        &format!("/CN={common_name}"),
    ]);
    openssl(&[
        "x509",
        "-req",
        "-sha256",
        "-days",
        "2",
        "-in",
        path(&csr),
        "-CA",
        path(&webhook_dir.join("ca.crt")),
        "-CAkey",
        path(&webhook_dir.join("ca.key")),
        "-CAcreateserial",
        "-CAserial",
        path(&dir.path().join("ca.srl")),
        "-extfile",
        path(&ext),
        "-out",
        path(&crt),
    ]);
    Pair {
        cert: std::fs::read(&crt).expect("certificate written"),
        key: std::fs::read(&key).expect("key written"),
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

fn openssl(args: &[&str]) {
    let output = Command::new("openssl")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("openssl runs");
    assert!(
        output.status.success(),
        "openssl {} failed:\n{}",
        args.join(" "),
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
