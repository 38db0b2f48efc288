//! `olmv1 catalogd`'s two modes: reconciling the cluster's ClusterCatalogs and serving what they
//! hold ([`run_cluster`]), or serving FBC directories with no cluster ([`serve_directories`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use olmv1_api::v1::conditions::{TYPE_PROGRESSING, TYPE_SERVING};

use super::{replica::Replica, shutdown_signal};
use crate::catalog::server::{CatalogStore, ServeLimits, TlsFiles, serve, tls_acceptor};
use crate::controller::cluster_catalog::{self, CatalogdSettings, Context};
use crate::controller::metrics::{ConditionMetrics, ReconcileMetrics, register_leader};
use crate::image::pull_secret::{self, PullSecretSources};
use crate::image::{RegistryClient, RegistryConfig, UnpackLimits};
use crate::leader::LeaderTimings;
use crate::operations::{OperationsSettings, start_servers};
use crate::tls_profile::TlsProfile;

/// The leader election Lease of catalogd (upstream's name).
const LEASE_NAME: &str = "catalogd-operator-lock";

/// Cluster mode: what `olmv1 catalogd`'s flags set.
pub struct ClusterSettings {
    /// Where the catalog server listens (`:8443` means every interface).
    pub catalogs_server_addr: String,
    /// `/metrics`.
    pub metrics_addr: SocketAddr,
    /// `/healthz` and `/readyz`.
    pub probe_addr: SocketAddr,
    /// `/metrics` in plain HTTP to anyone, on any address.
    pub metrics_insecure: bool,
    /// Host (and port) clients reach the server at, for `status.urls.base`.
    pub external_address: String,
    /// Unpacked images and served content.
    pub cache_dir: PathBuf,
    /// The catalog (and metrics) server's certificate: HTTPS.
    pub tls: Option<TlsFiles>,
    /// The TLS profile of the servers; its minimum also bounds the registry client.
    pub profile: TlsProfile,
    /// How catalog images are pulled.
    pub registry: RegistryConfig,
    /// Bounds on a catalog image's content.
    pub unpack_limits: UnpackLimits,
    /// What clients can make the catalog server hold.
    pub serve_limits: ServeLimits,
    /// Longest meta of a served catalog, as one JSONL line.
    pub max_jsonl_line_bytes: usize,
    /// The global pull secret and catalogd's ServiceAccount pull secrets.
    pub pull_secrets: PullSecretSources,
    /// Elect a leader on a Lease, with these timings, before reconciling.
    pub leader_election: Option<LeaderTimings>,
    /// The Lease's namespace.
    pub leader_election_namespace: String,
    /// Only the ClusterCatalogs matching this label selector (all when empty).
    pub selector: String,
    /// One `pollIntervalMinutes` unit.
    pub poll_unit: Duration,
}

/// Reconciles ClusterCatalogs and serves their content until SIGINT/SIGTERM (then the server
/// drains) or lost leadership; `listening` is told the catalogs' base URL once the server
/// listens.
pub async fn run_cluster(settings: ClusterSettings, listening: impl FnOnce(&str)) -> Result<(), String> {
    let profile = settings.profile;
    let tls = settings.tls;
    let acceptor = catalog_acceptor(tls.as_ref(), &profile)?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let store = Arc::new(
        CatalogStore::new(&settings.cache_dir.join("catalogs"))
            .map_err(|e| format!("preparing {}: {e}", settings.cache_dir.display()))?
            .with_max_line_bytes(settings.max_jsonl_line_bytes),
    );
    let mut registry_config = settings.registry;
    registry_config.min_tls_version = profile.client_min_version();
    let credentials = registry_config.credentials.clone();
    let registry = RegistryClient::new(registry_config).map_err(|e| e.to_string())?;
    let replica = Replica::connect(
        "catalogd",
        settings.leader_election,
        &settings.leader_election_namespace,
        LEASE_NAME,
    )
    .await?;
    let client = replica.client.clone();
    let reconciler_settings = CatalogdSettings {
        base_url: format!("{scheme}://{}", settings.external_address.trim_end_matches('/')),
        image_cache_dir: settings.cache_dir.join("unpack"),
        unpack_limits: settings.unpack_limits,
        poll_unit: settings.poll_unit,
        selector: settings.selector,
    };
    let mut metrics_registry = prometheus_client::registry::Registry::default();
    let metrics = Arc::new(ReconcileMetrics::register(
        &mut metrics_registry,
        "olmv1_clustercatalog",
    ));
    let conditions = Arc::new(ConditionMetrics::register(
        &mut metrics_registry,
        "olmv1_clustercatalog",
        &[TYPE_SERVING, TYPE_PROGRESSING],
    ));
    register_leader(&mut metrics_registry, "catalogd", replica.leadership.clone());
    let operations = OperationsSettings {
        probe_addr: settings.probe_addr,
        metrics_addr: settings.metrics_addr,
        metrics_insecure: settings.metrics_insecure,
        tls: tls.as_ref(),
        profile: &profile,
    };
    let (readiness, operations) = start_servers(operations, metrics_registry, &replica.config).await?;
    let context = Arc::new(
        Context::new(
            client.clone(),
            store.clone(),
            Arc::new(registry),
            reconciler_settings,
        )
        .with_metrics(metrics)
        .with_condition_metrics(conditions),
    );
    let listener = bind(&settings.catalogs_server_addr).await?;
    announce(&listener, tls.is_some(), listening);
    let (stop_server, server_stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(
        listener,
        store,
        acceptor,
        settings.serve_limits,
        async move {
            let _ = server_stopped.await;
        },
    ));
    tokio::select! {
        acquired = replica.acquire() => acquired?,
        () = shutdown_signal() => {
            let _ = stop_server.send(());
            return Ok(());
        }
    }
    // Registry credentials from the pull secrets, kept current (shared with `registry`).
    pull_secret::start(&client, settings.pull_secrets, &credentials).await;
    readiness.set_ready(true);
    // The controller stops on SIGINT/SIGTERM; then the server drains.
    let lost = tokio::select! {
        () = cluster_catalog::run(context) => None,
        lost = replica.lost() => Some(lost),
        stopped = operations => Some(stopped.unwrap_or_else(|e| format!("the operations servers failed: {e}"))),
    };
    let _ = stop_server.send(());
    if let Some(lost) = lost {
        return Err(lost);
    }
    replica.release().await;
    match server.await {
        Ok(result) => result.map_err(|e| e.to_string()),
        Err(e) => Err(format!("catalog server task failed: {e}")),
    }
}

/// Standalone mode: what `olmv1 catalogd serve`'s flags set.
pub struct StandaloneSettings {
    /// Where the server listens, e.g. `127.0.0.1:8080` (`:PORT`: every interface).
    pub listen: String,
    /// The catalogs served: name and FBC directory tree.
    pub catalogs: Vec<(String, PathBuf)>,
    /// The server's certificate: HTTPS.
    pub tls: Option<TlsFiles>,
    /// The TLS profile of the server.
    pub profile: TlsProfile,
    /// Where the served content is written (a temporary directory when absent).
    pub cache_dir: Option<PathBuf>,
    /// Largest single catalog file read.
    pub max_file_bytes: u64,
    /// What clients can make the server hold.
    pub serve_limits: ServeLimits,
    /// Longest meta, as one JSONL line.
    pub max_jsonl_line_bytes: usize,
}

/// Stores each directory's catalog and serves them until `shutdown` completes; `listening` is
/// told the catalogs' base URL once the server listens.
pub async fn serve_directories(
    settings: StandaloneSettings,
    listening: impl FnOnce(&str),
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let acceptor = catalog_acceptor(settings.tls.as_ref(), &settings.profile)?;
    let temp;
    let root = match settings.cache_dir {
        Some(dir) => dir,
        None => {
            temp = tempfile::Builder::new()
                .prefix("olmv1-catalogd-")
                .tempdir()
                .map_err(|e| format!("creating a temporary directory: {e}"))?;
            temp.path().to_path_buf()
        }
    };
    let store = Arc::new(
        CatalogStore::new(&root)
            .map_err(|e| format!("preparing {}: {e}", root.display()))?
            .with_max_line_bytes(settings.max_jsonl_line_bytes),
    );
    for (name, dir) in settings.catalogs {
        let store = store.clone();
        let started = std::time::Instant::now();
        let max_file_bytes = settings.max_file_bytes;
        let stored = tokio::task::spawn_blocking(move || store.store_from_dir(&name, &dir, max_file_bytes))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        tracing::info!(
            catalog = %stored.name, metas = stored.meta_count, bytes = stored.jsonl_len(),
            elapsed_ms = started.elapsed().as_millis() as u64, "catalog stored"
        );
    }
    let listener = bind(&settings.listen).await?;
    announce(&listener, settings.tls.is_some(), listening);
    serve(listener, store, acceptor, settings.serve_limits, shutdown)
        .await
        .map_err(|e| e.to_string())
}

/// The catalog server's TLS under `profile` (none without a certificate).
fn catalog_acceptor(
    tls: Option<&TlsFiles>,
    profile: &TlsProfile,
) -> Result<Option<tokio_rustls::TlsAcceptor>, String> {
    tls.map(|files| tls_acceptor(files, profile).map_err(|e| format!("catalog server: {e}")))
        .transpose()
}

/// Binds `addr`; Go-style `:PORT` means every interface.
async fn bind(addr: &str) -> Result<tokio::net::TcpListener, String> {
    let addr = if addr.starts_with(':') {
        format!("0.0.0.0{addr}")
    } else {
        addr.to_string()
    };
    let socket: SocketAddr = addr
        .parse()
        .map_err(|e| format!("invalid listen address {addr:?}: {e}"))?;
    tokio::net::TcpListener::bind(socket)
        .await
        .map_err(|e| format!("listening on {addr}: {e}"))
}

fn announce(listener: &tokio::net::TcpListener, tls: bool, listening: impl FnOnce(&str)) {
    if let Ok(addr) = listener.local_addr() {
        let scheme = if tls { "https" } else { "http" };
        tracing::info!(address = %addr, "catalog server listening");
        listening(&format!("{scheme}://{addr}/catalogs/"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn directories_are_served_until_shutdown() {
        let fbc = tempfile::tempdir().unwrap();
        std::fs::write(
            fbc.path().join("catalog.json"),
            r#"{"schema":"olm.package","name":"p","defaultChannel":"stable"}"#,
        )
        .unwrap();
        let settings = StandaloneSettings {
            listen: "127.0.0.1:0".into(),
            catalogs: vec![("demo".into(), fbc.path().to_path_buf())],
            tls: None,
            profile: TlsProfile::from_flags("intermediate", None, &[], &[]).unwrap(),
            cache_dir: None,
            max_file_bytes: UnpackLimits::CATALOG.max_file_bytes,
            serve_limits: ServeLimits::default(),
            max_jsonl_line_bytes: crate::catalog::DEFAULT_MAX_JSONL_LINE_BYTES,
        };
        let (url_tx, url_rx) = tokio::sync::oneshot::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve_directories(
            settings,
            move |url| url_tx.send(url.to_string()).unwrap(),
            async move {
                let _ = stopped.await;
            },
        ));
        let base = url_rx.await.unwrap();
        assert!(
            base.starts_with("http://127.0.0.1:") && base.ends_with("/catalogs/"),
            "{base}"
        );
        let body = reqwest::get(format!("{base}demo/api/v1/all"))
            .await
            .unwrap()
            .error_for_status()
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(body.contains(r#""name":"p""#), "{body}");
        let missing = reqwest::get(format!("{base}other/api/v1/all")).await.unwrap();
        assert_eq!(missing.status(), 404);
        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
    }
}
