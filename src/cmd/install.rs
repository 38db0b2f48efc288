//! `olmv1 install|upgrade|uninstall`: the flags of `admin::install`'s workflows (write
//! ClusterExtensions as an admin would; `--dry-run` shows and writes nothing; without
//! `--service-account`, the extension's installer is created, updated and removed with it).

use std::process::ExitCode;

use super::sources::{fail, label_map};
use super::{confirm, print_report};
use crate::admin::install::{self, InstallOptions, Outcome, UninstallOptions, UpgradeOptions};
use crate::admin::sources::CatalogSources;

/// Arguments of `olmv1 install`.
#[derive(clap::Args, Debug)]
pub struct InstallArgs {
    /// The package to install.
    pub package: String,
    /// The ClusterExtension's name (default: the package name).
    #[arg(long)]
    pub name: Option<String>,
    /// The namespace the extension is installed into.
    #[arg(long, short = 'n')]
    pub namespace: String,
    /// The ServiceAccount (in that namespace) the bundle is installed as. Without it, olmv1
    /// creates `<extension>-installer` with exactly the permissions `olmv1 rbac` prints.
    #[arg(long)]
    pub service_account: Option<String>,
    /// Create the installer without asking.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// A version range (Masterminds syntax).
    #[arg(long)]
    pub version: Option<String>,
    /// A channel. Repeatable.
    #[arg(long = "channel", value_name = "CHANNEL")]
    pub channels: Vec<String>,
    /// Whether upgrades must follow catalog edges.
    #[arg(long, value_parser = ["CatalogProvided", "SelfCertified"])]
    pub upgrade_constraint_policy: Option<String>,
    /// Only catalogs with this label, `KEY=VALUE` (`spec.source.catalog.selector.matchLabels`).
    /// Repeatable.
    #[arg(long = "catalog-label", value_name = "KEY=VALUE")]
    pub catalog_labels: Vec<String>,
    /// Print the ClusterExtension and what would be installed; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Install the package's dependencies first: one ClusterExtension per bundle of the plan
    /// (`olmv1 resolve --with-dependencies`), pinned to its version and catalog, in the same
    /// namespace with the same service account, each waited for before the next.
    #[arg(long)]
    pub with_dependencies: bool,
    /// How long to wait for each extension of `--with-dependencies` to be installed, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub timeout: u64,
    /// The controller's namespace, where it records what each extension installed (the plan
    /// keeps what is installed).
    #[arg(long, env = "OLMV1_SYSTEM_NAMESPACE", default_value = "olmv1-system")]
    pub system_namespace: String,
    #[command(flatten)]
    pub sources: CatalogSources,
}

/// Arguments of `olmv1 upgrade`.
#[derive(clap::Args, Debug)]
pub struct UpgradeArgs {
    /// The ClusterExtension.
    pub extension: String,
    /// The new version range (e.g. an exact version from `olmv1 upgrades`).
    #[arg(long)]
    pub version: Option<String>,
    /// The channels, replacing the current ones. Repeatable.
    #[arg(long = "channel", value_name = "CHANNEL")]
    pub channels: Vec<String>,
    /// Whether upgrades must follow catalog edges.
    #[arg(long, value_parser = ["CatalogProvided", "SelfCertified"])]
    pub upgrade_constraint_policy: Option<String>,
    /// Print the changed ClusterExtension, what would be installed and how the installer's
    /// permissions change; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Change the permissions of the installer olmv1 created without asking.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// The controller's namespace (where it records installed revisions).
    #[arg(long, env = "OLMV1_SYSTEM_NAMESPACE", default_value = "olmv1-system")]
    pub system_namespace: String,
    #[command(flatten)]
    pub sources: CatalogSources,
}

/// Runs `olmv1 install`.
pub async fn install(args: InstallArgs) -> ExitCode {
    let catalog_labels = match label_map(&args.catalog_labels) {
        Ok(labels) => labels,
        Err(e) => return fail("install", &e),
    };
    let options = InstallOptions {
        package: args.package,
        name: args.name,
        namespace: args.namespace,
        service_account: args.service_account,
        version: args.version,
        channels: args.channels,
        upgrade_constraint_policy: args.upgrade_constraint_policy,
        catalog_labels,
        dry_run: args.dry_run,
        with_dependencies: args.with_dependencies,
        timeout_seconds: args.timeout,
        system_namespace: args.system_namespace,
    };
    let outcome = install::install(
        &options,
        &args.sources,
        &mut print_report("install"),
        &mut |question| confirm(question, args.yes),
    )
    .await;
    exit_code("install", outcome)
}

/// Runs `olmv1 upgrade`.
pub async fn upgrade(args: UpgradeArgs) -> ExitCode {
    let options = UpgradeOptions {
        extension: args.extension,
        version: args.version,
        channels: args.channels,
        upgrade_constraint_policy: args.upgrade_constraint_policy,
        dry_run: args.dry_run,
        system_namespace: args.system_namespace,
    };
    let outcome = install::upgrade(
        &options,
        &args.sources,
        &mut print_report("upgrade"),
        &mut |question| confirm(question, args.yes),
    )
    .await;
    exit_code("upgrade", outcome)
}

/// Runs `olmv1 uninstall`.
pub async fn uninstall(options: UninstallOptions) -> ExitCode {
    match install::uninstall(&options, &mut print_report("uninstall")).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail("uninstall", &e.to_string()),
    }
}

/// 0 when done, 1 when a dry run's resolution fails (it said why), 2 on any other failure.
fn exit_code(command: &str, outcome: Result<Outcome, install::InstallError>) -> ExitCode {
    match outcome {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::Unresolvable) => ExitCode::from(1),
        Err(e) => fail(command, &e.to_string()),
    }
}
