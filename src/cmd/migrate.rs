//! `olmv1 migrate check|catalogs|convert|rollback`: the way out of OLM classic (see
//! `admin::migrate`; convert's orchestration is `admin::migrate::run`). The flags, the tables of
//! check and catalogs, and the exit codes.

use std::{path::PathBuf, process::ExitCode};

use super::{
    confirm, print_report,
    sources::{Output, colour, fail, kube_client, print_json},
};
use crate::admin::{
    migrate::{
        catalogs::{self, Action, CatalogPlan, Scope},
        check::{CheckRow, Verdict, check},
        convert::rollback,
        read::read_snapshot,
        run::{self, ConvertOptions, ConvertScope},
    },
    sources::CatalogSources,
    table::{Table, Tone},
    terminal::TerminalText,
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
    let reach = CatalogSources::from(&args.reach);
    let (pull, http) = match reach
        .pull_options_checked()
        .and_then(|pull| Ok((pull, reach.catalog_client()?)))
    {
        Ok(found) => found,
        Err(e) => return fail(COMMAND, &e.to_string()),
    };
    let scope = args
        .namespace
        .as_deref()
        .map(|ns| (ns, args.subscription.as_deref()));
    let snapshot = match read_snapshot(&client, &http, &pull, scope).await {
        Ok(s) => s,
        Err(e) => return fail(COMMAND, &e.to_string()),
    };
    let rows = check(&snapshot, scope);
    if let (Some(ns), Some(name), true) = (&args.namespace, &args.subscription, rows.is_empty()) {
        return fail(COMMAND, &format!("Subscription {ns}/{name} not found"));
    }
    if args.output == Output::Json {
        return print_json(COMMAND, &rows);
    }
    if rows.is_empty() {
        errln!("no Subscription found");
        return ExitCode::SUCCESS;
    }
    super::write_terminal(&render_check(&rows, colour()));
    ExitCode::SUCCESS
}

/// The text form of `migrate check`: the table, then each row's reasons with what to do.
pub fn render_check(rows: &[CheckRow], colour: bool) -> TerminalText {
    let mut t = Table::new(&[
        "NAMESPACE",
        "SUBSCRIPTION",
        "PACKAGE",
        "INSTALLED",
        "VERSION",
        "CATALOG",
        "VERDICT",
        "PODS RESTART",
    ]);
    let mut notes = String::new();
    for r in rows {
        let catalog = match (&r.catalog_source, &r.cluster_catalog) {
            (Some(s), Some(c)) => format!("{s} -> {c}"),
            (Some(s), None) => format!("{s} -> none"),
            (None, _) => r
                .extension
                .clone()
                .map_or("-".into(), |e| format!("ClusterExtension {e}")),
        };
        let tone = match r.verdict {
            Verdict::Eligible | Verdict::Migrated => Tone::Good,
            Verdict::Blocked => Tone::Bad,
            Verdict::Conflict => Tone::Warn,
        };
        t.toned_row(vec![
            (r.namespace.clone(), Tone::Plain),
            (r.subscription.clone(), Tone::Plain),
            (r.package.clone(), Tone::Plain),
            (r.installed_csv.clone().unwrap_or_else(|| "-".into()), Tone::Plain),
            (r.version.clone().unwrap_or_else(|| "-".into()), Tone::Plain),
            (catalog, Tone::Plain),
            (r.verdict.to_string(), tone),
            (r.pods_restart.to_string(), Tone::Plain),
        ]);
        for reason in &r.reasons {
            notes.push_str(&format!(
                "{}/{}: {}{}: {}\n  fix: {}\n",
                r.namespace,
                r.subscription,
                if reason.blocking { "" } else { "note: " },
                reason.code,
                reason.message,
                reason.fix
            ));
        }
    }
    let mut out = TerminalText::new();
    out.push_table(&t, colour);
    if !notes.is_empty() {
        out.push_str("\n");
        out.push_str(&notes);
    }
    out
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
    if args.output == Output::Json {
        let code = print_json(COMMAND, &lines);
        return if failed { ExitCode::from(1) } else { code };
    }
    if lines.is_empty() {
        errln!("no CatalogSource found");
    } else {
        super::write_terminal(&render_catalogs(
            &lines,
            args.dry_run,
            args.delete_catalogsource,
            colour(),
        ));
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// The text form of `migrate catalogs`.
pub fn render_catalogs(lines: &[CatalogPlan], dry_run: bool, delete: bool, colour: bool) -> TerminalText {
    let mut t = Table::new(&[
        "CATALOGSOURCE",
        "CLUSTERCATALOG",
        "IMAGE",
        "PRIORITY",
        "POLL",
        "ACTION",
    ]);
    let mut notes = String::new();
    for l in lines {
        let (action, tone) = match (&l.action, dry_run) {
            (Action::Create, false) => ("created".to_string(), Tone::Good),
            (Action::Create, true) => ("would create".to_string(), Tone::Good),
            (Action::Update, false) => ("updated".to_string(), Tone::Good),
            (Action::Update, true) => ("would update".to_string(), Tone::Good),
            (Action::Served(by), _) => (format!("served by {by}"), Tone::Plain),
            (Action::Skip(_), _) => ("skipped".to_string(), Tone::Bad),
        };
        let action = match (&l.action, delete) {
            (Action::Skip(_), _) | (_, false) => action,
            (_, true) if dry_run => format!("{action}; would delete the CatalogSource"),
            (_, true) => format!("{action}; CatalogSource deleted"),
        };
        t.toned_row(vec![
            (l.catalog_source.clone(), Tone::Plain),
            (l.cluster_catalog.clone(), Tone::Plain),
            (l.image.clone(), Tone::Plain),
            (l.priority.to_string(), Tone::Plain),
            (
                l.poll_interval_minutes.map_or("-".into(), |m| format!("{m}m")),
                Tone::Plain,
            ),
            (action, tone),
        ]);
        if let Action::Skip(why) = &l.action {
            notes.push_str(&format!("{}: {why}\n", l.catalog_source));
        }
        for n in &l.notes {
            notes.push_str(&format!("{}: {n}\n", l.catalog_source));
        }
    }
    let mut out = TerminalText::new();
    out.push_table(&t, colour);
    if !notes.is_empty() {
        out.push_str("\n");
        out.push_str(&notes);
    }
    out
}
