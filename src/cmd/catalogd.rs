//! `olmv1 catalogd`: the flags of the catalog server, which either reconciles ClusterCatalogs
//! from a cluster (default) or serves local FBC directories (`olmv1 catalogd serve`); both run
//! in `components::catalogd`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use super::start::{LeaderTimingArgs, TlsProfileArgs, load_registries_conf, parse_bind_address};
use crate::catalog::DEFAULT_MAX_JSONL_LINE_BYTES;
use crate::catalog::server::{ServeLimits, TlsFiles};
use crate::components::{
    catalogd::{self, ClusterSettings, StandaloneSettings},
    shutdown_signal,
};
use crate::image::pull_secret::PullSecretArgs;
use crate::image::{RegistryConfig, RegistryOptions, UnpackLimits};

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
    /// Serving certificate (PEM); with --tls-key, the server speaks HTTPS.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Serving key (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The TLS profile of the catalog and metrics servers.
    #[command(flatten)]
    pub tls: TlsProfileArgs,
    #[command(flatten)]
    pub registry: RegistryArgs,
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
            registries_conf: load_registries_conf(self.registries_conf.as_deref())?,
            ..config
        })
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
    /// The TLS profile of the catalog server.
    #[command(flatten)]
    pub tls: TlsProfileArgs,
    /// Where the served content is written (a temporary directory by default).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Largest single catalog file read, in bytes (checked before it is read).
    #[arg(long, default_value_t = UnpackLimits::CATALOG.max_file_bytes)]
    pub max_file_bytes: u64,
    #[command(flatten)]
    pub limits: ServeLimitArgs,
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

/// Runs `olmv1 catalogd`.
pub async fn run(args: CatalogdArgs) -> ExitCode {
    let result = match args.command {
        Some(CatalogdCommand::Serve(serve_args)) => run_standalone(serve_args).await,
        None => run_cluster(args.cluster).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            errln!("olmv1 catalogd: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run_standalone(args: ServeArgs) -> Result<(), String> {
    let profile = args.tls.profile()?;
    let catalogs = args
        .catalogs
        .iter()
        .map(|pair| {
            pair.split_once('=')
                .map(|(name, dir)| (name.to_string(), PathBuf::from(dir)))
                .ok_or_else(|| format!("--catalog {pair:?} must be NAME=DIR"))
        })
        .collect::<Result<_, _>>()?;
    let settings = StandaloneSettings {
        listen: args.listen,
        catalogs,
        tls: tls_files(args.tls_cert, args.tls_key),
        profile,
        cache_dir: args.cache_dir,
        max_file_bytes: args.max_file_bytes,
        serve_limits: args.limits.limits(),
        max_jsonl_line_bytes: args.limits.max_jsonl_line_bytes,
    };
    catalogd::serve_directories(settings, announce, shutdown_signal()).await
}

async fn run_cluster(args: ClusterArgs) -> Result<(), String> {
    let profile = args.tls.profile()?;
    let settings = ClusterSettings {
        catalogs_server_addr: args.catalogs_server_addr,
        metrics_addr: args.metrics_addr,
        probe_addr: args.probe_addr,
        metrics_insecure: args.metrics_insecure,
        external_address: args.external_address,
        cache_dir: args.cache_dir,
        tls: tls_files(args.tls_cert, args.tls_key),
        profile,
        registry: args.registry.registry_config()?,
        unpack_limits: UnpackLimits {
            max_total_bytes: args.registry.max_unpacked_bytes,
            max_entries: args.registry.max_unpacked_entries,
            max_file_bytes: args.registry.max_file_bytes,
        },
        serve_limits: args.limits.limits(),
        max_jsonl_line_bytes: args.limits.max_jsonl_line_bytes,
        pull_secrets: args.pull_secrets.sources(),
        leader_election: args.leader_timings.election(args.leader_elect)?,
        leader_election_namespace: args.leader_election_namespace,
        selector: args.selector,
        poll_unit: Duration::from_secs(args.poll_interval_unit_seconds.max(1)),
    };
    catalogd::run_cluster(settings, announce).await
}

fn tls_files(cert: Option<PathBuf>, key: Option<PathBuf>) -> Option<TlsFiles> {
    Some(TlsFiles {
        cert: cert?,
        key: key?,
    })
}

fn announce(url: &str) {
    outln!("serving catalogs on {url}");
}
