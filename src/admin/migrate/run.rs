//! `olmv1 migrate convert`'s orchestration: one Subscription, or every Eligible one
//! (conversions left half done resumed first, then providers of dependencies before what needs
//! them, what depends on a failed one skipped); for each, the plan shown and confirmed, convert's
//! steps (`convert.rs`), the wait for `Installed`, the Subscription followed and, when asked, the
//! OperatorGroup deleted.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Client,
    api::{DynamicObject, ListParams},
};
use olmv1_api::v1::ClusterExtension;

use super::{
    MigrateError,
    check::{Snapshot, Verdict, check},
    classic::{Kind, api_resource},
    convert::{
        self, ConvertError, RECORD_KEY, RECORD_LABEL, Record, conversion_order, describe, load_record,
        prepare, record_name,
    },
    read::{read_snapshot, render_installed},
};
use crate::{
    admin::{
        Confirm, Report, Reporter,
        install::{InstallError, wait_installed},
        installer::{InstallerError, Target, compute_installer},
        sources::{CatalogSources, SourcesError},
        terminal::{escape_value, yaml_stream},
    },
    bundle::render::WebhookProvider,
};

/// Why `migrate convert` stopped (for one Subscription, or, with every one, what was left).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The registries configuration, a CA file or the catalog client.
    #[error(transparent)]
    Sources(#[from] SourcesError),
    /// Classic's objects could not be read.
    #[error(transparent)]
    Read(#[from] MigrateError),
    /// A step of convert.
    #[error(transparent)]
    Convert(#[from] ConvertError),
    /// The installer could not be computed.
    #[error(transparent)]
    Installer(#[from] InstallerError),
    /// The ClusterExtension was not Installed.
    #[error(transparent)]
    Install(#[from] InstallError),
    /// The Subscription is not in the snapshot read.
    #[error("Subscription {namespace}/{name} not found")]
    NotFound {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The installed bundle could not be rendered (`read::render_installed` words it).
    #[error("{0}")]
    Render(String),
    /// The recorded ClusterExtension is not one.
    #[error("invalid ClusterExtension: {0}")]
    Invalid(#[source] serde_json::Error),
    /// The migration records could not be listed.
    #[error("listing migration records: {0}")]
    Records(#[source] kube::Error),
    /// A Subscription or ClusterExtension of a record could not be read.
    #[error(transparent)]
    Api(#[from] kube::Error),
    /// The plan's YAML could not be written.
    #[error(transparent)]
    Yaml(#[from] serde_saphyr::SerializeError),
    /// The admin did not confirm (or could not be asked).
    #[error("{0}")]
    NotConfirmed(String),
    /// With every Subscription: those not converted (each reported as it failed).
    #[error("not converted: {}", .0.join(", "))]
    NotConverted(Vec<String>),
}

/// Which Subscriptions convert takes over.
#[derive(Debug, Clone)]
pub enum ConvertScope {
    /// One, by namespace and name.
    One {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// Every Eligible one, after the conversions left half done.
    All,
}

/// How convert runs.
#[derive(Debug, Clone)]
pub struct ConvertOptions {
    /// Which Subscriptions.
    pub scope: ConvertScope,
    /// Show the installer, the ClusterExtension and what is adopted; write nothing.
    pub dry_run: bool,
    /// Once Installed, delete the OperatorGroup when no Subscription is left in its namespace.
    pub delete_operator_group: bool,
    /// How long to wait for each ClusterExtension to be installed, in seconds.
    pub timeout_seconds: u64,
    /// The controller's namespace, where the migration records are kept.
    pub system_namespace: String,
    /// How bundle images and catalogs are reached (registries, CAs, cache; no catalog named).
    pub reach: CatalogSources,
}

/// `olmv1 migrate convert`: converts the Subscriptions `options.scope` names. With every one, a
/// failure does not stop the others: it is reported as a warning (`NS/NAME: why`) and the run
/// ends with [`RunError::NotConverted`].
pub async fn run_convert(
    client: &Client,
    options: &ConvertOptions,
    report: Reporter<'_>,
    confirm: Confirm<'_>,
) -> Result<(), RunError> {
    if let ConvertScope::One { namespace, name } = &options.scope {
        return convert_one(client, options, namespace, name, None, report, confirm).await;
    }
    // Half-done conversions first: their Subscriptions may no longer be Eligible.
    let records = Api::<ConfigMap>::namespaced(client.clone(), &options.system_namespace)
        .list(&ListParams::default().labels(RECORD_LABEL))
        .await
        .map_err(RunError::Records)?;
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
        let subs: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            &record.namespace,
            &api_resource(Kind::Subscription),
        );
        let sub_left = subs.get_opt(&record.subscription_name).await?.is_some();
        let ext_missing = extensions.get_opt(&record.extension).await?.is_none();
        if sub_left || ext_missing {
            let id = (record.namespace.clone(), record.subscription_name.clone());
            if let Err(e) = convert_one(client, options, &id.0, &id.1, None, report, confirm).await {
                report(Report::Warning(format!("{}/{}: {e}", id.0, id.1)));
                failed.push(format!("{}/{}", id.0, id.1));
            }
            resumed.push(id);
        }
    }
    let pull = options.reach.pull_options_checked()?;
    let http = options.reach.catalog_client()?;
    let snapshot = read_snapshot(client, &http, &pull, None).await?;
    // A Subscription the command's meter does not reach is Blocked (its row says why): skipped.
    let rows = check(&snapshot, None, &mut crate::admin::command_meter());
    for r in rows
        .iter()
        .filter(|r| !matches!(r.verdict, Verdict::Eligible | Verdict::Migrated))
    {
        report(Report::Out(format!(
            "# skipped Subscription {}/{}: {} (olmv1 migrate check -n {} {})\n",
            r.namespace, r.subscription, r.verdict, r.namespace, r.subscription
        )));
    }
    let order = conversion_order(&rows);
    if order.is_empty() && resumed.is_empty() {
        report(Report::Out("# no Eligible Subscription\n".into()));
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
            report(Report::Out(format!(
                "# skipped Subscription {ns}/{name}: it depends on {dep}, which failed\n"
            )));
            failed.push(format!("{ns}/{name}"));
            continue;
        }
        if let Err(e) = convert_one(client, options, ns, name, Some(&snapshot), report, confirm).await {
            report(Report::Warning(format!("{ns}/{name}: {e}")));
            failed.push(format!("{ns}/{name}"));
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(RunError::NotConverted(failed))
    }
}

/// Converts (or resumes) one Subscription: shows the plan, asks, runs the steps, waits for
/// Installed. `snapshot` is read when not given.
async fn convert_one(
    client: &Client,
    options: &ConvertOptions,
    ns: &str,
    name: &str,
    snapshot: Option<&Snapshot>,
    report: Reporter<'_>,
    confirm: Confirm<'_>,
) -> Result<(), RunError> {
    let record = match load_record(client, &options.system_namespace, ns, name).await? {
        Some(record) => {
            report(Report::Out(format!(
                "# resuming the conversion of Subscription {ns}/{name} recorded in ConfigMap {}/{}\n",
                options.system_namespace,
                record_name(ns, name)
            )));
            record
        }
        None => prepare_record(client, options, ns, name, snapshot, report).await?,
    };
    report(Report::Out(plan_text(&record)?));
    if options.dry_run {
        return Ok(());
    }
    confirm(&format!(
        "convert Subscription {ns}/{name} to ClusterExtension {:?} (classic's Subscription, InstallPlans and CSV are deleted, the workload kept)",
        record.extension
    ))
    .map_err(RunError::NotConfirmed)?;
    convert::convert(client, &options.system_namespace, &record, &mut lines(report)).await?;
    let api = Api::<ClusterExtension>::all(client.clone());
    // At whatever version: a rerun may find it unpinned already (and upgraded along its channel).
    wait_installed(&api, &record.extension, None, options.timeout_seconds).await?;
    report(Report::Out(format!(
        "clusterextension/{} Installed: {} {}\n",
        record.extension, record.csv, record.version
    )));
    convert::remove_replaced(client, &record, &mut lines(report)).await?;
    convert::follow_subscription(client, &record, &mut lines(report)).await?;
    if options.delete_operator_group {
        convert::delete_operator_group(client, &record, &mut lines(report)).await?;
    }
    Ok(())
}

/// The lines convert's steps report, each printed escaped as a value (they quote cluster text).
pub fn lines<'r>(report: &'r mut dyn FnMut(Report)) -> impl FnMut(String) + 'r {
    move |line| report(Report::Out(format!("{}\n", escape_value(&line))))
}

/// A new conversion's record: the Subscription judged Eligible, its installed bundle rendered,
/// what is adopted, and the installer (shown) unless the OperatorGroup names an account.
async fn prepare_record(
    client: &Client,
    options: &ConvertOptions,
    ns: &str,
    name: &str,
    snapshot: Option<&Snapshot>,
    report: Reporter<'_>,
) -> Result<Record, RunError> {
    let pull = options.reach.pull_options_checked()?;
    let read;
    let snapshot = match snapshot {
        Some(s) => s,
        None => {
            let http = options.reach.catalog_client()?;
            read = read_snapshot(client, &http, &pull, Some((ns, Some(name)))).await?;
            &read
        }
    };
    let sub = snapshot
        .subscriptions
        .iter()
        .find(|s| s.metadata.namespace.as_deref() == Some(ns) && s.metadata.name.as_deref() == Some(name))
        .ok_or_else(|| RunError::NotFound {
            namespace: ns.to_string(),
            name: name.to_string(),
        })?;
    // Refused before the bundle is pulled: check's reasons say why.
    convert::eligible(snapshot, ns, name)?;
    let (rendered, config) = render_installed(&pull, snapshot, sub)
        .await
        .map_err(RunError::Render)?;
    let prepared = prepare(client, snapshot, ns, name, &rendered, &config).await?;
    let mut record = prepared.record;
    if prepared.from_operator_group {
        report(Report::Out(format!(
            "# installer: ServiceAccount {ns}/{} (the OperatorGroup's serviceAccountName)\n",
            prepared.service_account
        )));
    } else {
        let ext: ClusterExtension =
            serde_json::from_value(record.extension_object.clone()).map_err(RunError::Invalid)?;
        let target = Target {
            extension: &ext,
            installed: None,
            installed_objects: &[],
            service_account: &prepared.service_account,
            allow_escalate: false,
            webhook_provider: WebhookProvider::default(),
            operator_conditions: snapshot.operator_conditions_served,
        };
        let computed = compute_installer(client, &target, &options.reach).await?;
        report(Report::Out(computed.yaml(&record.extension)?));
        record.installer = computed.objects;
    }
    Ok(record)
}

/// The ClusterExtension and the objects adopted, as convert shows them before writing.
pub fn plan_text(record: &Record) -> Result<String, serde_saphyr::SerializeError> {
    let mut text = format!(
        "# ClusterExtension {:?} converting Subscription {}/{} ({} {})\n",
        record.extension, record.namespace, record.subscription_name, record.csv, record.version
    );
    text.push_str(&yaml_stream(std::slice::from_ref(&record.extension_object))?);
    text.push_str(&format!(
        "# adopted in place: {} objects classic made for {}\n",
        record.adopted.len(),
        record.csv
    ));
    for r in &record.adopted {
        text.push_str(&format!("#   {}\n", escape_value(&describe(r))));
    }
    if !record.pods_restart.is_empty() {
        text.push_str(&format!(
            "# pods restart: {}\n",
            escape_value(&record.pods_restart)
        ));
    }
    for certificate in &record.certificates {
        text.push_str(&format!(
            "# certificate replaced: {}\n",
            escape_value(certificate)
        ));
    }
    if !record.left.is_empty() {
        text.push_str(&format!(
            "# replaced: {} roles and bindings classic made for {} under names olmv1 does not render (it grants the same under its own): adopted now, deleted once the extension is Installed\n",
            record.left.len(),
            record.csv
        ));
        for r in &record.left {
            text.push_str(&format!("#   {}\n", escape_value(&describe(r))));
        }
    }
    Ok(text)
}
