//! `olmv1 catalogd`: runs the catalog server, either reconciling ClusterCatalogs from a cluster
//! (default) or serving local FBC directories (`olmv1 catalogd serve`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use super::server::{CatalogStore, TlsFiles, serve};
use crate::bundle::image::pull_secret::{self, PullSecretArgs};
use crate::bundle::image::{RegistryClient, RegistryConfig, UnpackLimits};
use crate::controller::cluster_catalog::{CatalogdSettings, Context};
use crate::controller::leader::{LeaderElector, Leadership, identify, replica_identity};
use crate::controller::metrics::{Readiness, ReconcileMetrics, serve_operations};

/// The leader election Lease of catalogd (upstream's name).
const LEASE_NAME: &str = "catalogd-operator-lock";

/// Arguments of `olmv1 catalogd`.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct CatalogdArgs {
    /// Standalone mode.
    #[command(subcommand)]
    pub command: Option<CatalogdCommand>,
    /// Cluster mode settings.
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// Subcommands of `olmv1 catalogd`.
#[derive(clap::Subcommand, Debug)]
pub enum CatalogdCommand {
    /// Serves FBC directories with no cluster: `--catalog NAME=DIR` (repeatable).
    Serve(ServeArgs),
}

/// Cluster mode: reconcile ClusterCatalogs (kubeconfig from `KUBECONFIG` or in-cluster).
#[derive(clap::Args, Debug)]
pub struct ClusterArgs {
    /// Address the catalog server listens on (`:8443` means all interfaces).
    #[arg(long, default_value = ":8443")]
    pub catalogs_server_addr: String,
    /// Address of the /metrics, /healthz and /readyz server.
    #[arg(long, env = "OLMV1_CATALOGD_METRICS_ADDR", default_value = "127.0.0.1:8081")]
    pub metrics_addr: SocketAddr,
    /// Host (and port) clients reach the server at; published in `status.urls.base` as
    /// `<scheme>://<external-address>/catalogs/<name>`.
    #[arg(long, default_value = "catalogd-service.olmv1-system.svc")]
    pub external_address: String,
    /// Directory for unpacked images and served content.
    #[arg(long, default_value = "/var/cache/catalogd")]
    pub cache_dir: PathBuf,
    /// Serving certificate (PEM); with --tls-key, the server speaks HTTPS.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Serving key (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    #[command(flatten)]
    pub registry: RegistryArgs,
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
    /// Reconcile only the ClusterCatalogs matching this label selector (all by default).
    #[arg(long, default_value = "")]
    pub selector: String,
    /// Seconds in one `pollIntervalMinutes` unit (60; shorter values are for tests).
    #[arg(long, default_value_t = 60, hide = true)]
    pub poll_interval_unit_seconds: u64,
}

/// How catalog images are pulled.
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
    /// Largest total uncompressed size of an image, in bytes.
    #[arg(long, default_value_t = UnpackLimits::default().max_total_bytes)]
    pub max_unpacked_bytes: u64,
}

impl RegistryArgs {
    /// The registry configuration these flags describe.
    pub fn registry_config(&self) -> Result<RegistryConfig, String> {
        let mut config = RegistryConfig {
            insecure_registries: self.insecure_registries.clone(),
            ..Default::default()
        };
        if let Some(path) = &self.pull_cas_dir {
            config
                .add_ca_path(path)
                .map_err(|e| format!("reading CAs from {}: {e}", path.display()))?;
        }
        if let Some(path) = &self.auth_file {
            config.add_auth_file(path)?;
        }
        Ok(config)
    }
}

/// `olmv1 catalogd serve`.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on, e.g. `127.0.0.1:8080`.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// A catalog to serve, `NAME=DIR` (DIR is an FBC directory tree); repeatable.
    #[arg(long = "catalog", value_name = "NAME=DIR", required = true)]
    pub catalogs: Vec<String>,
    /// Serving certificate (PEM); with --tls-key, the server speaks HTTPS.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Serving key (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Where the served content is written (a temporary directory by default).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
}

/// Runs `olmv1 catalogd`.
pub async fn run(args: CatalogdArgs) -> ExitCode {
    let result = match args.command {
        Some(CatalogdCommand::Serve(serve_args)) => run_standalone(serve_args).await,
        None => run_cluster(args.cluster).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("olmv1 catalogd: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run_standalone(args: ServeArgs) -> Result<(), String> {
    let tls = tls_files(args.tls_cert, args.tls_key);
    let temp;
    let root = match args.cache_dir {
        Some(dir) => dir,
        None => {
            temp = tempfile::Builder::new()
                .prefix("olmv1-catalogd-")
                .tempdir()
                .map_err(|e| format!("creating a temporary directory: {e}"))?;
            temp.path().to_path_buf()
        }
    };
    let store = Arc::new(CatalogStore::new(&root).map_err(|e| format!("preparing {}: {e}", root.display()))?);
    for pair in &args.catalogs {
        let (name, dir) = pair
            .split_once('=')
            .ok_or_else(|| format!("--catalog {pair:?} must be NAME=DIR"))?;
        let (store, name, dir) = (store.clone(), name.to_string(), PathBuf::from(dir));
        let started = std::time::Instant::now();
        let stored = tokio::task::spawn_blocking(move || store.store_from_dir(&name, &dir))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        tracing::info!(
            catalog = %stored.name, metas = stored.meta_count, bytes = stored.jsonl_len(),
            elapsed_ms = started.elapsed().as_millis() as u64, "catalog stored"
        );
    }
    let listener = bind(&args.listen).await?;
    announce(&listener, tls.is_some());
    serve(listener, store, tls, shutdown_signal())
        .await
        .map_err(|e| e.to_string())
}

async fn run_cluster(args: ClusterArgs) -> Result<(), String> {
    let tls = tls_files(args.tls_cert, args.tls_key);
    let scheme = if tls.is_some() { "https" } else { "http" };
    let store = Arc::new(
        CatalogStore::new(&args.cache_dir.join("catalogs"))
            .map_err(|e| format!("preparing {}: {e}", args.cache_dir.display()))?,
    );
    let registry_config = args.registry.registry_config()?;
    let credentials = registry_config.credentials.clone();
    let registry = RegistryClient::new(registry_config).map_err(|e| e.to_string())?;
    let identity = replica_identity("catalogd");
    let mut config = kube::Config::infer()
        .await
        .map_err(|e| format!("connecting to the cluster: {e}"))?;
    identify(&mut config, "catalogd", &identity);
    // The reconciler's client stops with the Lease (see leader.rs); the elector's does not.
    let leadership = if args.leader_elect {
        Leadership::elected()
    } else {
        Leadership::unelected()
    };
    let client = leadership
        .client(config.clone())
        .map_err(|e| format!("connecting to the cluster: {e}"))?;
    let lease_client =
        kube::Client::try_from(config).map_err(|e| format!("connecting to the cluster: {e}"))?;
    let settings = CatalogdSettings {
        base_url: format!("{scheme}://{}", args.external_address.trim_end_matches('/')),
        image_cache_dir: args.cache_dir.join("unpack"),
        unpack_limits: UnpackLimits {
            max_total_bytes: args.registry.max_unpacked_bytes,
            ..Default::default()
        },
        poll_unit: Duration::from_secs(args.poll_interval_unit_seconds.max(1)),
        selector: args.selector,
    };
    let mut metrics_registry = prometheus_client::registry::Registry::default();
    let metrics = Arc::new(ReconcileMetrics::register(
        &mut metrics_registry,
        "olmv1_clustercatalog",
    ));
    let readiness = Readiness::default();
    tokio::spawn(serve_operations(
        args.metrics_addr,
        metrics_registry,
        readiness.clone(),
    ));
    let context = Arc::new(
        Context::new(client.clone(), store.clone(), Arc::new(registry), settings).with_metrics(metrics),
    );
    let listener = bind(&args.catalogs_server_addr).await?;
    announce(&listener, tls.is_some());
    let (stop_server, server_stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, store, tls, async move {
        let _ = server_stopped.await;
    }));
    let elector = LeaderElector::new(
        lease_client,
        &args.leader_election_namespace,
        LEASE_NAME,
        &identity,
        leadership,
    );
    if args.leader_elect {
        tracing::info!(%identity, "waiting for leadership");
        tokio::select! {
            acquired = elector.acquire() => acquired.map_err(|e| e.to_string())?,
            () = shutdown_signal() => {
                let _ = stop_server.send(());
                return Ok(());
            }
        }
    }
    // Registry credentials from the pull secrets, kept current (shared with `registry`).
    pull_secret::start(&client, args.pull_secrets.sources(), &credentials).await;
    readiness.set_ready(true);
    // The controller stops on SIGINT/SIGTERM; then the server drains.
    let lost = tokio::select! {
        () = crate::controller::cluster_catalog::run(context) => None,
        lost = elector.hold(), if args.leader_elect => Some(lost),
    };
    let _ = stop_server.send(());
    if let Some(lost) = lost {
        return Err(format!("{lost}; exiting so another replica can lead"));
    }
    match server.await {
        Ok(result) => result.map_err(|e| e.to_string()),
        Err(e) => Err(format!("catalog server task failed: {e}")),
    }
}

fn tls_files(cert: Option<PathBuf>, key: Option<PathBuf>) -> Option<TlsFiles> {
    Some(TlsFiles {
        cert: cert?,
        key: key?,
    })
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

fn announce(listener: &tokio::net::TcpListener, tls: bool) {
    if let Ok(addr) = listener.local_addr() {
        let scheme = if tls { "https" } else { "http" };
        tracing::info!(address = %addr, "catalog server listening");
        println!("serving catalogs on {scheme}://{addr}/catalogs/");
    }
}

/// Completes on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}
