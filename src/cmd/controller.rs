//! `olmv1 controller`: the flags of the ClusterExtension controller and the Upgradeable
//! reconciler, which run in `components::controller` (leader election, `/healthz` `/readyz`,
//! `/metrics` over HTTPS for authorised callers, graceful shutdown).

use std::{net::SocketAddr, path::PathBuf, process::ExitCode, time::Duration};

use tracing::error;

use super::start::{BundleLimitArgs, LeaderTimingArgs, TlsProfileArgs, parse_bind_address};
use crate::{
    apply::identity::InstallIdentity,
    bundle::render::WebhookProvider,
    catalog::{DEFAULT_MAX_JSONL_LINE_BYTES, server::TlsFiles},
    components::controller::{self, ControllerSettings},
    controller::{
        cluster_extension::{self, DependencyMode, operator_conditions::OperatorConditionsMode},
        upgradeable::UpgradeableArgs,
    },
    image::pull_secret::PullSecretArgs,
};

/// Arguments of `olmv1 controller`.
#[derive(clap::Args, Debug)]
pub struct ControllerArgs {
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
    /// The TLS profile.
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

/// Runs `olmv1 controller` until SIGTERM/SIGINT.
pub async fn run(args: ControllerArgs) -> ExitCode {
    match run_controller(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            error!("{message}");
            errln!("olmv1 controller: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run_controller(args: ControllerArgs) -> Result<(), String> {
    let settings = ControllerSettings {
        profile: args.tls.profile()?,
        system_namespace: args.system_namespace,
        metrics_addr: args.metrics_addr,
        probe_addr: args.probe_addr,
        metrics_insecure: args.metrics_insecure,
        metrics_tls: args
            .tls_cert
            .zip(args.tls_key)
            .map(|(cert, key)| TlsFiles { cert, key }),
        leader_election: args.leader_timings.election(args.leader_elect)?,
        concurrency: args.concurrency,
        cache_dir: args.cache_dir,
        bundle_cache_grace: Duration::from_secs(args.bundle_cache_grace),
        insecure_registries: args.insecure_registries,
        ca_files: args.ca_files,
        auth_file: args.auth_file,
        registries_conf: args.registries_conf,
        pull_secrets: args.pull_secrets.sources(),
        bundle_limits: args.bundle_limits.limits(),
        webhook_provider: args.webhook_provider,
        dependencies: args.dependencies,
        install_identity: args.install_identity,
        operator_conditions: args.operator_conditions,
        upgradeable: args.upgradeable,
        max_jsonl_line_bytes: args.max_jsonl_line_bytes,
        progress_deadline_unit: Duration::from_secs(args.progress_deadline_unit_seconds.max(1)),
        drift_check: Duration::from_secs(args.drift_check_seconds.max(1)),
    };
    controller::run(settings).await
}
