//! Owns the command line: each command's flags and process start-up, one module per command.
//! May import every other module; nothing imports it (it is the top layer).
//!
//! Every byte a command writes for people passes `admin::output`'s one writer ([`write_stdout`],
//! [`write_stderr`], [`write_terminal`]): escaped, and stopped at `--max-output-bytes`.

/// `print!` for command output: see [`write_stdout`].
macro_rules! out {
    ($($arg:tt)*) => { $crate::admin::output::write_stdout(&format!($($arg)*)) };
}

/// `println!` for command output: see [`write_stdout`].
macro_rules! outln {
    ($($arg:tt)*) => { $crate::admin::output::write_stdout(&format!("{}\n", format_args!($($arg)*))) };
}

/// `eprintln!` for messages: see [`write_stderr`].
macro_rules! errln {
    ($($arg:tt)*) => { $crate::admin::output::write_stderr(&format!("{}\n", format_args!($($arg)*))) };
}

pub mod catalogd;
pub mod controller;
pub mod explain;
pub mod image;
pub mod install;
pub mod migrate;
pub mod rbac;
pub mod render;
pub mod resolve;
pub mod search;
pub mod sources;
pub mod start;
pub mod status;
pub mod upgrades;
pub mod versions;

use std::{io::Write, process::ExitCode};

use clap::{Parser, Subcommand};

pub use crate::admin::output::{write_stderr, write_stdout, write_terminal};

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

    /// The most bytes a command prints (stdout and stderr): past it, text is cut after its last
    /// whole line and JSON is not printed, with a message saying so and exit status 2 (default:
    /// 1 MiB; 64 MiB for the manifests `render`, `install`, `upgrade` and `crd` print).
    #[arg(long, global = true, value_name = "BYTES", env = "OLMV1_MAX_OUTPUT_BYTES")]
    max_output_bytes: Option<u64>,

    /// The command's name, as its messages start with it.
    #[arg(skip)]
    name: String,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the ClusterExtension controller.
    Controller(crate::components::controller::ControllerSettings),
    /// Run the catalog server (ClusterCatalog reconciler, or standalone `serve`).
    Catalogd(Box<catalogd::CatalogdArgs>),
    /// Resolve the bundle a ClusterExtension would install, with no cluster.
    Resolve(resolve::ResolveArgs),
    /// Render the manifests of a registry+v1 bundle.
    Render(crate::admin::render::RenderOptions),
    /// Publish images to an OCI registry.
    #[command(subcommand)]
    Image(image::ImageCommand),
    /// Print the ClusterExtension and ClusterCatalog CRDs as a YAML stream.
    Crd,
    /// Find packages across the cluster's catalogs, a catalog image or a directory.
    Search(search::SearchArgs),
    /// Every channel of a package with its bundles, upgrade edges and deprecations.
    Versions(versions::VersionsArgs),
    /// The versions an extension can reach now, and the shortest path to later ones.
    Upgrades(upgrades::UpgradesArgs),
    /// Why the resolver chose what it chose, or found nothing.
    Explain(explain::ExplainArgs),
    /// Create a ClusterExtension.
    Install(install::InstallArgs),
    /// Change a ClusterExtension's version, channels or upgrade policy.
    Upgrade(install::UpgradeArgs),
    /// Delete a ClusterExtension (and, once it is gone, the installer olmv1 created for it).
    Uninstall(crate::admin::install::UninstallOptions),
    /// The ServiceAccount, roles and bindings an installer needs for a package or extension.
    Rbac(Box<rbac::RbacArgs>),
    /// A readable summary of every extension: installed, target, conditions, upgrades.
    Status(status::StatusArgs),
    /// Move operators from OLM classic: check, catalogs.
    #[command(subcommand)]
    Migrate(migrate::MigrateCommand),
}

/// Parses the command line. Run as `kubectl-olmv1` (a link kubectl finds on PATH, so
/// `kubectl olmv1 search ...` works), help and errors name the plugin as kubectl users type it.
pub fn parse() -> Cli {
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
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    cli.name = matches.subcommand_name().unwrap_or_default().to_string();
    cli
}

/// Runs the command `cli` names, after the start-up every command shares.
pub async fn run(cli: Cli) -> ExitCode {
    start::init_tracing();
    start::exit_with_parent();
    crate::tls_profile::install_default_provider();
    use crate::admin::output::{MAX_MANIFEST_OUTPUT_BYTES, MAX_OUTPUT_BYTES};
    let limit = cli.max_output_bytes.unwrap_or(match cli.command {
        Command::Controller(_) | Command::Catalogd(_) => u64::MAX,
        Command::Render(_) | Command::Crd | Command::Install(_) | Command::Upgrade(_) | Command::Image(_) => {
            MAX_MANIFEST_OUTPUT_BYTES
        }
        _ => MAX_OUTPUT_BYTES,
    });
    crate::admin::output::start(&cli.name, limit);
    let code = match cli.command {
        Command::Controller(args) => controller::run(args).await,
        Command::Catalogd(args) => catalogd::run(*args).await,
        Command::Resolve(args) => resolve::run(args).await,
        Command::Render(args) => render::run(args).await,
        Command::Image(cmd) => image::run(cmd).await,
        Command::Search(args) => search::run(args).await,
        Command::Versions(args) => versions::run(args).await,
        Command::Upgrades(args) => upgrades::run(args).await,
        Command::Explain(args) => explain::run(args).await,
        Command::Install(args) => install::install(args).await,
        Command::Upgrade(args) => install::upgrade(args).await,
        Command::Uninstall(args) => install::uninstall(args).await,
        Command::Rbac(args) => rbac::run(*args).await,
        Command::Status(args) => status::run(args).await,
        Command::Migrate(cmd) => migrate::run(cmd).await,
        Command::Crd => {
            out!("{}", olmv1_api::crd::crds_yaml());
            ExitCode::SUCCESS
        }
    };
    crate::admin::output::finish(code)
}

/// Prints what a workflow of `command` reports: output on stdout, warnings on stderr after
/// `olmv1 COMMAND: `.
pub fn print_report(command: &str) -> impl FnMut(crate::admin::Report) + '_ {
    move |report| match report {
        crate::admin::Report::Out(text) => write_stdout(&text),
        crate::admin::Report::Warning(text) => errln!("olmv1 {command}: {text}"),
    }
}

/// Asks on the terminal whether to go on, unless `yes`; an error when it cannot ask.
pub fn confirm(question: &str, yes: bool) -> Result<(), String> {
    use std::io::{BufRead, IsTerminal};
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        return Err(format!(
            "{question}: stdin is not a terminal to confirm on; review with --dry-run, then pass --yes"
        ));
    }
    eprint!("{question}? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| format!("reading the answer: {e}"))?;
    if matches!(answer.trim(), "y" | "Y" | "yes") {
        Ok(())
    } else {
        Err("not confirmed; nothing was written".to_string())
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
