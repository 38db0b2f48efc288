//! `olmv1 controller`: the ClusterExtension controller and the Upgradeable reconciler of one
//! replica, with leader election, `/healthz` `/readyz`, `/metrics`, and graceful shutdown.

use std::{net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use prometheus_client::registry::Registry;
use tracing::info;

use super::{replica::Replica, tls_profile};
use crate::{
    apply::{
        identity::{InstallIdentity, InstallerClients, ServiceAccountClients},
        revision::RevisionStore,
    },
    bundle::render::WebhookProvider,
    catalog::{
        DEFAULT_MAX_JSONL_LINE_BYTES, cache::CachedCatalogClient, client::CatalogClient, server::TlsFiles,
    },
    controller::{
        cluster_extension::{self, Context, DependencyMode, operator_conditions::OperatorConditionsMode},
        metrics::{Metrics, register_leader},
        upgradeable::{self, UpgradeableArgs, UpgradeableConfig, UpgradeableMetrics},
    },
    image::{
        self, BundleLimitArgs, RegistriesConf, RegistryOptions, cache::PullOptions,
        pull_secret::PullSecretArgs,
    },
    leader::LeaderTimingArgs,
    operations::{OperationsSettings, parse_bind_address, start_servers},
    tls_profile::TlsProfileArgs,
};

/// The leader election Lease of the controller.
const LEASE_NAME: &str = "olmv1-controller";

/// What `olmv1 controller`'s flags set.
#[derive(clap::Args, Debug)]
pub struct ControllerSettings {
    /// Namespace of the controller's own objects: revision records and the leader Lease.
    #[arg(long, env = "OLMV1_SYSTEM_NAMESPACE", default_value = "olmv1-system")]
    pub system_namespace: String,
    /// Address of the /metrics server (upstream's flag; `--metrics-addr` is its old name): HTTPS
    /// for callers allowed `get` on /metrics with --tls-cert and --tls-key; otherwise plain HTTP,
    /// on a loopback address or with --metrics-insecure.
    #[arg(
        long = "metrics-bind-address",
        alias = "metrics-addr",
        env = "OLMV1_METRICS_ADDR",
        default_value = "127.0.0.1:8080",
        value_parser = parse_bind_address
    )]
    pub metrics_addr: SocketAddr,
    /// Address of the /healthz and /readyz server (plain HTTP, no authentication).
    #[arg(
        long = "health-probe-bind-address",
        env = "OLMV1_PROBE_ADDR",
        default_value = "127.0.0.1:8090",
        value_parser = parse_bind_address
    )]
    pub probe_addr: SocketAddr,
    /// Serve /metrics in plain HTTP to anyone, on any address (local runs without certificates).
    #[arg(long)]
    pub metrics_insecure: bool,
    /// The metrics server's certificate (PEM); with --tls-key, /metrics is served over HTTPS.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The metrics server's key (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The TLS profile of the metrics server; its minimum also bounds the registry and catalog
    /// clients.
    #[command(flatten)]
    pub tls: TlsProfileArgs,
    /// Elect a leader on a Lease before reconciling (for more than one replica).
    #[arg(long, env = "OLMV1_LEADER_ELECT", default_value_t = false)]
    pub leader_elect: bool,
    /// The leader election's durations.
    #[command(flatten)]
    pub leader_timings: LeaderTimingArgs,
    /// How many ClusterExtensions are reconciled at once.
    #[arg(long, env = "OLMV1_CONCURRENCY", default_value_t = 4)]
    pub concurrency: u16,
    /// Where pulled bundle images are unpacked, one directory per digest.
    #[arg(long, env = "OLMV1_CACHE_DIR", default_value = "/var/cache/olmv1")]
    pub cache_dir: PathBuf,
    /// Seconds a cached bundle image that no revision record names is kept after it was
    /// written, before a sweep deletes it (a reconcile may not have recorded it yet).
    #[arg(
        long,
        value_name = "SECONDS",
        env = "OLMV1_BUNDLE_CACHE_GRACE",
        default_value_t = cluster_extension::BUNDLE_CACHE_GRACE.as_secs()
    )]
    pub bundle_cache_grace: u64,
    /// Registries reached over plain HTTP (host:port); loopback registries always may be.
    #[arg(
        long = "insecure-registry",
        env = "OLMV1_INSECURE_REGISTRIES",
        value_delimiter = ','
    )]
    pub insecure_registries: Vec<String>,
    /// Extra CA certificates (PEM) trusted for registries and catalog servers.
    #[arg(long = "ca-file", env = "OLMV1_CA_FILE")]
    pub ca_files: Vec<PathBuf>,
    /// Docker/Podman auth file with registry credentials (`{"auths":{...}}`).
    #[arg(long, value_name = "PATH", env = "REGISTRY_AUTH_FILE")]
    pub auth_file: Option<PathBuf>,
    /// containers-registries.conf(5) file: registry mirrors, remapped, blocked and insecure
    /// registries for image pulls (default: /etc/containers/registries.conf when present).
    #[arg(long, value_name = "PATH", env = "CONTAINERS_REGISTRIES_CONF")]
    pub registries_conf: Option<PathBuf>,
    /// The global pull secret and the controller's ServiceAccount pull secrets.
    #[command(flatten)]
    pub pull_secrets: PullSecretArgs,
    /// What a bundle image may hold.
    #[command(flatten)]
    pub bundle_limits: BundleLimitArgs,
    /// Who provides the serving certificates of bundles' webhooks: cert-manager, or OpenShift's
    /// service CA (`openshift-service-ca`).
    #[arg(
        long,
        env = "OLMV1_WEBHOOK_PROVIDER",
        value_enum,
        default_value = "cert-manager"
    )]
    pub webhook_provider: WebhookProvider,
    /// Bundles that declare dependencies: `refuse` them as upstream does, or `check` that
    /// installed extensions (or the cluster's APIs) satisfy them, and refuse upgrades that would
    /// break an installed dependent.
    #[arg(long, env = "OLMV1_DEPENDENCIES", value_enum, default_value = "check")]
    pub dependencies: DependencyMode,
    /// Whose identity writes bundle content: each extension's spec.serviceAccount
    /// (`service-account`, least privilege; an extension without one is not installed), or the
    /// controller's own (`controller`, upstream v1.11's model: spec.serviceAccount is ignored;
    /// needs the RBAC of the controller-identity install manifest).
    #[arg(
        long,
        env = "OLMV1_INSTALL_IDENTITY",
        value_enum,
        default_value = "service-account"
    )]
    pub install_identity: InstallIdentity,
    /// OLM classic's OperatorConditions: keep one per installed bundle (its Deployments get
    /// OPERATOR_CONDITION_NAME, its accounts access to it) and hold upgrades while it says
    /// Upgradeable=False. `install` creates the CRD when absent, `use` needs it served, `off`
    /// keeps none (upstream). Default: `use` when the CRD is served at start, else `off`.
    #[arg(long, env = "OLMV1_OPERATOR_CONDITIONS", value_enum)]
    pub operator_conditions: Option<OperatorConditionsMode>,
    /// Upgradeable gating (olm.maxOpenShiftVersion).
    #[command(flatten)]
    pub upgradeable: UpgradeableArgs,
    /// Longest line of a catalog's JSONL (one meta) read from catalogd, in bytes; a catalog
    /// with a longer one is refused.
    #[arg(long, env = "OLMV1_MAX_JSONL_LINE_BYTES", default_value_t = DEFAULT_MAX_JSONL_LINE_BYTES)]
    pub max_jsonl_line_bytes: usize,
    /// Seconds in one `progressDeadlineMinutes` unit (60; shorter values are for tests: the
    /// field's minimum of 10 stays for users).
    #[arg(long, default_value_t = cluster_extension::PROGRESS_DEADLINE_UNIT.as_secs(), hide = true)]
    pub progress_deadline_unit_seconds: u64,
    /// Seconds between drift checks of the objects of kinds the controller does not watch (1,800;
    /// shorter values are for tests).
    #[arg(long, default_value_t = cluster_extension::DRIFT_CHECK.as_secs(), hide = true)]
    pub drift_check_seconds: u64,
}

/// Runs the controller until SIGTERM/SIGINT (after finishing its reconciles); an error when it
/// cannot start, loses leadership or its operations servers stop.
pub async fn run(settings: ControllerSettings) -> Result<(), String> {
    let profile = tls_profile(&settings.tls)?;
    let leader_election = (settings.leader_timings)
        .election(settings.leader_elect)
        .map_err(|e| e.to_string())?;
    let ControllerSettings {
        system_namespace,
        metrics_addr,
        probe_addr,
        metrics_insecure,
        tls_cert,
        tls_key,
        concurrency,
        cache_dir,
        bundle_cache_grace,
        insecure_registries,
        ca_files,
        auth_file,
        registries_conf,
        pull_secrets,
        bundle_limits,
        webhook_provider,
        dependencies,
        install_identity,
        operator_conditions,
        upgradeable,
        max_jsonl_line_bytes,
        progress_deadline_unit_seconds,
        drift_check_seconds,
        ..
    } = settings;
    let metrics_tls = tls_cert.zip(tls_key).map(|(cert, key)| TlsFiles { cert, key });
    let bundle_cache_grace = Duration::from_secs(bundle_cache_grace);
    let progress_deadline_unit = Duration::from_secs(progress_deadline_unit_seconds.max(1));
    let drift_check = Duration::from_secs(drift_check_seconds.max(1));
    let replica = Replica::connect("controller", leader_election, &system_namespace, LEASE_NAME).await?;
    let client = replica.client.clone();

    let catalog_client =
        CatalogClient::with_min_tls_version(&read_ca_files(&ca_files)?, profile.client_min_version())
            .map_err(|e| e.to_string())?
            .with_max_line_bytes(max_jsonl_line_bytes);
    let mut registry_config = RegistryOptions {
        insecure_registries,
        ca_paths: ca_files.iter().map(PathBuf::as_path).collect(),
        auth_file: auth_file.as_deref(),
    }
    .config()?;
    registry_config.min_tls_version = profile.client_min_version();
    registry_config.registries_conf =
        RegistriesConf::configured(registries_conf.as_deref()).map_err(|e| e.to_string())?;
    let pull = PullOptions {
        registry: registry_config,
        limits: bundle_limits.limits(),
        ..PullOptions::new(cache_dir)
    };
    let upgradeable_config = UpgradeableConfig::from_args(&upgradeable, system_namespace.clone())
        .map_err(|e| format!("invalid --cluster-version: {e}"))?;

    let mut registry = Registry::default();
    let metrics = Arc::new(Metrics::register(&mut registry));
    register_leader(&mut registry, "controller", replica.leadership.clone());
    let upgradeable_metrics = UpgradeableMetrics::register(&mut registry);
    let operations = OperationsSettings {
        probe_addr,
        metrics_addr,
        metrics_insecure,
        tls: metrics_tls.as_ref(),
        profile: &profile,
    };
    let (readiness, server) = start_servers(operations, registry, &replica.config).await?;

    replica.acquire().await?;

    // Registry credentials from the pull secrets, kept current (shared with `pull`).
    image::pull_secret::start(&client, pull_secrets.sources(), &pull.registry.credentials).await;
    let service_accounts =
        ServiceAccountClients::new(client.clone(), replica.config.clone(), replica.leadership.clone())
            .map_err(|e| format!("building the service accounts' API server connections: {e}"))?;
    let identities = InstallerClients::new(install_identity, client.clone(), service_accounts);
    let operator_conditions = cluster_extension::operator_conditions::start(&client, operator_conditions)
        .await
        .map_err(|e| e.to_string())?;
    let ctx = Arc::new(Context {
        webhook_provider,
        dependencies,
        operator_conditions,
        bundle_cache_grace,
        progress_deadline_unit,
        drift_check,
        ..Context::new(
            client.clone(),
            identities,
            RevisionStore::new(client.clone(), &system_namespace),
            Arc::new(CachedCatalogClient::new(catalog_client)),
            pull,
            metrics,
        )
    });
    readiness.set_ready(true);
    info!(%system_namespace, ?install_identity, "olmv1 controller started");

    let gating = tokio::spawn(upgradeable::run(
        client.clone(),
        upgradeable_config,
        upgradeable_metrics,
        ctx.lookups.discovery_changes(),
    ));
    tokio::select! {
        // The ClusterExtension controller stops on SIGTERM/SIGINT after finishing its reconciles.
        _ = cluster_extension::run(ctx, concurrency) => {
            gating.abort();
            info!("controllers stopped");
            replica.release().await;
        }
        lost = replica.lost() => return Err(lost),
        stopped = server => return Err(stopped.unwrap_or_else(|e| format!("the operations servers failed: {e}"))),
    }
    Ok(())
}

/// Reads each CA file (PEM).
fn read_ca_files(files: &[PathBuf]) -> Result<Vec<Vec<u8>>, String> {
    files
        .iter()
        .map(|file| std::fs::read(file).map_err(|e| format!("cannot read CA file {}: {e}", file.display())))
        .collect()
}
