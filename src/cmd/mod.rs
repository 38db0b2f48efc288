//! Owns the command line: each command's flags and process start-up, one module per command.
//! May import every other module; nothing imports it (it is the top layer).
//!
//! Every byte a command writes for people passes [`write_stdout`] or [`write_stderr`], which
//! escape control and format characters (catalog, bundle and cluster text never reaches the
//! terminal raw; see `admin::terminal`); the values a command quotes are escaped as values
//! (`escape_value`), newlines too. Only [`write_terminal`] writes a table's colours. The three
//! are the one writer: each stream stops at `--max-output-bytes`, and [`finish_output`] says
//! what was left out.

/// `print!` for command output: see [`write_stdout`].
macro_rules! out {
    ($($arg:tt)*) => { $crate::cmd::write_stdout(&format!($($arg)*)) };
}

/// `println!` for command output: see [`write_stdout`].
macro_rules! outln {
    ($($arg:tt)*) => { $crate::cmd::write_stdout(&format!("{}\n", format_args!($($arg)*))) };
}

/// `eprintln!` for messages: see [`write_stderr`].
macro_rules! errln {
    ($($arg:tt)*) => { $crate::cmd::write_stderr(&format!("{}\n", format_args!($($arg)*))) };
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

use crate::admin::terminal::{TerminalText, escape_text};

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

    /// The most bytes a command prints on stdout: past it, text is cut after its last whole line
    /// and JSON is not printed, with a message saying so and exit status 2 (default: 1 MiB;
    /// 64 MiB for the manifests `render`, `install`, `upgrade` and `crd` print).
    #[arg(long, global = true, value_name = "BYTES", env = "OLMV1_MAX_OUTPUT_BYTES")]
    max_output_bytes: Option<u64>,
}

/// The most bytes an admin command prints on stdout by default (`--max-output-bytes`): its
/// answers are tables and lists for people, which the largest real catalogs keep far below it
/// (docs/cli.md, "Output").
pub const MAX_OUTPUT_BYTES: u64 = 1 << 20;

/// The default for commands that print a bundle's manifests: as much as a bundle may unpack
/// to (`UnpackLimits::BUNDLE`).
pub const MAX_MANIFEST_OUTPUT_BYTES: u64 = 64 << 20;

impl Command {
    /// The command's name, as messages start with it.
    fn name(&self) -> &'static str {
        match self {
            Command::Controller(_) => "controller",
            Command::Catalogd(_) => "catalogd",
            Command::Resolve(_) => "resolve",
            Command::Render(_) => "render",
            Command::Image(_) => "image",
            Command::Crd => "crd",
            Command::Search(_) => "search",
            Command::Versions(_) => "versions",
            Command::Upgrades(_) => "upgrades",
            Command::Explain(_) => "explain",
            Command::Install(_) => "install",
            Command::Upgrade(_) => "upgrade",
            Command::Uninstall(_) => "uninstall",
            Command::Rbac(_) => "rbac",
            Command::Status(_) => "status",
            Command::Migrate(_) => "migrate",
        }
    }

    /// The default of `--max-output-bytes`.
    fn default_output_limit(&self) -> u64 {
        match self {
            Command::Controller(_) | Command::Catalogd(_) => u64::MAX,
            Command::Render(_)
            | Command::Crd
            | Command::Install(_)
            | Command::Upgrade(_)
            | Command::Image(_) => MAX_MANIFEST_OUTPUT_BYTES,
            _ => MAX_OUTPUT_BYTES,
        }
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the ClusterExtension controller.
    Controller(controller::ControllerArgs),
    /// Run the catalog server (ClusterCatalog reconciler, or standalone `serve`).
    Catalogd(Box<catalogd::CatalogdArgs>),
    /// Resolve the bundle a ClusterExtension would install, with no cluster.
    Resolve(resolve::ResolveArgs),
    /// Render the manifests of a registry+v1 bundle.
    Render(render::RenderArgs),
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
    Uninstall(install::UninstallArgs),
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
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// Runs the command `cli` names, after the start-up every command shares.
pub async fn run(cli: Cli) -> ExitCode {
    start::init_tracing();
    start::exit_with_parent();
    crate::tls_profile::install_default_provider();
    let name = cli.command.name();
    set_output_limit(
        cli.max_output_bytes
            .unwrap_or_else(|| cli.command.default_output_limit()),
    );
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
    finish_output(name, code)
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

/// What has been written to one stream, against the limit (`--max-output-bytes`).
struct Written {
    bytes: u64,
    left_out: u64,
}

/// The one writer's state: every byte a command writes passes [`write_stdout`],
/// [`write_terminal`] or [`write_stderr`], which count it here.
struct OutputBudget {
    limit: u64,
    stdout: Written,
    stderr: Written,
}

static OUTPUT: std::sync::Mutex<OutputBudget> = std::sync::Mutex::new(OutputBudget {
    limit: u64::MAX,
    stdout: Written {
        bytes: 0,
        left_out: 0,
    },
    stderr: Written {
        bytes: 0,
        left_out: 0,
    },
});

fn output() -> std::sync::MutexGuard<'static, OutputBudget> {
    OUTPUT.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Sets the most bytes the command writes to each of stdout and stderr.
pub fn set_output_limit(limit: u64) {
    output().limit = limit;
}

/// The output limit, and how many bytes stdout can still take.
pub fn output_room() -> (u64, u64) {
    let budget = output();
    (budget.limit, budget.limit.saturating_sub(budget.stdout.bytes))
}

/// What `text` may print of itself when `written` bytes were printed already: all of it within
/// the limit, else its whole lines that fit (the rest is counted as left out, and nothing more
/// is printed).
fn within_limit<'t>(written: &mut Written, limit: u64, text: &'t [u8]) -> &'t [u8] {
    let room = limit.saturating_sub(written.bytes);
    if written.left_out == 0 && text.len() as u64 <= room {
        written.bytes += text.len() as u64;
        return text;
    }
    let room = usize::try_from(room).unwrap_or(usize::MAX).min(text.len());
    let end = if written.left_out == 0 {
        text[..room]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1)
    } else {
        0
    };
    written.bytes += end as u64;
    written.left_out += (text.len() - end) as u64;
    &text[..end]
}

/// Ends the command: when its output passed the limit, says so (one sentence on stderr, past the
/// limit) and turns the exit status into 2.
pub fn finish_output(command: &str, code: ExitCode) -> ExitCode {
    let (limit, stdout, stderr) = {
        let budget = output();
        (budget.limit, budget.stdout.left_out, budget.stderr.left_out)
    };
    if stdout == 0 && stderr == 0 {
        return code;
    }
    let what = match (stdout, stderr) {
        (0, e) => format!("{e} bytes of messages"),
        (o, 0) => format!("{o} bytes of output"),
        (o, e) => format!("{o} bytes of output and {e} of messages"),
    };
    let mut stderr_handle = std::io::stderr().lock();
    let _ = writeln!(
        stderr_handle,
        "olmv1 {command}: {what} were not printed: over the limit of {limit} bytes (--max-output-bytes)"
    );
    ExitCode::from(2)
}

/// Writes command output to stdout, its control and format characters but newline and tab escaped
/// ([`escape_text`]), within the output limit. A reader that went away (`olmv1 versions ... |
/// head -1`) ends the command quietly with status 0, as other command-line tools do, rather than
/// with `print!`'s panic.
pub fn write_stdout(text: &str) {
    write_raw_stdout(&escape_text(text));
}

/// Writes text built for the terminal (escaped, with a table's colours) to stdout, within the
/// output limit.
pub fn write_terminal(text: &TerminalText) {
    write_raw_stdout(text.as_str());
}

fn write_raw_stdout(text: &str) {
    let mut budget = output();
    let limit = budget.limit;
    let shown = within_limit(&mut budget.stdout, limit, text.as_bytes());
    if shown.is_empty() {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_all(shown).and_then(|()| stdout.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("olmv1: writing the output: {e}");
        std::process::exit(1);
    }
}

/// Writes a message to stderr, its control and format characters but newline and tab escaped
/// (error messages quote bundle, package and catalog names), within the output limit.
pub fn write_stderr(text: &str) {
    let escaped = escape_text(text);
    let mut budget = output();
    let limit = budget.limit;
    let shown = within_limit(&mut budget.stderr, limit, escaped.as_bytes());
    let mut stderr = std::io::stderr().lock();
    // Nothing better can be done when stderr is gone.
    let _ = stderr.write_all(shown);
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }

    #[test]
    fn output_past_the_limit_is_cut_after_its_last_whole_line_and_counted() {
        let mut written = super::Written {
            bytes: 0,
            left_out: 0,
        };
        assert_eq!(super::within_limit(&mut written, 10, b"abc\n"), b"abc\n");
        assert_eq!(super::within_limit(&mut written, 10, b"de\nfgh\nij"), b"de\n");
        assert_eq!((written.bytes, written.left_out), (7, 6));
        // Once cut, nothing more, even what would fit.
        assert_eq!(super::within_limit(&mut written, 10, b"k\n"), b"");
        assert_eq!((written.bytes, written.left_out), (7, 8));
        // A line longer than the limit prints nothing of itself.
        let mut written = super::Written {
            bytes: 0,
            left_out: 0,
        };
        assert_eq!(super::within_limit(&mut written, 4, b"abcdef\n"), b"");
        assert_eq!(written.left_out, 7);
    }
}
