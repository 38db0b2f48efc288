//! Owns the command line: each command's flags and process start-up, one module per command.
//! May import every other module; nothing imports it (it is the top layer).

pub mod catalogd;
pub mod controller;
pub mod image;
pub mod render;
pub mod resolve;
pub mod start;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The `olmv1` command line.
#[derive(Parser, Debug)]
#[command(
    name = "olmv1",
    version,
    about = "OLM v1 in Rust: installs and upgrades cluster extensions"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the ClusterExtension controller.
    Controller(controller::ControllerArgs),
    /// Run the catalog server (ClusterCatalog reconciler, or standalone `serve`).
    Catalogd(catalogd::CatalogdArgs),
    /// Resolve the bundle a ClusterExtension would install, with no cluster.
    Resolve(resolve::ResolveArgs),
    /// Render the manifests of a registry+v1 bundle.
    Render(render::RenderArgs),
    /// Publish images to an OCI registry.
    #[command(subcommand)]
    Image(image::ImageCommand),
    /// Print the ClusterExtension and ClusterCatalog CRDs as a YAML stream.
    Crd,
}

/// Runs the command `cli` names, after the start-up every command shares.
pub async fn run(cli: Cli) -> ExitCode {
    start::init_tracing();
    start::exit_with_parent();
    match cli.command {
        Command::Controller(args) => controller::run(args).await,
        Command::Catalogd(args) => catalogd::run(args).await,
        Command::Resolve(args) => resolve::run(args).await,
        Command::Render(args) => render::run(args).await,
        Command::Image(cmd) => image::run(cmd).await,
        Command::Crd => {
            print!("{}", olmv1_api::crd::crds_yaml());
            ExitCode::SUCCESS
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
