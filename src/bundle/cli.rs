//! `olmv1 render`: Prints the manifests a registry+v1 bundle would apply.

use std::process::ExitCode;

/// Arguments of `olmv1 render`.
#[derive(clap::Args, Debug)]
pub struct RenderArgs {}

/// Runs `olmv1 render`.
pub async fn run(_args: RenderArgs) -> ExitCode {
    eprintln!("olmv1 render: not implemented yet");
    ExitCode::from(2)
}
