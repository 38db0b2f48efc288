//! The `olmv1` command line: each subcommand's arguments and behaviour live in its module.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use olmv1::{bundle, catalog, controller, resolve};

#[derive(Parser, Debug)]
#[command(
    name = "olmv1",
    version,
    about = "OLM v1 in Rust: installs and upgrades cluster extensions"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the ClusterExtension controller.
    Controller(controller::cli::ControllerArgs),
    /// Run the catalog server (ClusterCatalog reconciler, or standalone `serve`).
    Catalogd(Box<catalog::cli::CatalogdArgs>),
    /// Resolve the bundle a ClusterExtension would install, with no cluster.
    Resolve(resolve::cli::ResolveArgs),
    /// Render the manifests of a registry+v1 bundle.
    Render(bundle::cli::RenderArgs),
    /// Publish images to an OCI registry.
    #[command(subcommand)]
    Image(bundle::image_cli::ImageCommand),
    /// Print the ClusterExtension and ClusterCatalog CRDs as a YAML stream.
    Crd,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    exit_with_parent();
    match cli.command {
        Command::Controller(args) => controller::cli::run(args).await,
        Command::Catalogd(args) => catalog::cli::run(*args).await,
        Command::Resolve(args) => resolve::cli::run(args).await,
        Command::Render(args) => bundle::cli::run(args).await,
        Command::Image(cmd) => bundle::image_cli::run(cmd).await,
        Command::Crd => {
            print!("{}", olmv1_api::crd::crds_yaml());
            ExitCode::SUCCESS
        }
    }
}

/// With `OLMV1_EXIT_WITH_PARENT=1`, the process exits when its parent does: test harnesses and
/// scripts that start `olmv1 controller` or `olmv1 catalogd` leave nothing running behind them.
fn exit_with_parent() {
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

/// Structured logs on stderr; `RUST_LOG` filters (default `info`), `OLMV1_LOG_FORMAT=json` for JSON.
fn init_tracing() {
    use tracing_subscriber::{EnvFilter, fmt};
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if std::env::var("OLMV1_LOG_FORMAT").as_deref() == Ok("json") {
        builder.json().init();
    } else {
        builder.init();
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
