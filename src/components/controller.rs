//! `olmv1 controller`: the ClusterExtension controller and the Upgradeable reconciler of one
//! replica, with leader election, `/healthz` `/readyz`, `/metrics`, and graceful shutdown.

use std::{net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use prometheus_client::registry::Registry;
use tracing::info;

use super::replica::Replica;
use crate::{
    apply::{
        identity::{InstallIdentity, InstallerClients, ServiceAccountClients},
        revision::RevisionStore,
    },
    bundle::render::WebhookProvider,
    catalog::{cache::CachedCatalogClient, client::CatalogClient, server::TlsFiles},
    controller::{
        cluster_extension::{self, Context, DependencyMode, operator_conditions::OperatorConditionsMode},
        metrics::{Metrics, register_leader},
        upgradeable::{self, UpgradeableArgs, UpgradeableConfig, UpgradeableMetrics},
    },
    image::{
        self, RegistriesConf, RegistryOptions, UnpackLimits, cache::PullOptions,
        pull_secret::PullSecretSources,
    },
    leader::LeaderTimings,
    operations::{OperationsSettings, start_servers},
    tls_profile::TlsProfile,
};

/// The leader election Lease of the controller.
const LEASE_NAME: &str = "olmv1-controller";

/// What `olmv1 controller`'s flags set.
pub struct ControllerSettings {
    /// The controller's own objects: revision records and the leader Lease.
    pub system_namespace: String,
    /// `/metrics`.
    pub metrics_addr: SocketAddr,
    /// `/healthz` and `/readyz`.
    pub probe_addr: SocketAddr,
    /// `/metrics` in plain HTTP to anyone, on any address.
    pub metrics_insecure: bool,
    /// The metrics server's certificate: HTTPS for authorised callers.
    pub metrics_tls: Option<TlsFiles>,
    /// The TLS profile of the metrics server; its minimum also bounds the registry and catalog
    /// clients.
    pub profile: TlsProfile,
    /// Elect a leader on a Lease, with these timings, before reconciling.
    pub leader_election: Option<LeaderTimings>,
    /// How many ClusterExtensions are reconciled at once.
    pub concurrency: u16,
    /// Where pulled bundle images are unpacked.
    pub cache_dir: PathBuf,
    /// How long a cached bundle image no revision record names is kept.
    pub bundle_cache_grace: Duration,
    /// Registries reached over plain HTTP.
    pub insecure_registries: Vec<String>,
    /// Extra CA certificates trusted for registries and catalog servers.
    pub ca_files: Vec<PathBuf>,
    /// Docker/Podman auth file.
    pub auth_file: Option<PathBuf>,
    /// containers-registries.conf(5) file (see [`RegistriesConf::configured`]).
    pub registries_conf: Option<PathBuf>,
    /// The global pull secret and the controller's ServiceAccount pull secrets.
    pub pull_secrets: PullSecretSources,
    /// What a bundle image may hold.
    pub bundle_limits: UnpackLimits,
    /// Who provides the serving certificates of bundles' webhooks.
    pub webhook_provider: WebhookProvider,
    /// What a bundle's dependencies mean.
    pub dependencies: DependencyMode,
    /// Whose identity writes bundle content.
    pub install_identity: InstallIdentity,
    /// Whether OperatorConditions are kept (`None`: when the CRD is served at start).
    pub operator_conditions: Option<OperatorConditionsMode>,
    /// Upgradeable gating.
    pub upgradeable: UpgradeableArgs,
    /// Longest meta of a catalog read from catalogd, as one JSONL line.
    pub max_jsonl_line_bytes: usize,
    /// One `progressDeadlineMinutes` unit.
    pub progress_deadline_unit: Duration,
    /// How often the drift check runs.
    pub drift_check: Duration,
}

/// Runs the controller until SIGTERM/SIGINT (after finishing its reconciles); an error when it
/// cannot start, loses leadership or its operations servers stop.
pub async fn run(settings: ControllerSettings) -> Result<(), String> {
    let ControllerSettings {
        system_namespace,
        metrics_addr,
        probe_addr,
        metrics_insecure,
        metrics_tls,
        profile,
        leader_election,
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
        progress_deadline_unit,
        drift_check,
    } = settings;
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
        limits: bundle_limits,
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
    image::pull_secret::start(&client, pull_secrets, &pull.registry.credentials).await;
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
