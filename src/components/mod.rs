//! Owns the two long-running components, `olmv1 controller` and `olmv1 catalogd`, as a caller
//! (the command line, a test) starts them: settings in, run until shutdown or lost leadership.
//! May import every module below admin (controller, operations, catalog, image, leader, ...);
//! never admin or cmd.

pub mod catalogd;
pub mod controller;
pub mod replica;

use crate::tls_profile::{TlsProfile, TlsProfileArgs};

/// The TLS profile `flags` describe, logged; the error names the flags' mistake.
fn tls_profile(flags: &TlsProfileArgs) -> Result<TlsProfile, String> {
    let profile = flags.profile().map_err(|e| format!("invalid TLS profile: {e}"))?;
    tracing::info!("{}", profile.describe());
    Ok(profile)
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
