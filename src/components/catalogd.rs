//! `olmv1 catalogd`'s two modes: reconciling the cluster's ClusterCatalogs and serving what they
//! hold ([`run_cluster`]), or serving FBC directories with no cluster ([`serve_directories`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use olmv1_api::v1::conditions::{TYPE_PROGRESSING, TYPE_SERVING};

use super::{replica::Replica, shutdown_signal, tls_profile};
use crate::catalog::DEFAULT_MAX_JSONL_LINE_BYTES;
use crate::catalog::server::{CatalogStore, ServeLimits, TlsFiles, serve, tls_acceptor};
use crate::controller::cluster_catalog::{self, CatalogdSettings, Context};
use crate::controller::metrics::{ConditionMetrics, ReconcileMetrics, register_leader};
use crate::image::pull_secret::{self, PullSecretArgs};
use crate::image::{RegistriesConf, RegistryClient, RegistryConfig, RegistryOptions, UnpackLimits};
use crate::leader::LeaderTimingArgs;
use crate::operations::{OperationsSettings, parse_bind_address, start_servers};
use crate::tls_profile::{TlsProfile, TlsProfileArgs};

/// The leader election Lease of catalogd (upstream's name).
const LEASE_NAME: &str = "catalogd-operator-lock";

/// Cluster mode: reconcile ClusterCatalogs (kubeconfig from `KUBECONFIG` or in-cluster); what
/// `olmv1 catalogd`'s flags set.
#[derive(clap::Args, Debug)]
pub struct ClusterSettings {
    /// Address the catalog server listens on (`:8443` means all interfaces).
    #[arg(long, default_value = ":8443")]
    pub catalogs_server_addr: String,
    /// Address of the /metrics server (upstream's flag; `--metrics-addr` is its old name): HTTPS
    /// with the catalog server's certificate, for callers allowed `get` on /metrics; plain HTTP
    /// without one, on a loopback address or with --metrics-insecure.
    #[arg(
        long = "metrics-bind-address",
        alias = "metrics-addr",
        env = "OLMV1_CATALOGD_METRICS_ADDR",
        default_value = "127.0.0.1:8081",
        value_parser = parse_bind_address
    )]
    pub metrics_addr: SocketAddr,
    /// Address of the /healthz and /readyz server (plain HTTP, no authentication).
    #[arg(
        long = "health-probe-bind-address",
        env = "OLMV1_CATALOGD_PROBE_ADDR",
        default_value = "127.0.0.1:8091",
        value_parser = parse_bind_address
    )]
    pub probe_addr: SocketAddr,
    /// Serve /metrics in plain HTTP to anyone, on any address (local runs without certificates).
    #[arg(long)]
    pub metrics_insecure: bool,
    /// Host (and port) clients reach the server at; published in `status.urls.base` as
    /// `<scheme>://<external-address>/catalogs/<name>`.
    #[arg(long, default_value = "catalogd-service.olmv1-system.svc")]
    pub external_address: String,
    /// Directory for unpacked images and served content.
    #[arg(long, default_value = "/var/cache/catalogd")]
    pub cache_dir: PathBuf,
    /// The catalog and metrics servers' certificate and TLS profile.
    #[command(flatten)]
    pub tls: ServingTlsArgs,
    /// How catalog images are pulled.
    #[command(flatten)]
    pub registry: RegistryArgs,
    /// What clients can make the catalog server hold.
    #[command(flatten)]
    pub limits: ServeLimitArgs,
    /// The global pull secret and catalogd's ServiceAccount pull secrets.
    #[command(flatten)]
    pub pull_secrets: PullSecretArgs,
    /// Elect a leader on a Lease before reconciling (for more than one replica); every replica
    /// serves, and only the leader has content (others answer 404, as upstream).
    #[arg(long)]
    pub leader_elect: bool,
    /// Namespace of the leader election Lease.
    #[arg(long, default_value = "olmv1-system")]
    pub leader_election_namespace: String,
    /// The leader election's durations.
    #[command(flatten)]
    pub leader_timings: LeaderTimingArgs,
    /// Reconcile only the ClusterCatalogs matching this label selector (all by default).
    #[arg(long, default_value = "")]
    pub selector: String,
    /// Seconds in one `pollIntervalMinutes` unit (60; shorter values are for tests).
    #[arg(long, default_value_t = 60, hide = true)]
    pub poll_interval_unit_seconds: u64,
}

/// The certificate and TLS profile of catalogd's servers.
#[derive(clap::Args, Debug, Clone)]
pub struct ServingTlsArgs {
    /// Serving certificate (PEM); with --tls-key, the server speaks HTTPS.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Serving key (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The TLS profile of the servers; its minimum also bounds the registry client.
    #[command(flatten)]
    pub profile: TlsProfileArgs,
}

impl ServingTlsArgs {
    /// The certificate and key, when both are given: HTTPS.
    fn files(&self) -> Option<TlsFiles> {
        Some(TlsFiles {
            cert: self.tls_cert.clone()?,
            key: self.tls_key.clone()?,
        })
    }
}

/// How catalog images are pulled, and what one may hold.
#[derive(clap::Args, Debug, Clone)]
pub struct RegistryArgs {
    /// PEM file or directory of extra CAs trusted for registries.
    #[arg(long, value_name = "PATH")]
    pub pull_cas_dir: Option<PathBuf>,
    /// Docker/Podman auth file with registry credentials (`{"auths":{...}}`).
    #[arg(long, value_name = "PATH", env = "REGISTRY_AUTH_FILE")]
    pub auth_file: Option<PathBuf>,
    /// Registry (`host[:port]`) allowed plain HTTP (repeatable; loopback always is).
    #[arg(long = "insecure-registry", value_name = "HOST[:PORT]")]
    pub insecure_registries: Vec<String>,
    /// containers-registries.conf(5) file: registry mirrors, remapped, blocked and insecure
    /// registries for image pulls (default: /etc/containers/registries.conf when present).
    #[arg(long, value_name = "PATH", env = "CONTAINERS_REGISTRIES_CONF")]
    pub registries_conf: Option<PathBuf>,
    /// Largest total uncompressed size of a catalog image, in bytes.
    #[arg(long, default_value_t = UnpackLimits::CATALOG.max_total_bytes)]
    pub max_unpacked_bytes: u64,
    /// Largest number of tar entries over the layers of a catalog image.
    #[arg(long, default_value_t = UnpackLimits::CATALOG.max_entries)]
    pub max_unpacked_entries: u64,
    /// Largest single catalog file read, in bytes (checked before it is read).
    #[arg(long, default_value_t = UnpackLimits::CATALOG.max_file_bytes)]
    pub max_file_bytes: u64,
}

impl RegistryArgs {
    /// The registry configuration these flags describe.
    pub fn registry_config(&self) -> Result<RegistryConfig, String> {
        let config = RegistryOptions {
            insecure_registries: self.insecure_registries.clone(),
            ca_paths: self.pull_cas_dir.as_deref().into_iter().collect(),
            auth_file: self.auth_file.as_deref(),
        }
        .config()?;
        Ok(RegistryConfig {
            registries_conf: RegistriesConf::configured(self.registries_conf.as_deref())
                .map_err(|e| e.to_string())?,
            ..config
        })
    }

    /// The bounds on a catalog image's content these flags describe.
    pub fn unpack_limits(&self) -> UnpackLimits {
        UnpackLimits {
            max_total_bytes: self.max_unpacked_bytes,
            max_entries: self.max_unpacked_entries,
            max_file_bytes: self.max_file_bytes,
        }
    }
}

/// What clients can make the catalog server hold (defaults: [`ServeLimits::default`]).
#[derive(clap::Args, Debug, Clone)]
pub struct ServeLimitArgs {
    /// Most open client connections; more are closed on accept.
    #[arg(long, default_value_t = ServeLimits::default().max_connections)]
    pub max_connections: usize,
    /// Most requests in progress (until their body is sent); more are answered 503.
    #[arg(long, default_value_t = ServeLimits::default().max_concurrent_requests)]
    pub max_concurrent_requests: usize,
    /// Most response bytes read from disk and not yet sent, over all clients.
    #[arg(long, default_value_t = ServeLimits::default().max_bytes_in_flight)]
    pub max_bytes_in_flight: usize,
    /// Seconds a client has to send a request's headers.
    #[arg(long, default_value_t = ServeLimits::default().header_read_timeout.as_secs())]
    pub header_read_timeout_seconds: u64,
    /// Seconds without a byte moving on a connection before it is closed.
    #[arg(long, default_value_t = ServeLimits::default().idle_timeout.as_secs())]
    pub idle_timeout_seconds: u64,
    /// Longest meta, as one line of the served JSONL, in bytes; a catalog with a longer one is
    /// refused.
    #[arg(long, default_value_t = DEFAULT_MAX_JSONL_LINE_BYTES)]
    pub max_jsonl_line_bytes: usize,
}

impl ServeLimitArgs {
    /// The limits these flags describe.
    pub fn limits(&self) -> ServeLimits {
        ServeLimits {
            max_connections: self.max_connections,
            max_concurrent_requests: self.max_concurrent_requests,
            max_bytes_in_flight: self.max_bytes_in_flight,
            header_read_timeout: Duration::from_secs(self.header_read_timeout_seconds.max(1)),
            idle_timeout: Duration::from_secs(self.idle_timeout_seconds.max(1)),
        }
    }
}

/// Reconciles ClusterCatalogs and serves their content until SIGINT/SIGTERM (then the server
/// drains) or lost leadership; `listening` is told the catalogs' base URL once the server
/// listens.
pub async fn run_cluster(settings: ClusterSettings, listening: impl FnOnce(&str)) -> Result<(), String> {
    let profile = tls_profile(&settings.tls.profile)?;
    let tls = settings.tls.files();
    let mut registry_config = settings.registry.registry_config()?;
    let leader_election = (settings.leader_timings)
        .election(settings.leader_elect)
        .map_err(|e| e.to_string())?;
    let acceptor = catalog_acceptor(tls.as_ref(), &profile)?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let store = Arc::new(
        CatalogStore::new(&settings.cache_dir.join("catalogs"))
            .map_err(|e| format!("preparing {}: {e}", settings.cache_dir.display()))?
            .with_max_line_bytes(settings.limits.max_jsonl_line_bytes),
    );
    registry_config.min_tls_version = profile.client_min_version();
    let credentials = registry_config.credentials.clone();
    let registry = RegistryClient::new(registry_config).map_err(|e| e.to_string())?;
    let replica = Replica::connect(
        "catalogd",
        leader_election,
        &settings.leader_election_namespace,
        LEASE_NAME,
    )
    .await?;
    let client = replica.client.clone();
    let reconciler_settings = CatalogdSettings {
        base_url: format!("{scheme}://{}", settings.external_address.trim_end_matches('/')),
        image_cache_dir: settings.cache_dir.join("unpack"),
        unpack_limits: settings.registry.unpack_limits(),
        poll_unit: Duration::from_secs(settings.poll_interval_unit_seconds.max(1)),
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
        settings.limits.limits(),
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
    pull_secret::start(&client, settings.pull_secrets.sources(), &credentials).await;
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
#[derive(clap::Args, Debug)]
pub struct StandaloneSettings {
    /// Address to listen on, e.g. `127.0.0.1:8080`.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// A catalog to serve, `NAME=DIR` (DIR is an FBC directory tree); repeatable.
    #[arg(long = "catalog", value_name = "NAME=DIR", required = true)]
    pub catalogs: Vec<String>,
    /// The catalog server's certificate and TLS profile.
    #[command(flatten)]
    pub tls: ServingTlsArgs,
    /// Where the served content is written (a temporary directory by default).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Largest single catalog file read, in bytes (checked before it is read).
    #[arg(long, default_value_t = UnpackLimits::CATALOG.max_file_bytes)]
    pub max_file_bytes: u64,
    /// What clients can make the server hold.
    #[command(flatten)]
    pub limits: ServeLimitArgs,
}

/// Stores each directory's catalog and serves them until `shutdown` completes; `listening` is
/// told the catalogs' base URL once the server listens.
pub async fn serve_directories(
    settings: StandaloneSettings,
    listening: impl FnOnce(&str),
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let profile = tls_profile(&settings.tls.profile)?;
    let catalogs = (settings.catalogs.iter())
        .map(|pair| {
            pair.split_once('=')
                .map(|(name, dir)| (name.to_string(), PathBuf::from(dir)))
                .ok_or_else(|| format!("--catalog {pair:?} must be NAME=DIR"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let tls = settings.tls.files();
    let acceptor = catalog_acceptor(tls.as_ref(), &profile)?;
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
            .with_max_line_bytes(settings.limits.max_jsonl_line_bytes),
    );
    for (name, dir) in catalogs {
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
    announce(&listener, tls.is_some(), listening);
    serve(listener, store, acceptor, settings.limits.limits(), shutdown)
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
        #[derive(clap::Parser)]
        struct Serve {
            #[command(flatten)]
            settings: StandaloneSettings,
        }
        let catalog = format!("demo={}", fbc.path().display());
        let settings =
            <Serve as clap::Parser>::parse_from(["serve", "--listen=127.0.0.1:0", "--catalog", &catalog])
                .settings;
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
