//! `olmv1 catalogd`: Runs the catalog server: reconciles ClusterCatalogs or serves local catalog directories.

use std::process::ExitCode;

/// Arguments of `olmv1 catalogd`.
#[derive(clap::Args, Debug)]
pub struct CatalogdArgs {}

/// Runs `olmv1 catalogd`.
pub async fn run(_args: CatalogdArgs) -> ExitCode {
    eprintln!("olmv1 catalogd: not implemented yet");
    ExitCode::from(2)
}
