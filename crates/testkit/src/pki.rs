//! The test PKI: a CA of its own issuing serving certificates, for the in-process server tests
//! (`pod_director::testing::harness`), the child process ([`crate::child`]), the e2e harness and the benches.

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};

/// A test certificate authority.
pub struct Pki {
    ca: CertifiedIssuer<'static, KeyPair>,
}

/// A serving certificate and its key.
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
    /// The certificate, DER.
    pub der: Vec<u8>,
    /// The key, PKCS#8 DER.
    pub key_der: Vec<u8>,
}

impl Default for Pki {
    fn default() -> Self {
        Self::new()
    }
}

impl Pki {
    /// "pod-director test CA".
    pub fn new() -> Self {
        Self::named("pod-director test CA")
    }

    pub fn named(common_name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, common_name);
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("CA key")).expect("CA");
        Self { ca }
    }

    pub fn ca_pem(&self) -> String {
        self.ca.pem()
    }

    /// The CA certificate, DER.
    pub fn ca_der(&self) -> Vec<u8> {
        self.ca.der().to_vec()
    }

    /// A serving certificate for 127.0.0.1 and localhost.
    pub fn leaf(&self, common_name: &str) -> Leaf {
        self.leaf_for(common_name, &["localhost", "127.0.0.1"])
    }

    /// A serving certificate for `names` (DNS names or IP addresses).
    pub fn leaf_for(&self, common_name: &str, names: &[&str]) -> Leaf {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).expect("leaf params");
        params.distinguished_name.push(DnType::CommonName, common_name);
        let key = KeyPair::generate().expect("leaf key");
        let cert = params.signed_by(&key, &self.ca).expect("signed leaf");
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().to_vec(),
            key_der: key.serialize_der(),
        }
    }
}
