//! The servers: the webhooks (or the aggregated API) over HTTPS (the API server calls them through
//! the Service OLM made) and the probes over plain HTTP (the kubelet calls them on the pod's
//! address).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::{admission, conversion};

pub const CONVERT_PATH: &str = "/convert";
pub const VALIDATE_PATH: &str = "/validate-widget";

/// The largest review accepted. The API server converts a whole list of Widgets in one
/// ConversionReview, so this is sized for lists, not single objects: 32 MiB holds tens of
/// thousands of small Widgets; larger bodies get 413 rather than being buffered.
pub const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// How long a client may take to finish the TLS handshake before its connection is dropped (the
/// API server's own webhook timeout is at most 30 s; a stalled peer must not hold a task forever).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Readiness parts, each named by what `/readyz` says while it is not ready.
pub const WEBHOOKS_SERVING: &str = "webhook server not serving";
pub const CONTROLLER_SYNCED: &str = "controller not synced";
pub const API_SERVING: &str = "aggregated API not serving";
/// Ready until SIGTERM: the pod leaves its Service's endpoints while it still serves.
pub const NOT_STOPPING: &str = "shutting down";

/// What `/readyz` waits for: named parts, each set once ready.
#[derive(Clone, Debug)]
pub struct Readiness {
    parts: Arc<Vec<(&'static str, Arc<AtomicBool>)>>,
}

impl Readiness {
    /// Readiness waiting for `parts`, none ready yet.
    pub fn new(parts: &[&'static str]) -> Self {
        Self {
            parts: Arc::new(
                parts
                    .iter()
                    .map(|p| (*p, Arc::new(AtomicBool::new(false))))
                    .collect(),
            ),
        }
    }

    /// The flag of `part` (set it once the part is ready).
    pub fn part(&self, part: &str) -> Arc<AtomicBool> {
        self.parts
            .iter()
            .find(|(name, _)| *name == part)
            .map(|(_, flag)| flag.clone())
            .unwrap_or_else(|| panic!("no readiness part {part:?}"))
    }

    /// The parts not ready yet, in the order given; empty when ready.
    pub fn not_ready(&self) -> Vec<&'static str> {
        self.parts
            .iter()
            .filter(|(_, flag)| !flag.load(Ordering::SeqCst))
            .map(|(name, _)| *name)
            .collect()
    }
}

/// The client certificate a connection presented (its leaf, DER), already verified by the TLS
/// layer; `None` when it sent none. Every router served by [`serve_https`] can extract it.
#[derive(Clone, Debug, Default)]
pub struct PeerCertificate(pub Option<Arc<Vec<u8>>>);

/// `/convert` and `/validate-widget`.
pub fn webhook_router() -> Router {
    Router::new()
        .route(CONVERT_PATH, post(convert))
        .route(VALIDATE_PATH, post(validate))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
}

async fn convert(body: Bytes) -> Response {
    match conversion::review(&body) {
        Ok(review) => Json(review).into_response(),
        Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    }
}

async fn validate(body: Bytes) -> Response {
    match admission::review(&body) {
        Ok(review) => Json(review).into_response(),
        Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    }
}

/// `/healthz` (the process answers) and `/readyz` (webhooks serve and the controller synced).
pub fn probe_router(readiness: Readiness) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(readiness)
}

async fn readyz(State(readiness): State<Readiness>) -> Response {
    let missing = readiness.not_ready();
    if missing.is_empty() {
        "ok".into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {}", missing.join(", ")),
        )
            .into_response()
    }
}

/// Serves `router` over TLS on `listener` forever, one task per connection.
pub async fn serve_https(
    listener: TcpListener,
    config: Arc<rustls::ServerConfig>,
    router: Router,
    serving: Arc<AtomicBool>,
) {
    let acceptor = TlsAcceptor::from(config);
    serving.store(true, Ordering::SeqCst);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors and the like: wait rather than spin.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let router = router.clone();
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            let client_certificate = PeerCertificate(
                tls.get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|chain| chain.first())
                    .map(|leaf| Arc::new(leaf.to_vec())),
            );
            let service = TowerToHyperService::new(router.layer(Extension(client_certificate)));
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tls), service)
                .await
            {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::CertReloader;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    use serde_json::{Value, json};
    use std::net::SocketAddr;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn testdata(name: &str) -> Vec<u8> {
        std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("testdata")
                .join(name),
        )
        .unwrap()
    }

    /// POSTs `body` to `path` over TLS, trusting only the test certificate `a.crt` (as the API
    /// server trusts only the CA olmv1 injected); returns the status line and the body.
    async fn post(addr: SocketAddr, path: &str, body: &[u8]) -> (String, String) {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(&testdata("a.crt")).unwrap())
            .unwrap();
        let config =
            rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut tls = connector
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        tls.write_all(head.as_bytes()).await.unwrap();
        tls.write_all(body).await.unwrap();
        let mut response = String::new();
        tls.read_to_string(&mut response).await.unwrap();
        let status = response.lines().next().unwrap_or_default().to_string();
        let body = response
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        (status, body)
    }

    #[tokio::test]
    async fn the_webhooks_answer_over_tls_with_the_mounted_certificate() {
        let dir = crate::tls::tests::tempdir();
        std::fs::write(dir.join(crate::tls::CERT_FILE), testdata("a.crt")).unwrap();
        std::fs::write(dir.join(crate::tls::KEY_FILE), testdata("a.key")).unwrap();
        let certs = CertReloader::load(&dir).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let readiness = Readiness::new(&[WEBHOOKS_SERVING, CONTROLLER_SYNCED]);
        assert_eq!(
            readiness.not_ready(),
            ["webhook server not serving", "controller not synced"]
        );
        tokio::spawn(serve_https(
            listener,
            Arc::new(certs.server_config().unwrap()),
            webhook_router(),
            readiness.part(WEBHOOKS_SERVING),
        ));

        let admission = json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u1", "operation": "CREATE", "object": {
                "apiVersion": "test.olmv1.dev/v1", "kind": "Widget",
                "metadata": {"name": "big"}, "spec": {"replicas": 50}}},
        });
        let (status, body) = post(addr, VALIDATE_PATH, &serde_json::to_vec(&admission).unwrap()).await;
        assert_eq!(status, "HTTP/1.1 200 OK");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["response"]["allowed"], false);
        assert_eq!(
            body["response"]["status"]["message"],
            "Widget \"big\" is refused: spec.replicas 50 is more than 10, the most this operator runs"
        );
        assert_eq!(readiness.not_ready(), ["controller not synced"]);

        let conversion = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "c1", "desiredAPIVersion": "test.olmv1.dev/v1alpha1", "objects": [
                {"apiVersion": "test.olmv1.dev/v1", "kind": "Widget", "metadata": {"name": "w"},
                 "spec": {"replicas": 3}}]},
        });
        let (status, body) = post(addr, CONVERT_PATH, &serde_json::to_vec(&conversion).unwrap()).await;
        assert_eq!(status, "HTTP/1.1 200 OK");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["response"]["uid"], "c1");
        assert_eq!(
            body["response"]["convertedObjects"],
            json!([{"apiVersion": "test.olmv1.dev/v1alpha1", "kind": "Widget",
                    "metadata": {"name": "w"}, "spec": {"size": "large"}}])
        );

        let (status, body) = post(addr, CONVERT_PATH, b"not json").await;
        assert_eq!(status, "HTTP/1.1 400 Bad Request");
        assert!(body.starts_with("the body is not a ConversionReview: "), "{body}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
