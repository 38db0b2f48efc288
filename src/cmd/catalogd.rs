//! `olmv1 catalogd`: the catalog server, which either reconciles ClusterCatalogs from a cluster
//! (default) or serves local FBC directories (`olmv1 catalogd serve`); both run in
//! `components::catalogd`, whose settings are the flags.

use std::process::ExitCode;

use crate::components::{
    catalogd::{self, ClusterSettings, StandaloneSettings},
    shutdown_signal,
};

/// Arguments of `olmv1 catalogd`.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct CatalogdArgs {
    /// Standalone mode.
    #[command(subcommand)]
    pub command: Option<CatalogdCommand>,
    /// Cluster mode settings.
    #[command(flatten)]
    pub cluster: ClusterSettings,
}

/// Subcommands of `olmv1 catalogd`.
#[derive(clap::Subcommand, Debug)]
pub enum CatalogdCommand {
    /// Serves FBC directories with no cluster: `--catalog NAME=DIR` (repeatable).
    Serve(StandaloneSettings),
}

/// Runs `olmv1 catalogd`.
pub async fn run(args: CatalogdArgs) -> ExitCode {
    let result = match args.command {
        Some(CatalogdCommand::Serve(settings)) => {
            catalogd::serve_directories(settings, announce, shutdown_signal()).await
        }
        None => catalogd::run_cluster(args.cluster, announce).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            errln!("olmv1 catalogd: {message}");
            ExitCode::FAILURE
        }
    }
}

fn announce(url: &str) {
    outln!("serving catalogs on {url}");
}
