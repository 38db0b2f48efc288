//! The serving certificate: `tls.crt` and `tls.key` in the directory OLM mounts the webhook
//! Secret at (`/tmp/k8s-webhook-server/serving-certs`), or `apiserver.crt` and `apiserver.key`
//! where it mounts it for an aggregated API server (`/apiserver.local.config/certificates`); read
//! at start and read again when they change (cert-manager renews the Secret; the kubelet swaps the
//! files in place).

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

pub const CERT_FILE: &str = "tls.crt";
pub const KEY_FILE: &str = "tls.key";
/// The file names under the APIService certificate's mount.
pub const API_CERT_FILE: &str = "apiserver.crt";
pub const API_KEY_FILE: &str = "apiserver.key";

/// How often the files are looked at again. The kubelet refreshes a Secret volume about once a
/// minute, so a shorter period gains nothing; a longer one delays a renewed certificate.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(10);

/// The most a PEM file may hold: a chain of a few certificates is under 10 KiB; anything far
/// larger is not a serving certificate and is not read into memory.
pub const MAX_PEM_BYTES: u64 = 256 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: {size} bytes, more than the {MAX_PEM_BYTES} a certificate file may hold")]
    TooLarge { path: PathBuf, size: u64 },
    #[error("{path}: no PEM certificate in it: {reason}")]
    NoCertificate { path: PathBuf, reason: String },
    #[error("{path}: no PEM private key in it: {reason}")]
    NoKey { path: PathBuf, reason: String },
    #[error("{dir}: the key does not belong to the certificate or cannot sign: {reason}")]
    Mismatch { dir: PathBuf, reason: String },
}

/// The two files' bytes, compared to tell whether anything changed.
type Pem = (Vec<u8>, Vec<u8>);

fn read_bounded(path: &Path) -> Result<Vec<u8>, TlsError> {
    let read = |source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    };
    let size = std::fs::metadata(path).map_err(read)?.len();
    if size > MAX_PEM_BYTES {
        return Err(TlsError::TooLarge {
            path: path.to_path_buf(),
            size,
        });
    }
    std::fs::read(path).map_err(read)
}

/// Where a certificate and its key are.
#[derive(Clone, Debug)]
pub struct CertFiles {
    pub dir: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl CertFiles {
    /// `cert` and `key` in `dir`.
    pub fn new(dir: &Path, cert: &str, key: &str) -> Self {
        Self {
            dir: dir.to_path_buf(),
            cert: dir.join(cert),
            key: dir.join(key),
        }
    }
}

fn read_pem(files: &CertFiles) -> Result<Pem, TlsError> {
    Ok((read_bounded(&files.cert)?, read_bounded(&files.key)?))
}

/// Parses a certificate chain and its key, checking that they belong together.
pub fn certified_key(files: &CertFiles, cert_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::NoCertificate {
            path: files.cert.clone(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: files.cert.clone(),
            reason: "the file is empty".into(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| TlsError::NoKey {
        path: files.key.clone(),
        reason: e.to_string(),
    })?;
    let provider = rustls::crypto::ring::default_provider();
    CertifiedKey::from_der(certs, key, &provider).map_err(|e| TlsError::Mismatch {
        dir: files.dir.clone(),
        reason: e.to_string(),
    })
}

/// The certificate the server presents, replaced when the files change.
#[derive(Debug)]
pub struct CertReloader {
    files: CertFiles,
    current: RwLock<(Pem, Arc<CertifiedKey>)>,
}

impl CertReloader {
    /// Loads the certificate in `dir`; an error when it cannot (the operator then exits: without a
    /// certificate its webhooks cannot serve, and the pod restarting is the honest signal).
    pub fn load(dir: &Path) -> Result<Arc<Self>, TlsError> {
        Self::load_files(CertFiles::new(dir, CERT_FILE, KEY_FILE))
    }

    /// [`CertReloader::load`] of other files.
    pub fn load_files(files: CertFiles) -> Result<Arc<Self>, TlsError> {
        let pem = read_pem(&files)?;
        let key = certified_key(&files, &pem.0, &pem.1)?;
        Ok(Arc::new(Self {
            files,
            current: RwLock::new((pem, Arc::new(key))),
        }))
    }

    /// Reads the files again; replaces the certificate when they changed and parse. Returns whether
    /// it was replaced. A broken pair mid-update keeps the old certificate until the next look.
    pub fn reload(&self) -> Result<bool, TlsError> {
        let pem = read_pem(&self.files)?;
        if self.current.read().is_ok_and(|c| c.0 == pem) {
            return Ok(false);
        }
        let key = Arc::new(certified_key(&self.files, &pem.0, &pem.1)?);
        if let Ok(mut current) = self.current.write() {
            *current = (pem, key);
        }
        Ok(true)
    }

    /// Looks at the files every `RELOAD_INTERVAL`, forever.
    pub async fn watch(self: Arc<Self>) {
        let mut tick = tokio::time::interval(RELOAD_INTERVAL);
        tick.tick().await;
        loop {
            tick.tick().await;
            match self.reload() {
                Ok(true) => tracing::info!(dir = %self.files.dir.display(), "serving certificate reloaded"),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "serving certificate not reloaded; keeping the current one")
                }
            }
        }
    }

    /// The rustls server configuration presenting this certificate.
    pub fn server_config(self: &Arc<Self>) -> Result<rustls::ServerConfig, rustls::Error> {
        self.server_config_verifying(rustls::server::WebPkiClientVerifier::no_client_auth())
    }

    /// [`CertReloader::server_config`] verifying client certificates with `verifier`.
    pub fn server_config_verifying(
        self: &Arc<Self>,
        verifier: Arc<dyn rustls::server::danger::ClientCertVerifier>,
    ) -> Result<rustls::ServerConfig, rustls::Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(verifier)
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}

impl ResolvesServerCert for CertReloader {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current.read().ok().map(|c| c.1.clone())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn testdata(name: &str) -> Vec<u8> {
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata").join(name)).unwrap()
    }

    fn write_pair(dir: &Path, cert: &str, key: &str) {
        std::fs::write(dir.join(CERT_FILE), testdata(cert)).unwrap();
        std::fs::write(dir.join(KEY_FILE), testdata(key)).unwrap();
    }

    fn served_cert(reloader: &CertReloader) -> Vec<u8> {
        let current = reloader.current.read().unwrap();
        current.1.cert[0].to_vec()
    }

    fn der_of(pem: &str) -> Vec<u8> {
        CertificateDer::from_pem_slice(&testdata(pem)).unwrap().to_vec()
    }

    #[test]
    fn a_changed_pair_is_served_after_a_reload_and_a_broken_one_is_not() {
        let dir = tempdir();
        write_pair(&dir, "a.crt", "a.key");
        let reloader = CertReloader::load(&dir).unwrap();
        assert_eq!(served_cert(&reloader), der_of("a.crt"));
        assert!(
            !reloader.reload().unwrap(),
            "unchanged files are not parsed again"
        );

        write_pair(&dir, "b.crt", "b.key");
        assert!(reloader.reload().unwrap());
        assert_eq!(served_cert(&reloader), der_of("b.crt"));

        // Mid-update: the new certificate beside the old key. b stays served.
        write_pair(&dir, "a.crt", "b.key");
        let err = reloader.reload().unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "{}: the key does not belong to the certificate or cannot sign:",
                dir.display()
            )),
            "{err}"
        );
        assert_eq!(served_cert(&reloader), der_of("b.crt"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_empty_and_oversized_files_are_refused_by_name() {
        let dir = tempdir();
        let err = CertReloader::load(&dir).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "{}: No such file or directory (os error 2)",
                dir.join(CERT_FILE).display()
            )
        );

        std::fs::write(dir.join(CERT_FILE), b"").unwrap();
        std::fs::write(dir.join(KEY_FILE), testdata("a.key")).unwrap();
        let err = CertReloader::load(&dir).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "{}: no PEM certificate in it: the file is empty",
                dir.join(CERT_FILE).display()
            )
        );

        std::fs::write(dir.join(CERT_FILE), testdata("a.crt")).unwrap();
        std::fs::write(dir.join(KEY_FILE), testdata("a.crt")).unwrap();
        let err = CertReloader::load(&dir).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "{}: no PEM private key in it:",
                dir.join(KEY_FILE).display()
            )),
            "{err}"
        );

        let big = vec![b'x'; MAX_PEM_BYTES as usize + 1];
        std::fs::write(dir.join(KEY_FILE), big).unwrap();
        let err = CertReloader::load(&dir).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "{}: 262145 bytes, more than the 262144 a certificate file may hold",
                dir.join(KEY_FILE).display()
            )
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A fresh directory under the system's temporary directory (no tempfile crate in this
    /// member); each test removes its own at the end.
    pub(crate) fn tempdir() -> PathBuf {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "webhook-operator-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
