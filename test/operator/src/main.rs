//! webhook-operator: see the crate documentation (lib.rs) and docs/test-operator.md.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::{Parser, ValueEnum};
use olmv1_test_operator::{aggregated, apiserver, controller, delegated, serve, tls, upgradeable};
use tokio::net::TcpListener;

/// How long a stopping aggregated API server keeps serving after SIGTERM: the pod has left its
/// Service's endpoints (not ready), and requests already routed to it still get answers. Long
/// enough for the endpoints and the node's service rules to follow on a loaded machine (5 s was
/// not, on 2 busy cores).
const SHUTDOWN_DELAY: std::time::Duration = std::time::Duration::from_secs(15);

/// What the process serves.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// The Widget webhooks and controller.
    Webhooks,
    /// The aggregated API `gadgets.test.olmv1.dev` (an APIService's server).
    AggregatedApi,
}

/// A small webhook operator for olmv1's real-node tests.
#[derive(Parser, Debug)]
#[command(name = "webhook-operator", version)]
struct Args {
    /// What to serve.
    #[arg(long, value_enum, default_value = "webhooks")]
    mode: Mode,
    /// Address of the HTTPS webhook server (/convert, /validate-widget).
    #[arg(long, default_value = "0.0.0.0:9443")]
    webhook_bind_address: SocketAddr,
    /// Address of the plain HTTP probe server (/healthz, /readyz).
    #[arg(long, default_value = "0.0.0.0:8081")]
    probe_bind_address: SocketAddr,
    /// Directory holding tls.crt and tls.key (where OLM mounts the webhook certificate).
    #[arg(long, default_value = "/tmp/k8s-webhook-server/serving-certs")]
    cert_dir: PathBuf,
    /// The bundle version this pod belongs to, written into every Widget's status (the CSV
    /// passes it, so two bundles of the same image differ).
    #[arg(long, env = "BUNDLE_VERSION", default_value = env!("CARGO_PKG_VERSION"))]
    bundle_version: String,
    /// Exit with status 1 right away: the broken bundle of the upgrade tests.
    #[arg(long)]
    fail_at_start: bool,
    /// `--mode aggregated-api`: the versions of gadgets.test.olmv1.dev served (the last is
    /// preferred).
    #[arg(long, value_delimiter = ',', default_value = "v1")]
    api_versions: Vec<String>,
    /// `--mode aggregated-api`: address of the HTTPS API server.
    #[arg(long, default_value = "0.0.0.0:5443")]
    api_bind_address: SocketAddr,
    /// `--mode aggregated-api`: directory holding apiserver.crt and apiserver.key (where OLM
    /// mounts an APIService's certificate).
    #[arg(long, default_value = "/apiserver.local.config/certificates")]
    api_cert_dir: PathBuf,
    /// The pod's name, reported as the server of every gadget.
    #[arg(long, env = "POD_NAME", default_value = "")]
    pod_name: String,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    // The workspace's one build (the tests' own, which the image carries) enables both of rustls's
    // providers (olmv1's aws-lc-rs, this crate's ring): the kube client needs one named.
    let _ = rustls::crypto::ring::default_provider().install_default();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Container logs are files: colour codes only on a terminal.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    if let Err(e) = run(args).await {
        eprintln!("webhook-operator: {e}");
        std::process::exit(1);
    }
}

async fn run(args: Args) -> Result<(), String> {
    if args.fail_at_start {
        return Err(format!(
            "started with --fail-at-start (bundle {}): exiting with status 1",
            args.bundle_version
        ));
    }
    tracing::info!(bundle_version = %args.bundle_version, mode = ?args.mode, "webhook-operator {} starting", env!("CARGO_PKG_VERSION"));
    let readiness = match args.mode {
        Mode::Webhooks => serve::Readiness::new(&[serve::WEBHOOKS_SERVING, serve::CONTROLLER_SYNCED]),
        Mode::AggregatedApi => serve::Readiness::new(&[serve::API_SERVING, serve::NOT_STOPPING]),
    };

    let probes = TcpListener::bind(args.probe_bind_address)
        .await
        .map_err(|e| format!("probe server on {}: {e}", args.probe_bind_address))?;
    let probe_router = serve::probe_router(readiness.clone());
    tokio::spawn(async move {
        if let Err(e) = axum::serve(probes, probe_router).await {
            tracing::error!(error = %e, "probe server stopped");
        }
    });

    if args.mode == Mode::AggregatedApi {
        return serve_aggregated_api(args, readiness).await;
    }
    let certs = tls::CertReloader::load(&args.cert_dir).map_err(|e| format!("serving certificate: {e}"))?;
    let config = certs
        .server_config()
        .map_err(|e| format!("TLS configuration: {e}"))?;
    tokio::spawn(certs.watch());
    let webhooks = TcpListener::bind(args.webhook_bind_address)
        .await
        .map_err(|e| format!("webhook server on {}: {e}", args.webhook_bind_address))?;
    tracing::info!(address = %args.webhook_bind_address, "webhook server listening");
    tokio::spawn(serve::serve_https(
        webhooks,
        Arc::new(config),
        serve::webhook_router(),
        readiness.part(serve::WEBHOOKS_SERVING),
    ));

    let client = kube::Client::try_default()
        .await
        .map_err(|e| format!("Kubernetes client: {e}"))?;
    tokio::spawn(upgradeable::run(client.clone(), args.bundle_version.clone()));
    controller::run(
        client,
        args.bundle_version,
        readiness.part(serve::CONTROLLER_SYNCED),
        shutdown(),
    )
    .await;
    tracing::info!("stopped");
    Ok(())
}

/// `--mode aggregated-api`: reads the API server's request-header settings (retrying while the
/// bindings that allow it are not there yet), serves gadgets.test.olmv1.dev over HTTPS with the
/// APIService certificate, and on SIGTERM turns not ready, serves on for [`SHUTDOWN_DELAY`], and
/// exits.
async fn serve_aggregated_api(args: Args, readiness: serve::Readiness) -> Result<(), String> {
    readiness
        .part(serve::NOT_STOPPING)
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let certs = tls::CertReloader::load_files(tls::CertFiles::new(
        &args.api_cert_dir,
        tls::API_CERT_FILE,
        tls::API_KEY_FILE,
    ))
    .map_err(|e| format!("APIService serving certificate: {e}"))?;
    let client = kube::Client::try_default()
        .await
        .map_err(|e| format!("Kubernetes client: {e}"))?;
    let auth = loop {
        match delegated::load(&client).await {
            Ok(auth) => break auth,
            // Not allowed yet (the auth-reader RoleBinding comes with the same apply), or the API
            // server is restarting: try again; /readyz says what is missing meanwhile.
            Err(e @ delegated::DelegationError::Read(_)) => {
                tracing::warn!(error = %e, "request-header settings not read yet; retrying");
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            }
            Err(e) => return Err(e.to_string()),
        }
    };
    let verifier = delegated::client_verifier(&auth).map_err(|e| e.to_string())?;
    let config = certs
        .server_config_verifying(verifier)
        .map_err(|e| format!("TLS configuration: {e}"))?;
    tokio::spawn(certs.watch());
    let listener = TcpListener::bind(args.api_bind_address)
        .await
        .map_err(|e| format!("aggregated API server on {}: {e}", args.api_bind_address))?;
    let state = Arc::new(apiserver::ApiState {
        api: aggregated::GadgetApi {
            versions: args.api_versions.clone(),
            served_by: args.pod_name.clone(),
            bundle_version: args.bundle_version.clone(),
            started: k8s_openapi::jiff::Timestamp::now()
                .strftime("%Y-%m-%dT%H:%M:%SZ")
                .to_string(),
        },
        auth,
        client,
    });
    tracing::info!(address = %args.api_bind_address, versions = ?args.api_versions, "aggregated API server listening");
    tokio::spawn(serve::serve_https(
        listener,
        Arc::new(config),
        apiserver::router(state),
        readiness.part(serve::API_SERVING),
    ));
    shutdown().await;
    readiness
        .part(serve::NOT_STOPPING)
        .store(false, std::sync::atomic::Ordering::SeqCst);
    tracing::info!(
        "stopping: not ready, serving for {}s more",
        SHUTDOWN_DELAY.as_secs()
    );
    tokio::time::sleep(SHUTDOWN_DELAY).await;
    tracing::info!("stopped");
    Ok(())
}

/// Resolves on SIGTERM (the kubelet stopping the pod) or SIGINT.
async fn shutdown() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
