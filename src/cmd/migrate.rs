//! `olmv1 migrate check|catalogs|convert|rollback`: the way out of OLM classic (see `admin::migrate`).

use std::{path::PathBuf, process::ExitCode};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, api::ListParams};
use olmv1_api::v1::ClusterExtension;

use super::{
    install::wait_installed,
    rbac::{Target, compute_installer, confirm},
    render::{OutputFormat, format_objects},
    sources::{Output, SourceArgs, colour, fail, kube_client, print_json},
};
use crate::{
    admin::{
        migrate::{
            catalogs::{self, Action, CatalogPlan, Scope},
            check::Snapshot,
            check::{CheckRow, Verdict, check},
            classic::{Kind, api_resource},
            convert::{
                self, RECORD_KEY, RECORD_LABEL, Record, conversion_order, describe, load_record, prepare,
                record_name, rollback,
            },
            read::{read_snapshot, render_installed},
        },
        table::{Table, Tone},
        terminal::TerminalText,
    },
    bundle::render::WebhookProvider,
    catalog::client::CatalogClient,
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

impl ReachArgs {
    /// The source arguments that reach the cluster's catalogs and images this way.
    fn sources(&self) -> SourceArgs {
        SourceArgs {
            insecure_registries: self.insecure_registries.clone(),
            ca_files: self.ca_files.clone(),
            cache_dir: self.cache_dir.clone(),
            registries_conf: self.registries_conf.clone(),
            ..SourceArgs::default()
        }
    }

    fn catalog_client(&self) -> Result<CatalogClient, String> {
        let mut ca_pems = Vec::new();
        for file in &self.ca_files {
            ca_pems
                .push(std::fs::read(file).map_err(|e| format!("reading CA file {}: {e}", file.display()))?);
        }
        CatalogClient::new(&ca_pems).map_err(|e| e.to_string())
    }
}

async fn run_convert(args: ConvertArgs) -> Result<(), String> {
    let client = kube_client().await?;
    if !args.all {
        let ns = args.namespace.as_deref().unwrap_or_default();
        let name = args.subscription.as_deref().unwrap_or_default();
        return convert_one(&client, &args, ns, name, None).await;
    }
    // Half-done conversions first: their Subscriptions may no longer be Eligible.
    let records = Api::<ConfigMap>::namespaced(client.clone(), &args.system_namespace)
        .list(&ListParams::default().labels(RECORD_LABEL))
        .await
        .map_err(|e| format!("listing migration records: {e}"))?;
    let extensions = Api::<ClusterExtension>::all(client.clone());
    let mut resumed = Vec::new();
    let mut failed: Vec<String> = Vec::new();
    for cm in records.items {
        let Some(record) = cm
            .data
            .as_ref()
            .and_then(|d| d.get(RECORD_KEY))
            .and_then(|t| serde_json::from_str::<Record>(t).ok())
        else {
            continue;
        };
        let subs: Api<kube::api::DynamicObject> = Api::namespaced_with(
            client.clone(),
            &record.namespace,
            &api_resource(Kind::Subscription),
        );
        let sub_left = subs
            .get_opt(&record.subscription_name)
            .await
            .map_err(|e| e.to_string())?
            .is_some();
        let ext_missing = extensions
            .get_opt(&record.extension)
            .await
            .map_err(|e| e.to_string())?
            .is_none();
        if sub_left || ext_missing {
            let id = (record.namespace.clone(), record.subscription_name.clone());
            if let Err(e) = convert_one(&client, &args, &id.0, &id.1, None).await {
                errln!("olmv1 migrate convert: {}/{}: {e}", id.0, id.1);
                failed.push(format!("{}/{}", id.0, id.1));
            }
            resumed.push(id);
        }
    }
    let sources = args.reach.sources();
    let pull = sources.pull_options_checked()?;
    let http = args.reach.catalog_client()?;
    let snapshot = read_snapshot(&client, &http, &pull, None)
        .await
        .map_err(|e| e.to_string())?;
    let rows = check(&snapshot, None);
    for r in rows
        .iter()
        .filter(|r| !matches!(r.verdict, Verdict::Eligible | Verdict::Migrated))
    {
        outln!(
            "# skipped Subscription {}/{}: {} (olmv1 migrate check -n {} {})",
            r.namespace,
            r.subscription,
            r.verdict,
            r.namespace,
            r.subscription
        );
    }
    let order = conversion_order(&rows);
    if order.is_empty() && resumed.is_empty() {
        outln!("# no Eligible Subscription");
    }
    // One failure does not stop the others; what depends on a failed one is not tried (it
    // would wait for a dependency that never comes).
    for (ns, name) in order.iter().filter(|o| !resumed.contains(o)) {
        let after = rows
            .iter()
            .find(|r| &r.namespace == ns && &r.subscription == name)
            .map(|r| r.after.clone())
            .unwrap_or_default();
        if let Some(dep) = after.iter().find(|a| failed.contains(a)) {
            outln!("# skipped Subscription {ns}/{name}: it depends on {dep}, which failed");
            failed.push(format!("{ns}/{name}"));
            continue;
        }
        if let Err(e) = convert_one(&client, &args, ns, name, Some(&snapshot)).await {
            errln!("olmv1 migrate convert: {ns}/{name}: {e}");
            failed.push(format!("{ns}/{name}"));
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("not converted: {}", failed.join(", ")))
    }
}

/// Converts (or resumes) one Subscription: shows the plan, asks, runs the steps, waits for
/// Installed. `snapshot` is read when not given.
async fn convert_one(
    client: &kube::Client,
    args: &ConvertArgs,
    ns: &str,
    name: &str,
    snapshot: Option<&Snapshot>,
) -> Result<(), String> {
    let client = client.clone();
    let record = match load_record(&client, &args.system_namespace, ns, name)
        .await
        .map_err(|e| e.to_string())?
    {
        Some(record) => {
            outln!(
                "# resuming the conversion of Subscription {ns}/{name} recorded in ConfigMap {}/{}",
                args.system_namespace,
                record_name(ns, name)
            );
            record
        }
        None => {
            let sources = args.reach.sources();
            let pull = sources.pull_options_checked()?;
            let read;
            let snapshot = match snapshot {
                Some(s) => s,
                None => {
                    let http = args.reach.catalog_client()?;
                    read = read_snapshot(&client, &http, &pull, Some((ns, Some(name))))
                        .await
                        .map_err(|e| e.to_string())?;
                    &read
                }
            };
            let sub = snapshot
                .subscriptions
                .iter()
                .find(|s| {
                    s.metadata.namespace.as_deref() == Some(ns) && s.metadata.name.as_deref() == Some(name)
                })
                .ok_or_else(|| format!("Subscription {ns}/{name} not found"))?;
            // Refused before the bundle is pulled: check's reasons say why.
            convert::eligible(snapshot, ns, name).map_err(|e| e.to_string())?;
            let (rendered, config) = render_installed(&pull, snapshot, sub).await?;
            let prepared = prepare(&client, snapshot, ns, name, &rendered, &config)
                .await
                .map_err(|e| e.to_string())?;
            let mut record = prepared.record;
            if prepared.from_operator_group {
                outln!(
                    "# installer: ServiceAccount {ns}/{} (the OperatorGroup's serviceAccountName)",
                    prepared.service_account
                );
            } else {
                let ext: ClusterExtension = serde_json::from_value(record.extension_object.clone())
                    .map_err(|e| format!("invalid ClusterExtension: {e}"))?;
                let target = Target {
                    extension: &ext,
                    installed: None,
                    installed_objects: &[],
                    service_account: &prepared.service_account,
                    allow_escalate: false,
                    webhook_provider: WebhookProvider::default(),
                };
                let computed = compute_installer(&client, &target, &sources).await?;
                out!("{}", computed.yaml(&record.extension)?);
                record.installer = computed.objects;
            }
            record
        }
    };
    out!("{}", plan_text(&record)?);
    if args.dry_run {
        return Ok(());
    }
    confirm(
        &format!(
            "convert Subscription {ns}/{name} to ClusterExtension {:?} (classic's Subscription, InstallPlans and CSV are deleted, the workload kept)",
            record.extension
        ),
        args.yes,
    )?;
    let mut report = |line: String| outln!("{}", crate::admin::terminal::escape_value(&line));
    convert::convert(&client, &args.system_namespace, &record, &mut report)
        .await
        .map_err(|e| e.to_string())?;
    let api = Api::<ClusterExtension>::all(client.clone());
    // At whatever version: a rerun may find it unpinned already (and upgraded along its channel).
    wait_installed(&api, &record.extension, None, args.timeout).await?;
    outln!(
        "clusterextension/{} Installed: {} {}",
        record.extension,
        record.csv,
        record.version
    );
    convert::follow_subscription(&client, &record, &mut report)
        .await
        .map_err(|e| e.to_string())?;
    if args.delete_operatorgroup {
        convert::delete_operator_group(&client, &record, &mut report)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The ClusterExtension and the objects adopted, as convert shows them before writing.
pub fn plan_text(record: &Record) -> Result<String, String> {
    let mut text = format!(
        "# ClusterExtension {:?} converting Subscription {}/{} ({} {})\n",
        record.extension, record.namespace, record.subscription_name, record.csv, record.version
    );
    text.push_str(&format_objects(
        std::slice::from_ref(&record.extension_object),
        OutputFormat::Yaml,
    )?);
    text.push_str(&format!(
        "# adopted in place: {} objects classic made for {}\n",
        record.adopted.len(),
        record.csv
    ));
    for r in &record.adopted {
        text.push_str(&format!(
            "#   {}\n",
            crate::admin::terminal::escape_value(&describe(r))
        ));
    }
    if !record.pods_restart.is_empty() {
        text.push_str(&format!(
            "# pods restart: {}\n",
            crate::admin::terminal::escape_value(&record.pods_restart)
        ));
    }
    if !record.left.is_empty() {
        text.push_str(&format!(
            "# left in place, orphaned: {} roles and bindings classic made for {} under names olmv1 does not render (it grants its own); delete them once the extension is Installed\n",
            record.left.len(),
            record.csv
        ));
        for r in &record.left {
            text.push_str(&format!(
                "#   {}\n",
                crate::admin::terminal::escape_value(&describe(r))
            ));
        }
    }
    Ok(text)
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
    let mut report = |line: String| outln!("{}", crate::admin::terminal::escape_value(&line));
    rollback(&client, &args.system_namespace, &args.extension, &mut report)
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
    let sources = SourceArgs {
        insecure_registries: args.reach.insecure_registries.clone(),
        ca_files: args.reach.ca_files.clone(),
        cache_dir: args.reach.cache_dir.clone(),
        registries_conf: args.reach.registries_conf.clone(),
        ..SourceArgs::default()
    };
    let pull = match sources.pull_options_checked() {
        Ok(p) => p,
        Err(e) => return fail(COMMAND, &e),
    };
    let mut ca_pems = Vec::new();
    for file in &args.reach.ca_files {
        match std::fs::read(file) {
            Ok(pem) => ca_pems.push(pem),
            Err(e) => return fail(COMMAND, &format!("reading CA file {}: {e}", file.display())),
        }
    }
    let http = match CatalogClient::new(&ca_pems) {
        Ok(h) => h,
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
        return print_json(&rows);
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
        let code = print_json(&lines);
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
