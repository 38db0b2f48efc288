//! Start-up shared by the commands: logging, the parent watch, pod identity, registry options,
//! the operations server (`/metrics`, `/healthz`, `/readyz`), the leader loop and signals.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
};

use kube::Client;
use prometheus_client::registry::Registry;
use tokio::task::JoinHandle;

use crate::{
    controller::{
        leader::LeaderElector,
        metrics::{Readiness, serve_operations},
    },
    image::RegistryConfig,
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

/// This replica's name in leader election: the pod name (`POD_NAME`, else `HOSTNAME`), or
/// `<fallback_prefix>-<pid>` outside a pod.
pub fn pod_identity(fallback_prefix: &str) -> String {
    std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| format!("{fallback_prefix}-{}", std::process::id()))
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

/// Reads each CA file (PEM).
pub fn read_ca_files(files: &[PathBuf]) -> Result<Vec<Vec<u8>>, String> {
    files
        .iter()
        .map(|file| std::fs::read(file).map_err(|e| format!("cannot read CA file {}: {e}", file.display())))
        .collect()
}

/// Starts the operations server on `addr`; the process is not ready until
/// [`Readiness::set_ready`].
pub fn start_operations_server(
    addr: SocketAddr,
    registry: Registry,
) -> (Readiness, JoinHandle<std::io::Result<()>>) {
    let readiness = Readiness::default();
    let server = tokio::spawn(serve_operations(addr, registry, readiness.clone()));
    (readiness, server)
}

/// Leader election on one Lease, or none when the process runs alone.
pub struct Leadership {
    elector: Option<LeaderElector>,
}

impl Leadership {
    /// With `elect`, elects on Lease `namespace/lease` as this pod; otherwise always leads.
    pub fn new(elect: bool, client: Client, namespace: &str, lease: &str, fallback_prefix: &str) -> Self {
        let elector = elect.then(|| {
            let identity = pod_identity(fallback_prefix);
            tracing::info!(%identity, %lease, "waiting for leadership");
            LeaderElector::new(client, namespace, lease, &identity)
        });
        Self { elector }
    }

    /// Waits until this process leads.
    pub async fn acquire(&self) -> Result<(), String> {
        match &self.elector {
            Some(elector) => elector.acquire().await.map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }

    /// Completes when leadership is lost; never when the process runs alone.
    pub async fn lost(&self) {
        match &self.elector {
            Some(elector) => elector.hold().await,
            None => std::future::pending().await,
        }
    }
}

/// The message a replica exits with when another takes over its Lease.
pub const LOST_LEADERSHIP: &str = "lost leadership; exiting so another replica can lead";

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
