//! webhook-operator: see the crate documentation (lib.rs) and docs/test-operator.md.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Parser;
use olmv1_test_operator::{controller, serve, tls, upgradeable};
use tokio::net::TcpListener;

/// A small webhook operator for olmv1's real-node tests.
#[derive(Parser, Debug)]
#[command(name = "webhook-operator", version)]
struct Args {
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
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
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
    tracing::info!(bundle_version = %args.bundle_version, "webhook-operator {} starting", env!("CARGO_PKG_VERSION"));
    let readiness = serve::Readiness::default();

    let probes = TcpListener::bind(args.probe_bind_address)
        .await
        .map_err(|e| format!("probe server on {}: {e}", args.probe_bind_address))?;
    let probe_router = serve::probe_router(readiness.clone());
    tokio::spawn(async move {
        if let Err(e) = axum::serve(probes, probe_router).await {
            tracing::error!(error = %e, "probe server stopped");
        }
    });

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
        readiness.webhooks_serving.clone(),
    ));

    let client = kube::Client::try_default()
        .await
        .map_err(|e| format!("Kubernetes client: {e}"))?;
    tokio::spawn(upgradeable::run(client.clone(), args.bundle_version.clone()));
    controller::run(
        client,
        args.bundle_version,
        readiness.controller_synced.clone(),
        shutdown(),
    )
    .await;
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
