//! TLS: a certificate authority made at start and a serving certificate it signs for
//! the loopback names (and any host the server was told to accept).
//!
//! With a data directory the CA is kept there (`ca.crt`, `ca.key`, 0600), so a
//! restarted server is still trusted by the kubeconfigs and running clients that knew
//! it, as a real cluster's CA outlives its API server processes. The serving
//! certificate is made anew at every start. Everything is ECDSA P-256 on ring, the
//! crypto provider kube's client uses.

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use chrono::Datelike;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::private_fs;

/// The CA certificate's file in a data directory.
pub const CA_CERT_FILE: &str = "ca.crt";
/// The CA private key's file in a data directory.
pub const CA_KEY_FILE: &str = "ca.key";

const CA_COMMON_NAME: &str = "socialweb embedded apiserver CA";
const SERVER_COMMON_NAME: &str = "socialweb embedded apiserver";

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A certificate or key could not be made or read.
    #[error("cannot {what}")]
    Certificate {
        /// What failed.
        what: &'static str,
        /// The cause.
        #[source]
        source: rcgen::Error,
    },
    /// The CA files could not be read or written.
    #[error("cannot {what} {path}")]
    File {
        /// What failed.
        what: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// rustls refused the serving certificate.
    #[error("cannot configure TLS")]
    Rustls(#[source] rustls::Error),
    /// A host name the certificate should name is not a valid DNS name.
    #[error("{0:?} is neither an IP address nor a DNS name")]
    BadHost(String),
}

/// The crypto provider, its cipher suites in the order kube-apiserver's Go TLS stack
/// picks them: AES-128-GCM first, by the server's preference rather than the client's
/// (Go's crypto/tls since 1.17; kube's client offers AES-256-GCM first). Every watch
/// event is encrypted once per watcher and decrypted once per client, and AES-128 takes
/// 10 rounds a block where AES-256 takes 14.
fn go_like_provider() -> Arc<rustls::crypto::CryptoProvider> {
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites.sort_by_key(|suite| {
        !matches!(
            suite.suite(),
            rustls::CipherSuite::TLS13_AES_128_GCM_SHA256
                | rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
                | rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
        )
    });
    Arc::new(provider)
}

/// The server's TLS identity: the CA clients trust and the rustls configuration.
#[derive(Clone)]
pub struct TlsIdentity {
    ca_pem: String,
    ca_der: CertificateDer<'static>,
    server_config: Arc<rustls::ServerConfig>,
}

impl std::fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key is inside the rustls config; never print it.
        f.debug_struct("TlsIdentity").finish_non_exhaustive()
    }
}

impl TlsIdentity {
    /// Makes (or, with `ca_dir`, loads or makes and keeps) the CA, and a serving
    /// certificate for localhost, 127.0.0.1, ::1 and `extra_hosts`.
    ///
    /// # Errors
    /// See [`TlsError`].
    pub fn new(extra_hosts: &[String], ca_dir: Option<&Path>) -> Result<Self, TlsError> {
        let (ca_pem, ca_key) = match ca_dir {
            Some(dir) => load_or_create_ca(dir)?,
            None => create_ca()?,
        };
        let ca_der = pem_to_der(&ca_pem)?;
        let issuer = Issuer::new(ca_params(), ca_key);
        let server_key = KeyPair::generate().map_err(|source| TlsError::Certificate {
            what: "generate the serving key",
            source,
        })?;
        let server_cert = server_params(extra_hosts)?
            .signed_by(&server_key, &issuer)
            .map_err(|source| TlsError::Certificate {
                what: "sign the serving certificate",
                source,
            })?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
        let mut server_config = rustls::ServerConfig::builder_with_provider(go_like_provider())
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Rustls)?
            .with_no_client_auth()
            .with_single_cert(vec![server_cert.der().clone()], key)
            .map_err(TlsError::Rustls)?;
        // As kube-apiserver: HTTP/2 for clients that offer it (Go), HTTP/1.1 for the rest.
        server_config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        server_config.ignore_client_order = true;
        Ok(Self {
            ca_pem,
            ca_der,
            server_config: Arc::new(server_config),
        })
    }

    /// The CA certificate, PEM (what a kubeconfig's `certificate-authority-data` holds, base64).
    #[must_use]
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The CA certificate, DER (what `kube::Config::root_cert` takes).
    #[must_use]
    pub fn ca_der(&self) -> &CertificateDer<'static> {
        &self.ca_der
    }

    /// The rustls server configuration.
    #[must_use]
    pub fn server_config(&self) -> Arc<rustls::ServerConfig> {
        Arc::clone(&self.server_config)
    }

    /// A rustls client configuration that trusts this CA (HTTP/1.1 only), for raw
    /// connections in tests.
    ///
    /// # Errors
    /// When rustls refuses the CA.
    pub fn client_config(&self) -> Result<rustls::ClientConfig, TlsError> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca_der.clone()).map_err(TlsError::Rustls)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Rustls)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}

/// The CA's parameters. A kept CA is reloaded as its key plus these same parameters:
/// the serving certificate names the issuer by this subject and the key's identifier,
/// which both stay the same.
fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = distinguished_name(CA_COMMON_NAME);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    set_validity(&mut params, 10 * 365);
    params.serial_number = Some(random_serial());
    params
}

fn server_params(extra_hosts: &[String]) -> Result<CertificateParams, TlsError> {
    let mut params = CertificateParams::default();
    params.distinguished_name = distinguished_name(SERVER_COMMON_NAME);
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    set_validity(&mut params, 365);
    params.serial_number = Some(random_serial());
    let mut names = vec![
        SanType::DnsName(dns_name("localhost")?),
        SanType::IpAddress(IpAddr::from([127, 0, 0, 1])),
        SanType::IpAddress(IpAddr::from(std::net::Ipv6Addr::LOCALHOST)),
    ];
    for host in extra_hosts {
        let name = match host.trim_matches(['[', ']']).parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName(dns_name(host)?),
        };
        if !names.contains(&name) {
            names.push(name);
        }
    }
    params.subject_alt_names = names;
    Ok(params)
}

fn dns_name(host: &str) -> Result<rcgen::string::Ia5String, TlsError> {
    host.to_string()
        .try_into()
        .map_err(|_| TlsError::BadHost(host.to_string()))
}

fn distinguished_name(common_name: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    name
}

fn random_serial() -> SerialNumber {
    let mut bytes: [u8; 16] = rand::random();
    // A positive DER integer.
    bytes[0] &= 0x7f;
    SerialNumber::from_slice(&bytes)
}

/// Valid from yesterday (clocks of one machine may still disagree a little) for `days`.
fn set_validity(params: &mut CertificateParams, days: i64) {
    let date = |offset: i64| {
        let day = chrono::Utc::now().date_naive() + chrono::Duration::days(offset);
        rcgen::date_time_ymd(
            day.year(),
            u8::try_from(day.month()).unwrap_or(1),
            u8::try_from(day.day()).unwrap_or(1),
        )
    };
    params.not_before = date(-1);
    params.not_after = date(days);
}

fn create_ca() -> Result<(String, KeyPair), TlsError> {
    let key = KeyPair::generate().map_err(|source| TlsError::Certificate {
        what: "generate the CA key",
        source,
    })?;
    let cert = ca_params()
        .self_signed(&key)
        .map_err(|source| TlsError::Certificate {
            what: "sign the CA certificate",
            source,
        })?;
    Ok((cert.pem(), key))
}

fn load_or_create_ca(dir: &Path) -> Result<(String, KeyPair), TlsError> {
    let cert_path = dir.join(CA_CERT_FILE);
    let key_path = dir.join(CA_KEY_FILE);
    let file_error = |what, path: &Path| {
        let path = path.to_path_buf();
        move |source| TlsError::File { what, path, source }
    };
    if cert_path.exists() && key_path.exists() {
        let pem = std::fs::read_to_string(&cert_path)
            .map_err(file_error("read the CA certificate", &cert_path))?;
        let key_pem =
            std::fs::read_to_string(&key_path).map_err(file_error("read the CA key", &key_path))?;
        let key = KeyPair::from_pem(&key_pem).map_err(|source| TlsError::Certificate {
            what: "parse the kept CA key",
            source,
        })?;
        return Ok((pem, key));
    }
    let (pem, key) = create_ca()?;
    private_fs::create_dir(dir).map_err(file_error("create the directory", dir))?;
    // The key first: a certificate without its key would be replaced at the next start.
    private_fs::write(&key_path, key.serialize_pem().as_bytes())
        .map_err(file_error("write the CA key", &key_path))?;
    private_fs::write(&cert_path, pem.as_bytes())
        .map_err(file_error("write the CA certificate", &cert_path))?;
    Ok((pem, key))
}

fn pem_to_der(pem: &str) -> Result<CertificateDer<'static>, TlsError> {
    use base64::Engine;
    let body: String = pem
        .lines()
        .filter(|line| !line.starts_with("-----"))
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(body.trim())
        .map(CertificateDer::from)
        .map_err(|_| TlsError::Certificate {
            what: "read the CA certificate (not PEM)",
            source: rcgen::Error::CouldNotParseCertificate,
        })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Whether a client trusting `client`'s CA completes a handshake with `server` for `name`.
    async fn handshake(client: &TlsIdentity, server: &TlsIdentity, name: &str) -> bool {
        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        let acceptor = tokio_rustls::TlsAcceptor::from(server.server_config());
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client.client_config().unwrap()));
        let name = rustls::pki_types::ServerName::try_from(name.to_string()).unwrap();
        let serve = async move {
            let mut stream = acceptor.accept(server_io).await.ok()?;
            stream.write_all(b"ok").await.ok()?;
            stream.shutdown().await.ok()
        };
        let connect = async move {
            let mut stream = connector.connect(name, client_io).await.ok()?;
            let mut answer = Vec::new();
            stream.read_to_end(&mut answer).await.ok()?;
            Some(answer)
        };
        let (_, answer) = tokio::join!(serve, connect);
        answer.as_deref() == Some(b"ok".as_slice())
    }

    #[tokio::test]
    async fn the_serving_certificate_names_the_loopback_addresses_and_extra_hosts() {
        let identity = TlsIdentity::new(&["apiserver.example.test".into()], None).unwrap();
        for name in ["localhost", "127.0.0.1", "::1", "apiserver.example.test"] {
            assert!(handshake(&identity, &identity, name).await, "{name}");
        }
        assert!(!handshake(&identity, &identity, "elsewhere.example.test").await);
    }

    #[tokio::test]
    async fn a_kept_ca_is_reused_so_old_clients_trust_a_restarted_server() {
        let dir = tempfile::tempdir().unwrap();
        let first = TlsIdentity::new(&[], Some(dir.path())).unwrap();
        let second = TlsIdentity::new(&[], Some(dir.path())).unwrap();
        assert_eq!(first.ca_pem(), second.ca_pem());
        assert!(handshake(&first, &second, "127.0.0.1").await);
        // Without the directory, each start has its own CA.
        let other = TlsIdentity::new(&[], None).unwrap();
        assert!(!handshake(&first, &other, "127.0.0.1").await);
    }

    #[tokio::test]
    async fn a_client_that_offers_aes_256_first_gets_aes_128_as_from_kube_apiserver() {
        let identity = TlsIdentity::new(&[], None).unwrap();
        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        let acceptor = tokio_rustls::TlsAcceptor::from(identity.server_config());
        // ring's default order, which kube's client sends: AES-256-GCM first.
        let connector =
            tokio_rustls::TlsConnector::from(Arc::new(identity.client_config().unwrap()));
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let (served, connected) = tokio::join!(
            acceptor.accept(server_io),
            connector.connect(name, client_io)
        );
        served.unwrap();
        let suite = connected.unwrap().get_ref().1.negotiated_cipher_suite();
        assert_eq!(
            suite.map(|s| s.suite()),
            Some(rustls::CipherSuite::TLS13_AES_128_GCM_SHA256)
        );
    }

    #[cfg(unix)]
    #[test]
    fn the_kept_ca_key_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        TlsIdentity::new(&[], Some(dir.path())).unwrap();
        let mode = std::fs::metadata(dir.path().join(CA_KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
