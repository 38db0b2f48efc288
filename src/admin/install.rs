//! `olmv1 install|upgrade|uninstall` as workflows: write ClusterExtensions as an admin would.
//! A dry run shows the object and what the controller's resolver would install, and writes
//! nothing. Without a service account, install creates the extension's installer
//! (`admin::installer`, `olmv1 rbac`'s objects) first; upgrade updates its permissions;
//! uninstall removes it once the extension is gone. Also what the command line counts as
//! installed and served, as the controller's dependency check counts it, and the wait for
//! `Installed` that `--with-dependencies` and `migrate convert` use.

use std::{collections::BTreeMap, time::Duration};

use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, Patch, PatchParams},
};
use olmv1_api::v1::ClusterExtension;
use serde_json::{Value, json};

use super::{
    Confirm, Report, Reporter,
    cluster::{self, ClusterError, check_readable},
    installer::{self, FIELD_MANAGER, InstallerError, Target},
    rbac::installer_name,
    sources::{CatalogSources, SourcesError, kube_client},
    terminal::{escape_value as value, to_yaml},
};
use crate::{
    apply::revision::{RecordError, RevisionStore},
    bundle::render::{RenderOptions, WebhookProvider},
    controller::cluster_extension::{
        UNSATISFIED_DEPENDENCIES, catalog_entry_properties, installed_extension, served_apis,
    },
    dependencies::{
        BrokenDependent, InstalledExtension, PlanError, PlannedBundle, broken_by_change, check_meter,
    },
    resolve::{CatalogInput, CatalogSelector, InstalledBundle, ResolveError, ResolveRequest, resolve},
};

/// How often [`wait_installed`] reads the ClusterExtension again.
const WAIT_POLL: Duration = Duration::from_secs(1);

/// How often uninstall looks whether the controller has removed the extension: it only waits
/// for a finalizer, so a short poll ends the command soon after.
const UNINSTALL_POLL: Duration = Duration::from_millis(500);

/// Why an install, upgrade or uninstall stopped.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// The catalogs could not be loaded, or no client built.
    #[error(transparent)]
    Sources(#[from] SourcesError),
    /// The cluster could not be read, or a catalog consulted is unreadable.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// The installer could not be computed or written.
    #[error(transparent)]
    Installer(#[from] InstallerError),
    /// The ClusterExtension is not a valid resolution request.
    #[error(transparent)]
    Request(#[from] ResolveError),
    /// Its catalog selector is invalid.
    #[error("{0}")]
    Selector(String),
    /// The object written is not a valid ClusterExtension.
    #[error("invalid ClusterExtension: {0}")]
    Invalid(#[source] serde_json::Error),
    /// A ClusterExtension could not be turned into JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// The ClusterExtension's YAML could not be written.
    #[error(transparent)]
    Yaml(#[from] serde_saphyr::SerializeError),
    /// The API server refused a read or write.
    #[error("{what}: {source}")]
    Api {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// Upgrade of an extension that does not install from a catalog.
    #[error("ClusterExtension {0:?} has no spec.source.catalog")]
    NoCatalog(String),
    /// Uninstalling would leave installed extensions' requirements unsatisfied.
    #[error(
        "ClusterExtension {extension:?} is a dependency of installed extensions: {}; uninstall them first, or pass --force to remove it anyway",
        join(broken)
    )]
    Dependents {
        /// The extension to uninstall.
        extension: String,
        /// What it would break.
        broken: Vec<BrokenDependent>,
    },
    /// What depends on the extension could not be checked.
    #[error(
        "cannot check what depends on ClusterExtension {extension:?}: {source}; pass --force to remove it without checking"
    )]
    DependentsUnknown {
        /// The extension to uninstall.
        extension: String,
        /// Why.
        #[source]
        source: Box<InstallError>,
    },
    /// The dependents' requirements cost more than the controller's budget for one check.
    #[error("checking what depends on ClusterExtension {extension:?} {source}")]
    OverBudget {
        /// The extension to uninstall.
        extension: String,
        /// The budget spent.
        #[source]
        source: crate::meter::Exhausted,
    },
    /// The controller had not removed the extension when the timeout ended.
    #[error(
        "ClusterExtension {extension:?} is still being uninstalled after {timeout_seconds}s; its installer ({}) is kept until it is gone: run uninstall again later",
        installer.join(", ")
    )]
    StillUninstalling {
        /// The extension.
        extension: String,
        /// The timeout.
        timeout_seconds: u64,
        /// Its installer's objects, as `installer_in_cluster` lists them.
        installer: Vec<String>,
    },
    /// The revision records could not be read.
    #[error(transparent)]
    Revisions(#[from] RecordError),
    /// The cluster's APIs could not be discovered.
    #[error("discovering the cluster's APIs: {0}")]
    Discovery(#[source] kube::Error),
    /// No plan installs the package with its dependencies.
    #[error("no plan for {package}: {source}")]
    NoPlan {
        /// The package.
        package: String,
        /// Why.
        #[source]
        source: PlanError,
    },
    /// A dependency's ClusterExtension name is taken by another package's.
    #[error(
        "ClusterExtension {dependency:?} exists for package {package:?}; install the dependency under another name by hand"
    )]
    NameTaken {
        /// The name.
        dependency: String,
        /// The package of the ClusterExtension that has it.
        package: String,
    },
    /// The controller gave up installing the extension.
    #[error("ClusterExtension {extension:?} cannot be installed: {message}")]
    CannotInstall {
        /// The extension.
        extension: String,
        /// Its `Progressing` message.
        message: String,
    },
    /// The extension was not installed within the timeout.
    #[error("ClusterExtension {extension:?} was not installed within {timeout_seconds} s ({last})")]
    NotInstalled {
        /// The extension.
        extension: String,
        /// The timeout.
        timeout_seconds: u64,
        /// Its last `Progressing` reason and message.
        last: String,
    },
    /// The admin did not confirm (or could not be asked).
    #[error("{0}")]
    NotConfirmed(String),
}

fn join<T: std::fmt::Display>(items: &[T]) -> String {
    items.iter().map(T::to_string).collect::<Vec<_>>().join("; ")
}

fn api_error(what: String) -> impl Fn(kube::Error) -> InstallError {
    move |source| InstallError::Api {
        what: what.clone(),
        source,
    }
}

/// How a workflow that wrote (or showed) a ClusterExtension ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Written, or shown with what it would install.
    Done,
    /// A dry run whose resolution fails (reported).
    Unresolvable,
}

/// What `olmv1 install` writes.
#[derive(Debug, Clone, Default)]
pub struct InstallOptions {
    /// The package.
    pub package: String,
    /// The ClusterExtension's name (default: the package).
    pub name: Option<String>,
    /// The install namespace.
    pub namespace: String,
    /// The ServiceAccount the bundle is installed as; `None`: `<extension>-installer`, created
    /// with exactly the permissions `olmv1 rbac` prints.
    pub service_account: Option<String>,
    /// A version range.
    pub version: Option<String>,
    /// Channels.
    pub channels: Vec<String>,
    /// `CatalogProvided` or `SelfCertified`.
    pub upgrade_constraint_policy: Option<String>,
    /// Only catalogs with these labels.
    pub catalog_labels: BTreeMap<String, String>,
    /// Show, write nothing.
    pub dry_run: bool,
    /// Install the package's dependencies first, one ClusterExtension per planned bundle.
    pub with_dependencies: bool,
    /// How long to wait for each extension of `with_dependencies`, in seconds.
    pub timeout_seconds: u64,
    /// The controller's namespace, where it records what each extension installed.
    pub system_namespace: String,
}

/// What `olmv1 upgrade` changes.
#[derive(Debug, Clone, Default)]
pub struct UpgradeOptions {
    /// The ClusterExtension.
    pub extension: String,
    /// The new version range.
    pub version: Option<String>,
    /// The channels, replacing the current ones (none: kept).
    pub channels: Vec<String>,
    /// `CatalogProvided` or `SelfCertified`.
    pub upgrade_constraint_policy: Option<String>,
    /// Show, write nothing.
    pub dry_run: bool,
    /// The controller's namespace (where it records installed revisions).
    pub system_namespace: String,
}

/// What `olmv1 uninstall` removes (its flags).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct UninstallOptions {
    /// The ClusterExtension.
    pub extension: String,
    /// Print what would be removed; delete nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Uninstall even when installed extensions depend on what it provides.
    #[arg(long)]
    pub force: bool,
    /// The controller's namespace, where it records what each extension installed.
    #[arg(long, env = "OLMV1_SYSTEM_NAMESPACE", default_value = "olmv1-system")]
    pub system_namespace: String,
    /// How long to wait for the controller to uninstall before removing the installer, in seconds.
    #[arg(long = "timeout", value_name = "TIMEOUT", default_value_t = 300)]
    pub timeout_seconds: u64,
}

/// The ClusterExtension `olmv1 install` writes.
pub fn extension_object(options: &InstallOptions) -> Value {
    let mut catalog = json!({"packageName": options.package});
    if !options.catalog_labels.is_empty() {
        catalog["selector"] = json!({"matchLabels": options.catalog_labels});
    }
    installer::set_catalog_filter(
        &mut catalog,
        options.version.as_deref(),
        &options.channels,
        options.upgrade_constraint_policy.as_deref(),
    );
    let name = options.name.as_deref().unwrap_or(&options.package);
    let service_account = options
        .service_account
        .clone()
        .unwrap_or_else(|| installer_name(name));
    json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterExtension",
        "metadata": {"name": name},
        "spec": {
            "namespace": options.namespace,
            "serviceAccount": {"name": service_account},
            "source": {"sourceType": "Catalog", "catalog": catalog}
        }
    })
}

/// `olmv1 install`: the installer (unless a service account is given), then the ClusterExtension;
/// with dependencies, each planned dependency first.
pub async fn install(
    options: &InstallOptions,
    sources: &CatalogSources,
    report: Reporter<'_>,
    confirm: Confirm<'_>,
) -> Result<Outcome, InstallError> {
    let object = extension_object(options);
    if options.with_dependencies {
        install_with_dependencies(options, object, sources, report, confirm).await?;
        return Ok(Outcome::Done);
    }
    if options.service_account.is_none() {
        let client = kube_client().await?;
        install_with_installer(&client, options, &object, sources, report, confirm).await?;
    }
    write_or_show(object, None, options.dry_run, sources, report).await
}

/// Computes the installer `object` names (`<extension>-installer`), shows it, and (unless a dry
/// run) creates it once confirmed.
async fn install_with_installer(
    client: &Client,
    options: &InstallOptions,
    object: &Value,
    sources: &CatalogSources,
    report: Reporter<'_>,
    confirm: Confirm<'_>,
) -> Result<(), InstallError> {
    let ext: ClusterExtension = serde_json::from_value(object.clone()).map_err(InstallError::Invalid)?;
    let name = ext.metadata.name.clone().unwrap_or_default();
    let service_account = installer_name(&name);
    let target = Target {
        extension: &ext,
        installed: None,
        installed_objects: &[],
        service_account: &service_account,
        allow_escalate: false,
        webhook_provider: WebhookProvider::default(),
        operator_conditions: cluster::operator_conditions_kept(client, None).await?,
    };
    let computed = installer::compute_installer(client, &target, sources).await?;
    report(Report::Out(computed.yaml(&name)?));
    if options.dry_run {
        report(Report::Out("---\n".into()));
        return Ok(());
    }
    confirm(&format!(
        "create ServiceAccount {}/{service_account} with the permissions above, then ClusterExtension {name:?}",
        options.namespace
    ))
    .map_err(InstallError::NotConfirmed)?;
    installer::apply_installer(client, &name, &computed.objects).await?;
    report(Report::Out(format!(
        "serviceaccount/{service_account} and its roles applied in namespace {}\n",
        options.namespace
    )));
    Ok(())
}

/// `olmv1 upgrade`: the extension's catalog source changed as `options` say, its installer's
/// permissions shown and (for an installer olmv1 created, once confirmed) changed first.
pub async fn upgrade(
    options: &UpgradeOptions,
    sources: &CatalogSources,
    report: Reporter<'_>,
    confirm: Confirm<'_>,
) -> Result<Outcome, InstallError> {
    let client = kube_client().await?;
    let current = cluster::cluster_extension(&client, &options.extension).await?;
    let Some(filter) = current.spec.source.catalog.clone() else {
        return Err(InstallError::NoCatalog(options.extension.clone()));
    };
    let mut catalog = serde_json::to_value(&filter)?;
    installer::set_catalog_filter(
        &mut catalog,
        options.version.as_deref(),
        &options.channels,
        options.upgrade_constraint_policy.as_deref(),
    );
    let mut object = json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterExtension",
        "metadata": {"name": options.extension},
        "spec": {
            "namespace": current.spec.namespace,
            "source": {"sourceType": "Catalog", "catalog": catalog}
        }
    });
    if let Some(account) = &current.spec.service_account {
        object["spec"]["serviceAccount"] = json!(account);
    }
    update_installer(options, &client, &current, &catalog, sources, report, confirm).await?;
    let installed = cluster::installed_bundle(&current);
    write_or_show(object, installed, options.dry_run, sources, report).await
}

/// Shows how the installer's permissions change for the new target; for an installer olmv1
/// created, applies the change (once confirmed) unless a dry run. A dry run of an extension
/// with the admin's own account shows the change too (against what the installed bundle needs),
/// or why it cannot.
async fn update_installer(
    options: &UpgradeOptions,
    client: &Client,
    current: &ClusterExtension,
    catalog: &Value,
    sources: &CatalogSources,
    report: Reporter<'_>,
    confirm: Confirm<'_>,
) -> Result<(), InstallError> {
    let ours = installer::is_olmv1_installer(client, current).await?;
    if !ours && !options.dry_run {
        return Ok(());
    }
    let mut desired = serde_json::to_value(current)?;
    desired["spec"]["source"]["catalog"] = catalog.clone();
    let desired: ClusterExtension = serde_json::from_value(desired)?;
    let computed = installer::upgrade_diff(
        client,
        current,
        &desired,
        &options.system_namespace,
        false,
        RenderOptions {
            webhook_provider: WebhookProvider::default(),
            operator_conditions: cluster::operator_conditions_kept(client, None).await?,
        },
        sources,
    )
    .await;
    let account = installer::account_name(current);
    let (new, change) = match computed {
        Ok(found) => found,
        Err(e) if !ours => {
            report(Report::Out(format!(
                "# permissions of {account}: not computed: {e}\n"
            )));
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    report(Report::Out(format!(
        "# permissions of {account} for {} {}:\n{change}",
        value(&new.resolution.bundle.name),
        value(&new.resolution.bundle.status_version)
    )));
    if options.dry_run || !ours {
        return Ok(());
    }
    if !change.is_empty() {
        confirm(&format!(
            "change the permissions of ServiceAccount {}/{account} as above",
            current.spec.namespace
        ))
        .map_err(InstallError::NotConfirmed)?;
    }
    Ok(installer::apply_installer(client, &current.name_any(), &new.objects).await?)
}

/// Applies the ClusterExtension, or (a dry run) shows it and what it would install.
async fn write_or_show(
    object: Value,
    installed: Option<InstalledBundle>,
    dry_run: bool,
    sources: &CatalogSources,
    report: Reporter<'_>,
) -> Result<Outcome, InstallError> {
    let ext: ClusterExtension = serde_json::from_value(object.clone()).map_err(InstallError::Invalid)?;
    let name = ext.metadata.name.clone().unwrap_or_default();
    if dry_run {
        report(Report::Out(to_yaml(&object)?));
        let request = ResolveRequest::from_cluster_extension(&ext, installed)?;
        let catalogs = sources.load().await?;
        let selector = CatalogSelector::new(request.selector.as_ref()).map_err(InstallError::Selector)?;
        check_readable(&catalogs, |c| selector.matches(&c.labels))?;
        let inputs: Vec<_> = catalogs.into_iter().map(|c| c.input).collect();
        return Ok(match resolve(&request, &inputs) {
            Ok(r) => {
                report(Report::Out(format!(
                    "# dry run: would install {} {} from catalog {}\n",
                    value(&r.bundle.name),
                    value(&r.bundle.status_version),
                    value(&r.catalog)
                )));
                Outcome::Done
            }
            Err(e) => {
                report(Report::Out(format!(
                    "# dry run: resolution fails: {}\n",
                    value(&e.to_string())
                )));
                Outcome::Unresolvable
            }
        });
    }
    let client = kube_client().await?;
    let params = PatchParams::apply(FIELD_MANAGER).force();
    Api::<ClusterExtension>::all(client)
        .patch(&name, &params, &Patch::Apply(&object))
        .await
        .map_err(api_error(format!("applying ClusterExtension {name:?}")))?;
    report(Report::Out(format!("clusterextension/{name} applied\n")));
    Ok(Outcome::Done)
}

/// `olmv1 uninstall`: refuses when installed extensions depend on it (unless forced), deletes
/// the ClusterExtension, waits for the controller to uninstall it, then removes the installer
/// olmv1 created for it.
pub async fn uninstall(options: &UninstallOptions, report: Reporter<'_>) -> Result<(), InstallError> {
    let extension = &options.extension;
    let client = kube_client().await?;
    let current = cluster::cluster_extension(&client, extension).await?;
    let installed = cluster::installed_bundle(&current)
        .map(|b| format!("{} {}", b.name, b.version))
        .unwrap_or_else(|| "nothing installed".into());
    if !options.force {
        let broken = installed_dependents(&client, extension, &options.system_namespace)
            .await
            .map_err(|e| InstallError::DependentsUnknown {
                extension: extension.clone(),
                source: Box::new(e),
            })?;
        if !broken.is_empty() {
            return Err(InstallError::Dependents {
                extension: extension.clone(),
                broken,
            });
        }
    }
    let installer_objects = installer::installer_in_cluster(&client, extension).await?;
    if options.dry_run {
        report(Report::Out(format!(
            "# dry run: would delete clusterextension/{extension} ({installed}) and the objects it installed in namespace {}\n",
            current.spec.namespace
        )));
        if !installer_objects.is_empty() {
            report(Report::Out(format!(
                "# dry run: then its installer: {}\n",
                installer_objects.join(", ")
            )));
        }
        return Ok(());
    }
    let api = Api::<ClusterExtension>::all(client.clone());
    api.delete(extension, &DeleteParams::default())
        .await
        .map_err(api_error(format!("deleting ClusterExtension {extension:?}")))?;
    report(Report::Out(format!(
        "clusterextension/{extension} deleted ({installed})\n"
    )));
    if installer_objects.is_empty() {
        return Ok(());
    }
    // The controller uninstalls as the installer: its RBAC goes only once the extension is gone.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(options.timeout_seconds);
    while api
        .get_opt(extension)
        .await
        .map_err(api_error(format!("reading ClusterExtension {extension:?}")))?
        .is_some()
    {
        if tokio::time::Instant::now() >= deadline {
            return Err(InstallError::StillUninstalling {
                extension: extension.clone(),
                timeout_seconds: options.timeout_seconds,
                installer: installer_objects,
            });
        }
        tokio::time::sleep(UNINSTALL_POLL).await;
    }
    installer::remove_installer(&client, extension).await?;
    report(Report::Out(format!(
        "installer removed: {}\n",
        installer_objects.join(", ")
    )));
    Ok(())
}

/// The bundles other ClusterExtensions (not being deleted) installed, by their revision records
/// in `system_namespace`, and the one `extension` installed (if any); each record completed with
/// its catalog entry's properties when that catalog is among `catalogs`, as the controller does.
pub async fn installed_extensions(
    client: &Client,
    extension: Option<&str>,
    system_namespace: &str,
    catalogs: &[CatalogInput],
) -> Result<(Vec<InstalledExtension>, Option<InstalledExtension>), InstallError> {
    let live: std::collections::BTreeSet<String> = cluster::cluster_extensions(client)
        .await?
        .into_iter()
        .filter(|e| e.metadata.deletion_timestamp.is_none())
        .map(|e| e.metadata.name.unwrap_or_default())
        .collect();
    let records = RevisionStore::new(client.clone(), system_namespace)
        .installed()
        .await?;
    let (mut others, mut own) = (Vec::new(), None);
    for (name, record) in records {
        let from_catalog = record
            .catalog
            .as_deref()
            .and_then(|catalog| catalogs.iter().find(|c| c.name == catalog))
            .and_then(|c| catalog_entry_properties(&c.index, &record));
        if Some(name.as_str()) == extension {
            own = Some(installed_extension(&name, &record, from_catalog));
        } else if live.contains(&name) {
            others.push(installed_extension(&name, &record, from_catalog));
        }
    }
    Ok((others, own))
}

/// The APIs the cluster serves.
pub async fn served_apis_of(client: &Client) -> Result<Vec<crate::dependencies::Gvk>, InstallError> {
    let discovery = match kube::Discovery::new(client.clone()).run_aggregated().await {
        Ok(discovery) => discovery,
        Err(_) => kube::Discovery::new(client.clone())
            .run()
            .await
            .map_err(InstallError::Discovery)?,
    };
    Ok(served_apis(&discovery))
}

/// The requirements of installed extensions that removing `extension` would leave unsatisfied.
async fn installed_dependents(
    client: &Client,
    extension: &str,
    system_namespace: &str,
) -> Result<Vec<BrokenDependent>, InstallError> {
    let (others, own) = installed_extensions(client, Some(extension), system_namespace, &[]).await?;
    let Some(own) = own else {
        return Ok(Vec::new());
    };
    let served = served_apis_of(client).await?;
    let mut meter = check_meter();
    broken_by_change(&others, &served, &own, None, &mut meter).map_err(|source| InstallError::OverBudget {
        extension: extension.to_string(),
        source,
    })
}

/// `olmv1 install --with-dependencies`: plans what the package needs with what is installed
/// kept, then applies one ClusterExtension per planned bundle, dependencies first, each with its
/// installer as `olmv1 install` makes it (`<extension>-installer` unless a service account is
/// given), waiting for each to be installed; a dry run shows them.
async fn install_with_dependencies(
    options: &InstallOptions,
    object: Value,
    sources: &CatalogSources,
    report: Reporter<'_>,
    confirm: Confirm<'_>,
) -> Result<(), InstallError> {
    let ext: ClusterExtension = serde_json::from_value(object.clone()).map_err(InstallError::Invalid)?;
    let name = ext.metadata.name.clone().unwrap_or_default();
    let client = kube_client().await?;
    let api = Api::<ClusterExtension>::all(client.clone());
    let existing = api
        .get_opt(&name)
        .await
        .map_err(api_error(format!("reading ClusterExtension {name:?}")))?;
    let request =
        ResolveRequest::from_cluster_extension(&ext, existing.as_ref().and_then(cluster::installed_bundle))?;
    let catalogs = sources.load().await?;
    for c in &catalogs {
        if let Some(problem) = &c.problem {
            report(Report::Warning(format!(
                "warning: catalog {:?} skipped: {}",
                c.input.name,
                value(problem)
            )));
        }
    }
    let inputs: Vec<_> = catalogs.into_iter().map(|c| c.input).collect();
    let (others, own) =
        installed_extensions(&client, Some(&name), &options.system_namespace, &inputs).await?;
    let installed: Vec<InstalledExtension> = others.into_iter().chain(own).collect();
    let served = served_apis_of(&client).await?;
    let plan = crate::dependencies::plan(
        &crate::dependencies::PlanRequest {
            request: &request,
            installed: &installed,
            served_apis: &served,
            allow_changes: false,
            limits: Default::default(),
        },
        &inputs,
    )
    .map_err(|source| InstallError::NoPlan {
        package: request.package.clone(),
        source,
    })?;
    let steps: Vec<(Value, &PlannedBundle)> = plan
        .plan
        .iter()
        .filter(|planned| planned.package != request.package)
        .map(|planned| (dependency_object(options, planned), planned))
        .collect();
    for (object, _) in &steps {
        let dependency = object["metadata"]["name"].as_str().unwrap_or_default();
        if let Some(present) = api
            .get_opt(dependency)
            .await
            .map_err(api_error(format!("reading ClusterExtension {dependency:?}")))?
        {
            let package = present
                .spec
                .source
                .catalog
                .as_ref()
                .map(|c| c.package_name.as_str());
            if package != object["spec"]["source"]["catalog"]["packageName"].as_str() {
                return Err(InstallError::NameTaken {
                    dependency: dependency.to_string(),
                    package: package.unwrap_or_default().to_string(),
                });
            }
        }
    }
    if options.dry_run {
        for (object, planned) in &steps {
            if options.service_account.is_none() {
                install_with_installer(&client, options, object, sources, report, confirm).await?;
            }
            report(Report::Out(to_yaml(object)?));
            report(Report::Out(format!(
                "# dry run: would install {} {} from catalog {} (required by {})\n",
                value(&planned.bundle),
                value(&planned.version),
                value(&planned.catalog),
                value(&planned.required_by.join(", "))
            )));
        }
        if options.service_account.is_none() {
            install_with_installer(&client, options, &object, sources, report, confirm).await?;
        }
        report(Report::Out(to_yaml(&object)?));
        if let Some(requested) = plan.plan.iter().find(|p| p.package == request.package) {
            report(Report::Out(format!(
                "# dry run: would install {} {} from catalog {}\n",
                value(&requested.bundle),
                value(&requested.version),
                value(&requested.catalog)
            )));
        }
        return Ok(());
    }
    let params = PatchParams::apply(FIELD_MANAGER).force();
    for (object, planned) in &steps {
        let dependency = object["metadata"]["name"].as_str().unwrap_or_default();
        if options.service_account.is_none() {
            install_with_installer(&client, options, object, sources, report, confirm).await?;
        }
        api.patch(dependency, &params, &Patch::Apply(object))
            .await
            .map_err(api_error(format!("applying ClusterExtension {dependency:?}")))?;
        report(Report::Out(format!(
            "clusterextension/{dependency} applied ({} {})\n",
            value(&planned.bundle),
            value(&planned.version)
        )));
        wait_installed(&api, dependency, Some(&planned.version), options.timeout_seconds).await?;
        report(Report::Out(format!("clusterextension/{dependency} installed\n")));
    }
    if options.service_account.is_none() {
        install_with_installer(&client, options, &object, sources, report, confirm).await?;
    }
    api.patch(&name, &params, &Patch::Apply(&object))
        .await
        .map_err(api_error(format!("applying ClusterExtension {name:?}")))?;
    report(Report::Out(format!("clusterextension/{name} applied\n")));
    wait_installed(&api, &name, None, options.timeout_seconds).await?;
    report(Report::Out(format!("clusterextension/{name} installed\n")));
    Ok(())
}

/// The ClusterExtension of a planned dependency: named after its package, in the requested
/// extension's namespace, installed as the given service account or else as its own
/// `<package>-installer`, pinned to the planned version and catalog.
fn dependency_object(options: &InstallOptions, planned: &PlannedBundle) -> Value {
    let service_account = options
        .service_account
        .clone()
        .unwrap_or_else(|| installer_name(&planned.package));
    json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterExtension",
        "metadata": {"name": planned.package},
        "spec": {
            "namespace": options.namespace,
            "serviceAccount": {"name": service_account},
            "source": {"sourceType": "Catalog", "catalog": {
                "packageName": planned.package,
                "version": planned.version,
                "selector": {"matchLabels": {olmv1_api::v1::conditions::LABEL_CATALOG_NAME: planned.catalog}},
            }}
        }
    })
}

/// Waits until the ClusterExtension reports `Installed=True` (with `version`, when given) for its
/// current generation; a terminal failure (`Progressing=False`) or the deadline is an error with
/// its message.
pub async fn wait_installed(
    api: &Api<ClusterExtension>,
    name: &str,
    version: Option<&str>,
    timeout_seconds: u64,
) -> Result<(), InstallError> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout_seconds);
    let mut last = String::from("no status yet");
    loop {
        let ext = api
            .get(name)
            .await
            .map_err(api_error(format!("reading ClusterExtension {name:?}")))?;
        let generation = ext.metadata.generation;
        let status = ext.status.unwrap_or_default();
        let current = |type_: &str| {
            status
                .conditions
                .iter()
                .find(|c| c.type_ == type_ && c.observed_generation == generation)
        };
        let installed_version = status.install.as_ref().map(|i| i.bundle.version.as_str());
        if let (Some(installed), Some(progressing)) = (current("Installed"), current("Progressing")) {
            if installed.status == "True"
                && progressing.reason == "Succeeded"
                && version.is_none_or(|v| installed_version == Some(v))
            {
                return Ok(());
            }
            // Blocked on dependencies only until the controller sees those just installed.
            let waits = progressing.message.contains(UNSATISFIED_DEPENDENCIES);
            if progressing.status == "False" && !waits {
                return Err(InstallError::CannotInstall {
                    extension: name.to_string(),
                    message: progressing.message.clone(),
                });
            }
            last = format!("Progressing {}: {}", progressing.reason, progressing.message);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(InstallError::NotInstalled {
                extension: name.to_string(),
                timeout_seconds,
                last,
            });
        }
        tokio::time::sleep(WAIT_POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> InstallOptions {
        InstallOptions {
            package: "argocd".into(),
            namespace: "argocd".into(),
            timeout_seconds: 300,
            system_namespace: "olmv1-system".into(),
            ..InstallOptions::default()
        }
    }

    #[test]
    fn install_writes_the_package_with_its_installer_account() {
        let object = extension_object(&options());
        assert_eq!(
            object,
            json!({
                "apiVersion": "olm.operatorframework.io/v1",
                "kind": "ClusterExtension",
                "metadata": {"name": "argocd"},
                "spec": {
                    "namespace": "argocd",
                    "serviceAccount": {"name": "argocd-installer"},
                    "source": {"sourceType": "Catalog", "catalog": {"packageName": "argocd"}}
                }
            })
        );
    }

    #[test]
    fn install_options_become_the_catalog_filter() {
        let object = extension_object(&InstallOptions {
            name: Some("cd".into()),
            service_account: Some("admin".into()),
            version: Some("2.x".into()),
            channels: vec!["stable".into()],
            upgrade_constraint_policy: Some("SelfCertified".into()),
            catalog_labels: BTreeMap::from([("tier".into(), "prod".into())]),
            ..options()
        });
        assert_eq!(object["metadata"]["name"], "cd");
        assert_eq!(object["spec"]["serviceAccount"]["name"], "admin");
        assert_eq!(
            object["spec"]["source"]["catalog"],
            json!({
                "packageName": "argocd",
                "version": "2.x",
                "channels": ["stable"],
                "upgradeConstraintPolicy": "SelfCertified",
                "selector": {"matchLabels": {"tier": "prod"}}
            })
        );
        serde_json::from_value::<ClusterExtension>(object).expect("a valid ClusterExtension");
    }

    #[test]
    fn a_dependency_is_pinned_to_its_planned_version_and_catalog() {
        let planned = PlannedBundle {
            package: "etcd".into(),
            bundle: "etcd.v0.9.4".into(),
            version: "0.9.4".into(),
            catalog: "community".into(),
            required_by: vec!["argocd".into()],
            replaces: None,
            image: "quay.io/etcd/bundle:0.9.4".into(),
        };
        let object = dependency_object(&options(), &planned);
        assert_eq!(object["metadata"]["name"], "etcd");
        assert_eq!(object["spec"]["namespace"], "argocd");
        assert_eq!(object["spec"]["serviceAccount"]["name"], "etcd-installer");
        assert_eq!(
            object["spec"]["source"]["catalog"],
            json!({
                "packageName": "etcd",
                "version": "0.9.4",
                "selector": {"matchLabels": {"olm.operatorframework.io/metadata.name": "community"}}
            })
        );
        let shared = dependency_object(
            &InstallOptions {
                service_account: Some("admin".into()),
                ..options()
            },
            &planned,
        );
        assert_eq!(shared["spec"]["serviceAccount"]["name"], "admin");
    }

    /// `install --dry-run --service-account` with a command-line catalog needs no cluster: the
    /// workflow reports the object, then what the resolver would install, or why nothing.
    #[tokio::test]
    async fn a_dry_run_reports_the_object_and_the_resolution_and_writes_nothing() {
        let sources = CatalogSources {
            catalogs: vec![format!(
                "stable={}/test/fixtures/resolve/catalogs/stable",
                env!("CARGO_MANIFEST_DIR")
            )],
            ..CatalogSources::default()
        };
        let dry_run = |version: &str| InstallOptions {
            package: "example".into(),
            service_account: Some("admin".into()),
            version: Some(version.into()),
            dry_run: true,
            ..options()
        };
        let mut said = Vec::new();
        let mut asked = Vec::new();
        let outcome = install(&dry_run("<3.0.0"), &sources, &mut |r| said.push(r), &mut |q| {
            asked.push(q.to_string());
            Ok(())
        })
        .await
        .unwrap();
        assert_eq!(outcome, Outcome::Done);
        assert!(asked.is_empty(), "a dry run asks nothing: {asked:?}");
        let [Report::Out(yaml), Report::Out(verdict)] = said.as_slice() else {
            panic!("{said:?}");
        };
        assert!(yaml.contains("packageName: example"), "{yaml}");
        assert!(yaml.contains("name: admin"), "{yaml}");
        assert_eq!(
            verdict,
            "# dry run: would install example.v2.0.0 2.0.0 from catalog stable\n"
        );

        let mut said = Vec::new();
        let outcome = install(&dry_run(">9"), &sources, &mut |r| said.push(r), &mut |_| {
            panic!("a dry run asks nothing")
        })
        .await
        .unwrap();
        assert_eq!(outcome, Outcome::Unresolvable);
        let Some(Report::Out(verdict)) = said.last() else {
            panic!("{said:?}");
        };
        assert!(verdict.starts_with("# dry run: resolution fails: "), "{verdict}");
    }

    #[test]
    fn refusals_keep_their_words() {
        let e = InstallError::StillUninstalling {
            extension: "argocd".into(),
            timeout_seconds: 5,
            installer: vec!["clusterrole/a".into(), "argocd/role/b".into()],
        };
        assert_eq!(
            e.to_string(),
            r#"ClusterExtension "argocd" is still being uninstalled after 5s; its installer (clusterrole/a, argocd/role/b) is kept until it is gone: run uninstall again later"#
        );
        let e = InstallError::DependentsUnknown {
            extension: "argocd".into(),
            source: Box::new(InstallError::NoCatalog("x".into())),
        };
        assert_eq!(
            e.to_string(),
            r#"cannot check what depends on ClusterExtension "argocd": ClusterExtension "x" has no spec.source.catalog; pass --force to remove it without checking"#
        );
    }
}
