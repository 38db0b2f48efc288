//! `olmv1 controller`: the ClusterExtension controller and the Upgradeable reconciler, which run
//! in `components::controller` (leader election, `/healthz` `/readyz`, `/metrics` over HTTPS for
//! authorised callers, graceful shutdown); its flags are `ControllerSettings`.

use std::process::ExitCode;

use tracing::error;

use crate::components::controller::{self, ControllerSettings};

/// Runs `olmv1 controller` until SIGTERM/SIGINT.
pub async fn run(settings: ControllerSettings) -> ExitCode {
    match controller::run(settings).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            error!("{message}");
            errln!("olmv1 controller: {message}");
            ExitCode::FAILURE
        }
    }
}
