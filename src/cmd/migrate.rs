//! `olmv1 migrate check|catalogs|convert|rollback`: the way out of OLM classic (see
//! `admin::migrate`; convert's orchestration is `admin::migrate::run`, the tables of check and
//! catalogs `admin::migrate::report`). The flags and the exit codes.

use std::{path::PathBuf, process::ExitCode};

use super::{
    confirm, print_report,
    sources::{Output, colour, fail, kube_client, print_json, print_text},
};
use crate::admin::{
    command_meter,
    migrate::{
        catalogs::{self, Scope},
        check::count_not_checked,
        convert::rollback,
        read::check_cluster,
        report::{render_catalogs, render_check},
        run::{self, ConvertOptions, ConvertScope},
    },
    not_all_checked,
    sources::CatalogSources,
};

/// `olmv1 migrate`.
#[derive(clap::Subcommand, Debug)]
pub enum MigrateCommand {
    /// Whether each OLM classic Subscription can be taken over, and what to do if not (read-only).
    Check(CheckArgs),
    /// A ClusterCatalog for each image-backed CatalogSource.
    Catalogs(CatalogsArgs),
    /// Takes one Eligible Subscription over in place: installer, adoption, classic detached,
    /// ClusterExtension pinned to the installed version.
    Convert(ConvertArgs),
    /// Gives a converted ClusterExtension back to classic, its workload kept.
    Rollback(RollbackArgs),
}

/// Arguments of `olmv1 migrate convert`.
#[derive(clap::Args, Debug)]
pub struct ConvertArgs {
    /// The Subscription (with `-n`).
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub subscription: Option<String>,
    /// Its namespace.
    #[arg(short = 'n', long = "namespace", required_unless_present = "all")]
    pub namespace: Option<String>,
    /// Every Eligible Subscription, providers of dependencies first, each Installed before the
    /// next; conversions left half done are resumed first.
    #[arg(long)]
    pub all: bool,
    /// Print the installer, the ClusterExtension and what is adopted; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Convert without asking.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Once Installed, delete the OperatorGroup too, when no Subscription is left in its
    /// namespace (rollback recreates it).
    #[arg(long)]
    pub delete_operatorgroup: bool,
    /// How long to wait for the ClusterExtension to be installed, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub timeout: u64,
    /// The controller's namespace, where the migration record is kept.
    #[arg(long, env = "OLMV1_SYSTEM_NAMESPACE", default_value = "olmv1-system")]
    pub system_namespace: String,
    #[command(flatten)]
    pub reach: ReachArgs,
}

/// Arguments of `olmv1 migrate rollback`.
#[derive(clap::Args, Debug)]
pub struct RollbackArgs {
    /// The ClusterExtension convert made.
    pub extension: String,
    /// Roll back without asking.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// The controller's namespace, where the migration record is kept.
    #[arg(long, env = "OLMV1_SYSTEM_NAMESPACE", default_value = "olmv1-system")]
    pub system_namespace: String,
}

/// How bundle images and catalogs are reached.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ReachArgs {
    /// Registry hosts reached over plain HTTP (loopback registries always are).
    #[arg(long = "insecure-registry", value_name = "HOST")]
    pub insecure_registries: Vec<String>,
    /// Extra CA certificates (PEM) for catalog servers and registries.
    #[arg(long = "ca-file", value_name = "PATH")]
    pub ca_files: Vec<PathBuf>,
    /// Where pulled images are cached.
    #[arg(long, value_name = "DIR", env = "OLMV1_IMAGE_CACHE")]
    pub cache_dir: Option<PathBuf>,
    /// containers-registries.conf(5) file for image pulls.
    #[arg(long, value_name = "PATH", env = "CONTAINERS_REGISTRIES_CONF")]
    pub registries_conf: Option<PathBuf>,
}

/// Arguments of `olmv1 migrate check`.
#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// One Subscription (with `-n`).
    pub subscription: Option<String>,
    /// The Subscriptions of this namespace.
    #[arg(short = 'n', long = "namespace")]
    pub namespace: Option<String>,
    /// Every namespace (the default without `-n`).
    #[arg(short = 'A', long = "all-namespaces", conflicts_with = "namespace")]
    pub all_namespaces: bool,
    #[command(flatten)]
    pub reach: ReachArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t)]
    pub output: Output,
}

/// Arguments of `olmv1 migrate catalogs`.
#[derive(clap::Args, Debug)]
pub struct CatalogsArgs {
    /// One CatalogSource (with `-n`).
    pub catalog_source: Option<String>,
    /// The CatalogSources of this namespace (all namespaces' without it).
    #[arg(short = 'n', long = "namespace")]
    pub namespace: Option<String>,
    /// Print what would be done; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Delete each CatalogSource once its ClusterCatalog exists (kept by default: classic's
    /// Subscriptions still resolve from it).
    #[arg(long)]
    pub delete_catalogsource: bool,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t)]
    pub output: Output,
}

/// Runs `olmv1 migrate ...`.
pub async fn run(command: MigrateCommand) -> ExitCode {
    match command {
        MigrateCommand::Check(args) => run_check(args).await,
        MigrateCommand::Catalogs(args) => run_catalogs(args).await,
        MigrateCommand::Convert(args) => match run_convert(args).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail("migrate convert", &e),
        },
        MigrateCommand::Rollback(args) => match run_rollback(args).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail("migrate rollback", &e),
        },
    }
}

impl From<&ReachArgs> for CatalogSources {
    fn from(reach: &ReachArgs) -> Self {
        CatalogSources {
            insecure_registries: reach.insecure_registries.clone(),
            ca_files: reach.ca_files.clone(),
            cache_dir: reach.cache_dir.clone(),
            registries_conf: reach.registries_conf.clone(),
            ..CatalogSources::default()
        }
    }
}

async fn run_convert(args: ConvertArgs) -> Result<(), String> {
    let client = kube_client().await?;
    let scope = if args.all {
        ConvertScope::All
    } else {
        ConvertScope::One {
            namespace: args.namespace.clone().unwrap_or_default(),
            name: args.subscription.clone().unwrap_or_default(),
        }
    };
    let options = ConvertOptions {
        scope,
        dry_run: args.dry_run,
        delete_operator_group: args.delete_operatorgroup,
        timeout_seconds: args.timeout,
        system_namespace: args.system_namespace.clone(),
        reach: (&args.reach).into(),
    };
    run::run_convert(
        &client,
        &options,
        &mut print_report("migrate convert"),
        &mut |question| confirm(question, args.yes),
    )
    .await
    .map_err(|e| e.to_string())
}

async fn run_rollback(args: RollbackArgs) -> Result<(), String> {
    let client = kube_client().await?;
    confirm(
        &format!(
            "delete ClusterExtension {:?} without uninstalling and give its workload back to classic",
            args.extension
        ),
        args.yes,
    )?;
    let mut report = print_report("migrate rollback");
    rollback(
        &client,
        &args.system_namespace,
        &args.extension,
        &mut run::lines(&mut report),
    )
    .await
    .map_err(|e| e.to_string())
}

async fn run_check(args: CheckArgs) -> ExitCode {
    const COMMAND: &str = "migrate check";
    if args.subscription.is_some() && args.namespace.is_none() {
        return fail(
            COMMAND,
            "a SUBSCRIPTION is named with its namespace: -n NAMESPACE",
        );
    }
    let client = match kube_client().await {
        Ok(c) => c,
        Err(e) => return fail(COMMAND, &e),
    };
    let scope = args
        .namespace
        .as_deref()
        .map(|ns| (ns, args.subscription.as_deref()));
    let (rows, checked) = match check_cluster(&client, &(&args.reach).into(), scope).await {
        Ok(checked) => checked,
        Err(e) => return fail(COMMAND, &e.to_string()),
    };
    if let (Some(ns), Some(name), true) = (&args.namespace, &args.subscription, rows.is_empty()) {
        return fail(COMMAND, &format!("Subscription {ns}/{name} not found"));
    }
    // Each Subscription's dependencies had a part of the command's meter; what the command
    // prints has one more, so that the rows the first did not reach are shown.
    let mut meter = command_meter();
    let printed = if args.output == Output::Json {
        print_json(&rows, &mut meter)
    } else if rows.is_empty() {
        errln!("no Subscription found");
        ExitCode::SUCCESS
    } else {
        print_text(render_check(&rows, colour(), &mut meter))
    };
    match checked.exhausted() {
        Some(e) if printed == ExitCode::SUCCESS => match count_not_checked(&rows) {
            // Dependencies span namespaces: those not checked may all be out of scope.
            0 => fail(
                COMMAND,
                &format!(
                    "checking the Subscriptions {e}: some outside the scope were not checked, which those shown may depend on"
                ),
            ),
            missed => fail(COMMAND, &not_all_checked(e, "Subscriptions", missed, rows.len())),
        },
        _ => printed,
    }
}

async fn run_catalogs(args: CatalogsArgs) -> ExitCode {
    const COMMAND: &str = "migrate catalogs";
    let scope = match (&args.catalog_source, &args.namespace) {
        (Some(name), Some(ns)) => Scope::One(ns, name),
        (Some(_), None) => {
            return fail(
                COMMAND,
                "a CATALOGSOURCE is named with its namespace: -n NAMESPACE",
            );
        }
        (None, Some(ns)) => Scope::Namespace(ns),
        (None, None) => Scope::All,
    };
    let client = match kube_client().await {
        Ok(c) => c,
        Err(e) => return fail(COMMAND, &e),
    };
    let outcome = match catalogs::run(&client, scope, args.dry_run, args.delete_catalogsource).await {
        Ok(o) => o,
        Err(e) => return fail(COMMAND, &e.to_string()),
    };
    for failure in &outcome.failures {
        errln!("olmv1 {COMMAND}: {failure}");
    }
    let failed = !outcome.failures.is_empty();
    let lines = outcome.lines;
    if let (Scope::One(ns, name), true) = (scope, lines.is_empty()) {
        return fail(COMMAND, &format!("CatalogSource {ns}/{name} not found"));
    }
    let mut meter = command_meter();
    if args.output == Output::Json {
        let code = print_json(&lines, &mut meter);
        return if failed { ExitCode::from(1) } else { code };
    }
    if lines.is_empty() {
        errln!("no CatalogSource found");
    } else {
        let printed = print_text(render_catalogs(
            &lines,
            args.dry_run,
            args.delete_catalogsource,
            colour(),
            &mut meter,
        ));
        if printed != ExitCode::SUCCESS {
            return printed;
        }
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
