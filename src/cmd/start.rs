//! Start-up shared by the commands: logging, the parent watch, the replica's identity, clients and
//! leader loop, registry options, the TLS profile, the operations servers (`/healthz` `/readyz`;
//! `/metrics`), signals.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
};

use kube::{Client, Config};
use prometheus_client::registry::Registry;
use tokio::task::JoinHandle;

use crate::{
    catalog::server::{TlsFiles, tls_acceptor},
    image::{RegistriesConf, RegistryConfig, UnpackLimits},
    leader::{LeaderElector, LeaderTimings, Leadership, identify, replica_identity},
    operations::{MetricsAccess, Readiness, access::AccessReviewer, serve_metrics, serve_probes},
    tls_profile::TlsProfile,
};

/// Structured logs on stderr; `RUST_LOG` filters (default `info`), `OLMV1_LOG_FORMAT=json` for JSON.
pub fn init_tracing() {
    use tracing_subscriber::{EnvFilter, fmt};
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if std::env::var("OLMV1_LOG_FORMAT").as_deref() == Ok("json") {
        builder.json().init();
    } else {
        builder.init();
    }
}

/// With `OLMV1_EXIT_WITH_PARENT=1`, the process exits when its parent does: test harnesses and
/// scripts that start `olmv1 controller` or `olmv1 catalogd` leave nothing running behind them.
pub fn exit_with_parent() {
    if std::env::var("OLMV1_EXIT_WITH_PARENT").as_deref() != Ok("1") {
        return;
    }
    let parent = std::os::unix::process::parent_id();
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(std::time::Duration::from_millis(500));
            if std::os::unix::process::parent_id() != parent {
                std::process::exit(0);
            }
        }
    });
}

/// How a command reaches registries: hosts allowed plain HTTP, extra CAs, an auth file.
#[derive(Debug, Default)]
pub struct RegistryOptions<'a> {
    /// Registries (`host[:port]`) allowed plain HTTP.
    pub insecure_registries: Vec<String>,
    /// PEM files or directories of extra trusted CAs.
    pub ca_paths: Vec<&'a Path>,
    /// A Docker/Podman auth file (`{"auths":{...}}`).
    pub auth_file: Option<&'a Path>,
}

impl RegistryOptions<'_> {
    /// The registry configuration these options describe; the error names the unreadable file.
    pub fn config(self) -> Result<RegistryConfig, String> {
        let mut config = RegistryConfig {
            insecure_registries: self.insecure_registries,
            ..RegistryConfig::default()
        };
        for path in self.ca_paths {
            config
                .add_ca_path(path)
                .map_err(|e| format!("cannot read CA file {}: {e}", path.display()))?;
        }
        if let Some(path) = self.auth_file {
            config.add_auth_file(path)?;
        }
        Ok(config)
    }
}

/// The registries configuration a command pulls with: `flag`, else `CONTAINERS_REGISTRIES_CONF`,
/// else `/etc/containers/registries.conf` when present (none: every pull goes where its
/// reference says). An unreadable or invalid file stops the command.
pub fn load_registries_conf(flag: Option<&Path>) -> Result<RegistriesConf, String> {
    RegistriesConf::configured(flag).map_err(|e| e.to_string())
}

/// What a bundle image may hold and what is read from it (defaults: [`UnpackLimits::BUNDLE`]).
#[derive(clap::Args, Debug, Clone)]
pub struct BundleLimitArgs {
    /// Largest total uncompressed size of a bundle image, in bytes.
    #[arg(long, env = "OLMV1_MAX_UNPACKED_BYTES", default_value_t = UnpackLimits::BUNDLE.max_total_bytes)]
    pub max_unpacked_bytes: u64,
    /// Largest number of tar entries over the layers of a bundle image.
    #[arg(long, env = "OLMV1_MAX_UNPACKED_ENTRIES", default_value_t = UnpackLimits::BUNDLE.max_entries)]
    pub max_unpacked_entries: u64,
    /// Largest single bundle file (manifest, metadata) read, in bytes (checked before it is read).
    #[arg(long, env = "OLMV1_MAX_FILE_BYTES", default_value_t = UnpackLimits::BUNDLE.max_file_bytes)]
    pub max_file_bytes: u64,
}

impl BundleLimitArgs {
    /// The limits these flags describe.
    pub fn limits(&self) -> UnpackLimits {
        UnpackLimits {
            max_total_bytes: self.max_unpacked_bytes,
            max_entries: self.max_unpacked_entries,
            max_file_bytes: self.max_file_bytes,
        }
    }
}

/// Reads each CA file (PEM).
pub fn read_ca_files(files: &[PathBuf]) -> Result<Vec<Vec<u8>>, String> {
    files
        .iter()
        .map(|file| std::fs::read(file).map_err(|e| format!("cannot read CA file {}: {e}", file.display())))
        .collect()
}

/// The leader election's durations (with `--leader-elect`); upstream's by default.
#[derive(clap::Args, Debug, Clone)]
pub struct LeaderTimingArgs {
    /// Seconds a Lease is valid without renewal: how long the other replicas wait before one
    /// takes over from a leader that stopped renewing.
    #[arg(long, env = "OLMV1_LEADER_ELECTION_LEASE_DURATION_SECONDS",
          default_value_t = LeaderTimings::UPSTREAM.lease_duration.as_secs())]
    pub leader_election_lease_duration_seconds: u64,
    /// Seconds the leader keeps reconciling after its last successful renewal; shorter than the
    /// lease duration, so that it stops before another replica may start.
    #[arg(long, env = "OLMV1_LEADER_ELECTION_RENEW_DEADLINE_SECONDS",
          default_value_t = LeaderTimings::UPSTREAM.renew_deadline.as_secs())]
    pub leader_election_renew_deadline_seconds: u64,
    /// Seconds between the leader's renewals (one request each) and between the other replicas'
    /// reads of the Lease; shorter than the renew deadline.
    #[arg(long, env = "OLMV1_LEADER_ELECTION_RETRY_PERIOD_SECONDS",
          default_value_t = LeaderTimings::UPSTREAM.retry_period.as_secs())]
    pub leader_election_retry_period_seconds: u64,
}

impl LeaderTimingArgs {
    /// The timings these flags describe, if the leader stops before another may take over.
    pub fn timings(&self) -> Result<LeaderTimings, String> {
        let s = std::time::Duration::from_secs;
        LeaderTimings::new(
            s(self.leader_election_lease_duration_seconds),
            s(self.leader_election_renew_deadline_seconds),
            s(self.leader_election_retry_period_seconds),
        )
        .map_err(|e| e.to_string())
    }
}

/// Upstream's TLS profile flags (`--tls-profile` and the custom profile's three).
#[derive(clap::Args, Debug, Clone)]
pub struct TlsProfileArgs {
    /// TLS profile of every TLS server of this command (old, intermediate, modern, custom:
    /// upstream's names and values); its registry and catalog clients accept no lower version than
    /// the profile's minimum.
    #[arg(long, env = "OLMV1_TLS_PROFILE", default_value = "intermediate")]
    pub tls_profile: String,
    /// Lowest version of the custom profile: TLSv1.2 (default) or TLSv1.3.
    #[arg(long, value_name = "VERSION")]
    pub tls_custom_version: Option<String>,
    /// Cipher suites of the custom profile, comma-separated IANA (Go) or OpenSSL names.
    #[arg(long, value_name = "CIPHERS", value_delimiter = ',')]
    pub tls_custom_ciphers: Vec<String>,
    /// Curves of the custom profile, comma-separated: X25519, prime256v1 (secp256r1), secp384r1.
    #[arg(long, value_name = "CURVES", value_delimiter = ',')]
    pub tls_custom_curves: Vec<String>,
}

impl TlsProfileArgs {
    /// The profile these flags describe; the error names the flag and the cause.
    pub fn profile(&self) -> Result<TlsProfile, String> {
        let profile = TlsProfile::from_flags(
            &self.tls_profile,
            self.tls_custom_version.as_deref(),
            &self.tls_custom_ciphers,
            &self.tls_custom_curves,
        )
        .map_err(|e| format!("invalid TLS profile: {e}"))?;
        tracing::info!("{}", profile.describe());
        Ok(profile)
    }
}

/// A listen address; Go-style `:PORT` means every interface (as upstream's flags).
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
pub async fn start_operations_servers(
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

/// A replica's connection to the cluster: its identity, a client that stops with the Lease, and
/// the elector (when it elects) on a client of its own.
pub struct Replica {
    /// The pod name (or host name, or `olmv1-<component>-<pid>`).
    pub identity: String,
    /// The configuration, naming the replica in its User-Agent.
    pub config: Config,
    /// Whether this replica may send requests now.
    pub leadership: Leadership,
    /// The client every reconcile uses: refused while this replica does not lead.
    pub client: Client,
    elector: Option<LeaderElector>,
}

impl Replica {
    /// Connects as `component`; with `elect`, elects on Lease `namespace/lease` with those
    /// timings before leading.
    pub async fn connect(
        component: &str,
        elect: Option<LeaderTimings>,
        namespace: &str,
        lease: &str,
    ) -> Result<Self, String> {
        let identity = replica_identity(component);
        crate::tls_profile::install_default_provider();
        let mut config = Config::infer()
            .await
            .map_err(|e| format!("cannot find a Kubernetes configuration: {e}"))?;
        config.proxy_url = api_server_proxy(config.proxy_url.take());
        identify(&mut config, component, &identity);
        let build_error = |e| format!("cannot build a Kubernetes client: {e}");
        let leadership = if elect.is_some() {
            Leadership::elected()
        } else {
            Leadership::unelected()
        };
        // The reconcilers' client stops with the Lease (see leader.rs); the elector's does not.
        let client = leadership.client(config.clone()).map_err(build_error)?;
        let elector = match elect {
            Some(timings) => {
                let lease_client = Client::try_from(config.clone()).map_err(build_error)?;
                Some(LeaderElector::new(
                    lease_client,
                    namespace,
                    lease,
                    &identity,
                    leadership.clone(),
                    timings,
                ))
            }
            None => None,
        };
        Ok(Self {
            identity,
            config,
            leadership,
            client,
            elector,
        })
    }

    /// Waits until this replica leads (at once when it does not elect).
    pub async fn acquire(&self) -> Result<(), String> {
        let Some(elector) = &self.elector else {
            return Ok(());
        };
        tracing::info!(identity = %self.identity, "waiting for leadership");
        elector.acquire().await.map_err(|e| e.to_string())
    }

    /// Gives the Lease up (a graceful stop, after the last reconcile): another replica takes over
    /// at its next retry. Nothing without election.
    pub async fn release(&self) {
        if let Some(elector) = &self.elector {
            elector.release().await;
        }
    }

    /// Completes with the message to exit with when leadership is lost; never without election.
    pub async fn lost(&self) -> String {
        match &self.elector {
            Some(elector) => format!("{}; exiting so another replica can lead", elector.hold().await),
            None => std::future::pending().await,
        }
    }
}

/// The proxy to the API server: only the one the kubeconfig names (`proxy-url`). kube also
/// takes `HTTPS_PROXY` from the environment, which the Deployments set for registries and
/// catalog servers (see `egress`); in-cluster configuration never has a proxy.
fn api_server_proxy(inferred: Option<http::Uri>) -> Option<http::Uri> {
    inferred?;
    let kubeconfig = kube::config::Kubeconfig::read().ok()?;
    kubeconfig_proxy_url(&kubeconfig)?.parse().ok()
}

/// The `proxy-url` of the current context's cluster.
fn kubeconfig_proxy_url(kubeconfig: &kube::config::Kubeconfig) -> Option<String> {
    let current = kubeconfig.current_context.as_deref()?;
    let context = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == current)?
        .context
        .as_ref()?;
    let cluster = kubeconfig.clusters.iter().find(|c| c.name == context.cluster)?;
    cluster
        .cluster
        .as_ref()?
        .proxy_url
        .clone()
        .filter(|url| !url.is_empty())
}

/// Completes on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig(current: &str, proxy: Option<&str>) -> kube::config::Kubeconfig {
        let proxy = proxy.map(|p| format!("\n    proxy-url: {p}")).unwrap_or_default();
        let yaml = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: {current}\nclusters:\n- name: c\n  cluster:\n    server: https://10.0.0.1:6443{proxy}\n- name: other\n  cluster:\n    server: https://10.0.0.2:6443\n    proxy-url: http://other-proxy:3128\ncontexts:\n- name: ctx\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user: {{}}\n"
        );
        kube::config::Kubeconfig::from_yaml(&yaml).expect("a valid kubeconfig")
    }

    #[test]
    fn only_the_current_clusters_proxy_url_reaches_the_api_server() {
        assert_eq!(
            kubeconfig_proxy_url(&kubeconfig("ctx", Some("http://proxy.corp:3128"))).as_deref(),
            Some("http://proxy.corp:3128")
        );
        // No proxy-url: none, whatever HTTPS_PROXY says (kube would take it).
        assert_eq!(kubeconfig_proxy_url(&kubeconfig("ctx", None)), None);
        assert_eq!(kubeconfig_proxy_url(&kubeconfig("missing", None)), None);
    }
}
