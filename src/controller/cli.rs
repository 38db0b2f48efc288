//! `olmv1 controller`: runs the ClusterExtension controller and the Upgradeable reconciler, with
//! leader election, `/healthz` `/readyz` `/metrics`, and graceful shutdown.

use std::{net::SocketAddr, path::PathBuf, process::ExitCode, sync::Arc};

use kube::{Client, Config};
use prometheus_client::registry::Registry;
use tracing::{error, info};

use super::{
    cluster_extension::{self, Context},
    leader::{LeaderElector, Leadership, identify, replica_identity},
    metrics::{Metrics, Readiness, serve_operations},
    upgradeable::{self, UpgradeableArgs, UpgradeableConfig, UpgradeableMetrics},
};
use crate::{
    apply::{identity::ServiceAccountClients, revision::RevisionStore},
    bundle::{
        image::{self, cache::PullOptions, pull_secret::PullSecretArgs, registry::RegistryConfig},
        render::WebhookProvider,
    },
    catalog::{cache::CachedCatalogClient, client::CatalogClient},
};

/// Arguments of `olmv1 controller`.
#[derive(clap::Args, Debug)]
pub struct ControllerArgs {
    /// Namespace of the controller's own objects: revision records and the leader Lease.
    #[arg(long, env = "OLMV1_SYSTEM_NAMESPACE", default_value = "olmv1-system")]
    pub system_namespace: String,
    /// Address of the /metrics, /healthz and /readyz server.
    #[arg(long, env = "OLMV1_METRICS_ADDR", default_value = "127.0.0.1:8080")]
    pub metrics_addr: SocketAddr,
    /// Elect a leader on a Lease before reconciling (for more than one replica).
    #[arg(long, env = "OLMV1_LEADER_ELECT", default_value_t = false)]
    pub leader_elect: bool,
    /// How many ClusterExtensions are reconciled at once.
    #[arg(long, env = "OLMV1_CONCURRENCY", default_value_t = 4)]
    pub concurrency: u16,
    /// Where pulled bundle images are unpacked, one directory per digest.
    #[arg(long, env = "OLMV1_CACHE_DIR", default_value = "/var/cache/olmv1")]
    pub cache_dir: PathBuf,
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
    /// The global pull secret and the controller's ServiceAccount pull secrets.
    #[command(flatten)]
    pub pull_secrets: PullSecretArgs,
    /// Who provides the serving certificates of bundles' webhooks: cert-manager, or OpenShift's
    /// service CA (`openshift-service-ca`).
    #[arg(
        long,
        env = "OLMV1_WEBHOOK_PROVIDER",
        value_enum,
        default_value = "cert-manager"
    )]
    pub webhook_provider: WebhookProvider,
    /// Upgradeable gating (olm.maxOpenShiftVersion).
    #[command(flatten)]
    pub upgradeable: UpgradeableArgs,
}

/// Runs `olmv1 controller` until SIGTERM/SIGINT.
pub async fn run(args: ControllerArgs) -> ExitCode {
    match run_controller(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            error!("{message}");
            eprintln!("olmv1 controller: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run_controller(args: ControllerArgs) -> Result<(), String> {
    let ControllerArgs {
        system_namespace,
        metrics_addr,
        leader_elect,
        concurrency,
        cache_dir,
        insecure_registries,
        ca_files,
        auth_file,
        pull_secrets,
        webhook_provider,
        upgradeable,
    } = args;
    let identity = replica_identity("controller");
    let mut config = Config::infer()
        .await
        .map_err(|e| format!("cannot find a Kubernetes configuration: {e}"))?;
    identify(&mut config, "controller", &identity);
    // Every client that reconciles is guarded: it stops with the Lease (see leader.rs).
    let leadership = if leader_elect {
        Leadership::elected()
    } else {
        Leadership::unelected()
    };
    let client = leadership
        .client(config.clone())
        .map_err(|e| format!("cannot build a Kubernetes client: {e}"))?;

    let mut ca_pems = Vec::new();
    for file in &ca_files {
        ca_pems
            .push(std::fs::read(file).map_err(|e| format!("cannot read CA file {}: {e}", file.display()))?);
    }
    let catalog_client = CatalogClient::new(&ca_pems).map_err(|e| e.to_string())?;
    let mut registry_config = RegistryConfig {
        insecure_registries,
        ..RegistryConfig::default()
    };
    for file in &ca_files {
        registry_config
            .add_ca_path(file)
            .map_err(|e| format!("cannot read CA file {}: {e}", file.display()))?;
    }
    if let Some(path) = &auth_file {
        registry_config.add_auth_file(path)?;
    }
    let pull = PullOptions {
        registry: registry_config,
        ..PullOptions::new(cache_dir)
    };
    let upgradeable_config = UpgradeableConfig::from_args(&upgradeable, system_namespace.clone())
        .map_err(|e| format!("invalid --cluster-version: {e}"))?;

    let mut registry = Registry::default();
    let metrics = Arc::new(Metrics::register(&mut registry));
    let upgradeable_metrics = UpgradeableMetrics::register(&mut registry);
    let readiness = Readiness::default();
    let server = tokio::spawn(serve_operations(metrics_addr, registry, readiness.clone()));

    let lease_client =
        Client::try_from(config.clone()).map_err(|e| format!("cannot build a Kubernetes client: {e}"))?;
    let elector = LeaderElector::new(
        lease_client,
        &system_namespace,
        "olmv1-controller",
        &identity,
        leadership.clone(),
    );
    if leader_elect {
        info!(%identity, "waiting for leadership");
        elector.acquire().await.map_err(|e| e.to_string())?;
    }

    // Registry credentials from the pull secrets, kept current (shared with `pull`).
    image::pull_secret::start(&client, pull_secrets.sources(), &pull.registry.credentials).await;
    let ctx = Arc::new(Context {
        webhook_provider,
        ..Context::new(
            client.clone(),
            ServiceAccountClients::new(client.clone(), config, leadership),
            RevisionStore::new(client.clone(), &system_namespace),
            Arc::new(CachedCatalogClient::new(catalog_client)),
            pull,
            metrics,
        )
    });
    readiness.set_ready(true);
    info!(%system_namespace, "olmv1 controller started");

    let gating = tokio::spawn(upgradeable::run(
        client.clone(),
        upgradeable_config,
        upgradeable_metrics,
    ));
    tokio::select! {
        // The ClusterExtension controller stops on SIGTERM/SIGINT after finishing its reconciles.
        _ = cluster_extension::run(ctx, concurrency) => {
            gating.abort();
            info!("controllers stopped");
        }
        lost = elector.hold(), if leader_elect => return Err(format!("{lost}; exiting so another replica can lead")),
        result = server => return Err(format!("operations server stopped: {result:?}")),
    }
    Ok(())
}
