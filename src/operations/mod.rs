//! The operations servers of the long-running commands. Probes (`/healthz`, `/readyz`) answer
//! anyone on a plain-HTTP port of their own (the kubelet has no token). `/metrics` names every
//! extension, bundle and version, so it is served over HTTPS to callers the API server says may
//! `get` the non-resource URL `/metrics` ([`access`]), as upstream's metrics server; plain and
//! open only when the admin asks for it or binds it to loopback.

pub mod access;

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};
use std::time::Duration;

use axum::{
    Router,
    extract::State,
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};
use prometheus_client::{encoding::text::encode, registry::Registry};

use std::net::SocketAddr;

use kube::{Client, Config};
use tokio::task::JoinHandle;

use crate::catalog::server::{ServeLimits, TlsFiles, serve_app, tls_acceptor};
use crate::tls_profile::TlsProfile;
use access::{AccessReviewer, Decision};

/// Readiness shared between the controllers and the probe server.
#[derive(Clone, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    /// Marks the process ready (after it leads and its watches run).
    pub fn set_ready(&self, ready: bool) {
        self.0.store(ready, Ordering::SeqCst);
    }

    fn is_ready(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Serves `/healthz` and `/readyz` in plain HTTP until the process ends.
pub async fn serve_probes(listener: tokio::net::TcpListener, readiness: Readiness) -> std::io::Result<()> {
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(|State(readiness): State<Readiness>| async move {
                match readiness.is_ready() {
                    true => (StatusCode::OK, "ok"),
                    false => (StatusCode::SERVICE_UNAVAILABLE, "not ready"),
                }
            }),
        )
        .with_state(readiness);
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "serving /healthz and /readyz (plain HTTP)");
    }
    axum::serve(listener, app).await
}

/// How `/metrics` is served.
pub enum MetricsAccess {
    /// Plain HTTP to anyone (`--metrics-insecure`, or a loopback address without certificates).
    Open,
    /// HTTPS with `tls`; callers reviewed by `reviewer`.
    Reviewed {
        /// The serving certificate under the TLS profile.
        tls: tokio_rustls::TlsAcceptor,
        /// TokenReview and SubjectAccessReview.
        reviewer: Arc<AccessReviewer>,
    },
}

/// What one metrics connection may hold: a scraper or two, small requests.
fn metrics_limits() -> ServeLimits {
    ServeLimits {
        max_connections: 64,
        header_read_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(120),
        ..ServeLimits::default()
    }
}

#[derive(Clone)]
struct MetricsState {
    registry: Arc<Registry>,
    reviewer: Option<Arc<AccessReviewer>>,
}

/// Serves `/metrics` on `listener` as `access` says, until the process ends.
pub async fn serve_metrics(listener: tokio::net::TcpListener, registry: Registry, access: MetricsAccess) {
    let (tls, reviewer) = match access {
        MetricsAccess::Open => (None, None),
        MetricsAccess::Reviewed { tls, reviewer } => (Some(tls), Some(reviewer)),
    };
    if let Ok(addr) = listener.local_addr() {
        match reviewer {
            Some(_) => tracing::info!(%addr, "serving /metrics over HTTPS to callers allowed get /metrics"),
            None => tracing::info!(%addr, "serving /metrics in plain HTTP to anyone"),
        }
    }
    let state = MetricsState {
        registry: Arc::new(registry),
        reviewer,
    };
    let app = Router::new()
        .route("/metrics", get(metrics_handler))
        .with_state(state);
    serve_app(listener, app, tls, metrics_limits(), std::future::pending()).await;
}

async fn metrics_handler(State(state): State<MetricsState>, headers: HeaderMap) -> Response {
    if let Some(reviewer) = &state.reviewer {
        match reviewer.review(headers.get(header::AUTHORIZATION)).await {
            Decision::Allowed => {}
            Decision::Unauthenticated => {
                return (
                    StatusCode::UNAUTHORIZED,
                    [(header::WWW_AUTHENTICATE, "Bearer")],
                    "Unauthorized: a bearer token the API server accepts is required\n",
                )
                    .into_response();
            }
            Decision::Forbidden => {
                return (
                    StatusCode::FORBIDDEN,
                    "Forbidden: the caller may not get the non-resource URL /metrics\n",
                )
                    .into_response();
            }
        }
    }
    let mut body = String::new();
    match encode(&mut body, &state.registry) {
        Ok(()) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        )
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// A listen address flag; Go-style `:PORT` means every interface (as upstream's flags).
pub fn parse_bind_address(addr: &str) -> Result<SocketAddr, String> {
    let full = match addr.starts_with(':') {
        true => format!("0.0.0.0{addr}"),
        false => addr.to_string(),
    };
    full.parse()
        .map_err(|e| format!("invalid listen address {addr:?}: {e}"))
}

/// Where and how the operations servers listen.
pub struct OperationsSettings<'a> {
    /// `/healthz` and `/readyz`, plain HTTP.
    pub probe_addr: SocketAddr,
    /// `/metrics`.
    pub metrics_addr: SocketAddr,
    /// Serve `/metrics` in plain HTTP to anyone, whatever the address.
    pub metrics_insecure: bool,
    /// The metrics server's certificate: HTTPS, callers reviewed by the API server.
    pub tls: Option<&'a TlsFiles>,
    /// The TLS profile of the metrics server.
    pub profile: &'a TlsProfile,
}

impl OperationsSettings<'_> {
    fn access(&self, config: &Config) -> Result<MetricsAccess, String> {
        if self.metrics_insecure {
            return Ok(MetricsAccess::Open);
        }
        if let Some(files) = self.tls {
            let tls = tls_acceptor(files, self.profile).map_err(|e| format!("metrics server: {e}"))?;
            // Its own client: every replica serves metrics, leading or not.
            let client = Client::try_from(config.clone())
                .map_err(|e| format!("cannot build a Kubernetes client: {e}"))?;
            let reviewer = std::sync::Arc::new(AccessReviewer::new(client));
            return Ok(MetricsAccess::Reviewed { tls, reviewer });
        }
        match self.metrics_addr.ip().is_loopback() {
            true => Ok(MetricsAccess::Open),
            false => Err(format!(
                "--metrics-bind-address {} is reachable from other hosts: give --tls-cert and --tls-key \
                 (HTTPS, callers the API server allows get /metrics) or --metrics-insecure (plain HTTP, anyone)",
                self.metrics_addr
            )),
        }
    }
}

/// Starts the probe and metrics servers; the process is not ready until
/// [`Readiness::set_ready`]. The task ends (with the reason) only when a server stops.
pub async fn start_servers(
    settings: OperationsSettings<'_>,
    registry: Registry,
    config: &Config,
) -> Result<(Readiness, JoinHandle<String>), String> {
    let access = settings.access(config)?;
    let bind = |addr: SocketAddr| async move {
        tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("listening on {addr}: {e}"))
    };
    let probes = bind(settings.probe_addr).await?;
    let metrics = bind(settings.metrics_addr).await?;
    let readiness = Readiness::default();
    let served = readiness.clone();
    let servers = tokio::spawn(async move {
        tokio::select! {
            result = serve_probes(probes, served) => format!("the probe server stopped: {result:?}"),
            () = serve_metrics(metrics, registry, access) => "the metrics server stopped".to_string(),
        }
    });
    Ok((readiness, servers))
}
