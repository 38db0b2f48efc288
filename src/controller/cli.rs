//! `olmv1 controller`: Runs the ClusterExtension controller.

use std::process::ExitCode;

/// Arguments of `olmv1 controller`.
#[derive(clap::Args, Debug)]
pub struct ControllerArgs {}

/// Runs `olmv1 controller`.
pub async fn run(_args: ControllerArgs) -> ExitCode {
    eprintln!("olmv1 controller: not implemented yet");
    ExitCode::from(2)
}
