//! The `olmv1` command line: each subcommand's arguments and behaviour live in its module.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use olmv1::{bundle, catalog, cmd, controller, resolve};

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
    /// Find packages across the cluster's catalogs, a catalog image or a directory.
    Search(cmd::search::SearchArgs),
    /// Every channel of a package with its bundles, upgrade edges and deprecations.
    Versions(cmd::versions::VersionsArgs),
    /// The versions an extension can reach now, and the shortest path to later ones.
    Upgrades(cmd::upgrades::UpgradesArgs),
    /// Why the resolver chose what it chose, or found nothing.
    Explain(cmd::explain::ExplainArgs),
    /// Create a ClusterExtension.
    Install(cmd::install::InstallArgs),
    /// Change a ClusterExtension's version, channels or upgrade policy.
    Upgrade(cmd::install::UpgradeArgs),
    /// Delete a ClusterExtension.
    Uninstall(cmd::install::UninstallArgs),
    /// A readable summary of every extension: installed, target, conditions, upgrades.
    Status(cmd::status::StatusArgs),
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = parse_cli();
    init_tracing();
    exit_with_parent();
    match cli.command {
        Command::Controller(args) => controller::cli::run(args).await,
        Command::Catalogd(args) => catalog::cli::run(*args).await,
        Command::Resolve(args) => resolve::cli::run(args).await,
        Command::Render(args) => bundle::cli::run(args).await,
        Command::Image(cmd) => bundle::image_cli::run(cmd).await,
        Command::Search(args) => cmd::search::run(args).await,
        Command::Versions(args) => cmd::versions::run(args).await,
        Command::Upgrades(args) => cmd::upgrades::run(args).await,
        Command::Explain(args) => cmd::explain::run(args).await,
        Command::Install(args) => cmd::install::install(args).await,
        Command::Upgrade(args) => cmd::install::upgrade(args).await,
        Command::Uninstall(args) => cmd::install::uninstall(args).await,
        Command::Status(args) => cmd::status::run(args).await,
        Command::Crd => {
            print!("{}", olmv1_api::crd::crds_yaml());
            ExitCode::SUCCESS
        }
    }
}

/// Parses the command line. Run as `kubectl-olmv1` (a link kubectl finds on PATH, so
/// `kubectl olmv1 search ...` works), help and errors name the plugin as kubectl users type it.
fn parse_cli() -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let invoked = std::env::args_os().next().and_then(|a| {
        std::path::Path::new(&a)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
    });
    let mut command = Cli::command();
    if invoked.as_deref() == Some("kubectl-olmv1") {
        command = command.name("kubectl-olmv1").bin_name("kubectl olmv1");
    }
    let matches = command.get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
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
