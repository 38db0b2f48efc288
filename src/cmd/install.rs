//! `olmv1 install|upgrade|uninstall`: write ClusterExtensions as an admin would. `--dry-run`
//! prints the object and what the controller's resolver would install, and writes nothing.
//! Without `--service-account`, `install` creates the extension's installer (`olmv1 rbac`'s
//! objects) first; `upgrade` updates its permissions; `uninstall` removes it once the extension
//! is gone.

use std::process::ExitCode;
use std::time::Duration;

use kube::{
    Api, ResourceExt,
    api::{DeleteParams, Patch, PatchParams},
};
use olmv1_api::v1::ClusterExtension;
use serde_json::{Value, json};

use super::rbac::{self as installer, Target};
use super::sources::{SourceArgs, fail, kube_client};
use crate::{
    admin::{
        cluster::{self, check_readable},
        rbac::installer_name,
        terminal::escape_value as value,
    },
    apply::revision::RevisionStore,
    bundle::render::WebhookProvider,
    controller::cluster_extension::{
        UNSATISFIED_DEPENDENCIES, catalog_entry_properties, installed_extension, served_apis,
    },
    dependencies::{BrokenDependent, CHECK_WORK_UNITS, InstalledExtension, WorkBudget, broken_by_change},
    resolve::{CatalogInput, ResolveRequest, resolve},
};

/// The field manager of the command line's server-side applies.
pub const FIELD_MANAGER: &str = "olmv1-cli";

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
    pub sources: SourceArgs,
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
    pub sources: SourceArgs,
}

/// Arguments of `olmv1 uninstall`.
#[derive(clap::Args, Debug)]
pub struct UninstallArgs {
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
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
}

/// `KEY=VALUE` flags as a JSON object.
pub fn label_map(pairs: &[String]) -> Result<serde_json::Map<String, Value>, String> {
    let mut labels = serde_json::Map::new();
    for pair in pairs {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| format!("--catalog-label must be KEY=VALUE, got {pair:?}"))?;
        labels.insert(k.to_string(), json!(v));
    }
    Ok(labels)
}

/// The ClusterExtension `olmv1 install` writes.
pub fn extension_object(args: &InstallArgs) -> Result<Value, String> {
    let mut catalog = json!({"packageName": args.package});
    if !args.catalog_labels.is_empty() {
        catalog["selector"] = json!({"matchLabels": label_map(&args.catalog_labels)?});
    }
    if let Some(v) = &args.version {
        catalog["version"] = json!(v);
    }
    if !args.channels.is_empty() {
        catalog["channels"] = json!(args.channels);
    }
    if let Some(p) = &args.upgrade_constraint_policy {
        catalog["upgradeConstraintPolicy"] = json!(p);
    }
    let name = args.name.as_deref().unwrap_or(&args.package);
    let service_account = args
        .service_account
        .clone()
        .unwrap_or_else(|| installer_name(name));
    Ok(json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterExtension",
        "metadata": {"name": name},
        "spec": {
            "namespace": args.namespace,
            "serviceAccount": {"name": service_account},
            "source": {"sourceType": "Catalog", "catalog": catalog}
        }
    }))
}

/// Runs `olmv1 install`.
pub async fn install(args: InstallArgs) -> ExitCode {
    let object = match extension_object(&args) {
        Ok(o) => o,
        Err(e) => return fail("install", &e),
    };
    if args.with_dependencies {
        return match install_with_dependencies(&args, object).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail("install", &e),
        };
    }
    if args.service_account.is_some() {
        return write_or_show("install", object, None, args.dry_run, &args.sources).await;
    }
    let client = match kube_client().await {
        Ok(c) => c,
        Err(e) => return fail("install", &e),
    };
    match install_with_installer(&client, &args, &object).await {
        Ok(()) => write_or_show("install", object, None, args.dry_run, &args.sources).await,
        Err(e) => fail("install", &e),
    }
}

/// Computes the installer `object` names (`<extension>-installer`), shows it, and (unless a dry
/// run) creates it once confirmed.
async fn install_with_installer(
    client: &kube::Client,
    args: &InstallArgs,
    object: &Value,
) -> Result<(), String> {
    let ext: ClusterExtension =
        serde_json::from_value(object.clone()).map_err(|e| format!("invalid ClusterExtension: {e}"))?;
    let name = ext.metadata.name.clone().unwrap_or_default();
    let service_account = installer_name(&name);
    let target = Target {
        extension: &ext,
        installed: None,
        installed_objects: &[],
        service_account: &service_account,
        allow_escalate: false,
        webhook_provider: WebhookProvider::default(),
    };
    let computed = installer::compute_installer(client, &target, &args.sources).await?;
    out!("{}", computed.yaml(&name)?);
    if args.dry_run {
        out!("---\n");
        return Ok(());
    }
    installer::confirm(
        &format!(
            "create ServiceAccount {}/{service_account} with the permissions above, then ClusterExtension {name:?}",
            args.namespace
        ),
        args.yes,
    )?;
    installer::apply_installer(client, &name, &computed.objects).await?;
    outln!(
        "serviceaccount/{service_account} and its roles applied in namespace {}",
        args.namespace
    );
    Ok(())
}

/// Runs `olmv1 upgrade`.
pub async fn upgrade(args: UpgradeArgs) -> ExitCode {
    let client = match kube_client().await {
        Ok(c) => c,
        Err(e) => return fail("upgrade", &e),
    };
    let current = match cluster::cluster_extension(&client, &args.extension).await {
        Ok(e) => e,
        Err(e) => return fail("upgrade", &e.to_string()),
    };
    let Some(filter) = current.spec.source.catalog.clone() else {
        return fail(
            "upgrade",
            &format!("ClusterExtension {:?} has no spec.source.catalog", args.extension),
        );
    };
    let mut catalog = match serde_json::to_value(&filter) {
        Ok(v) => v,
        Err(e) => return fail("upgrade", &e.to_string()),
    };
    if let Some(v) = &args.version {
        catalog["version"] = json!(v);
    }
    if !args.channels.is_empty() {
        catalog["channels"] = json!(args.channels);
    }
    if let Some(p) = &args.upgrade_constraint_policy {
        catalog["upgradeConstraintPolicy"] = json!(p);
    }
    let mut object = json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterExtension",
        "metadata": {"name": args.extension},
        "spec": {
            "namespace": current.spec.namespace,
            "source": {"sourceType": "Catalog", "catalog": catalog}
        }
    });
    if let Some(account) = &current.spec.service_account {
        object["spec"]["serviceAccount"] = json!(account);
    }
    if let Err(e) = update_installer(&args, &client, &current, &catalog).await {
        return fail("upgrade", &e);
    }
    let installed = cluster::installed_bundle(&current);
    write_or_show("upgrade", object, installed, args.dry_run, &args.sources).await
}

/// Shows how the installer's permissions change for the new target; for an installer olmv1
/// created, applies the change (once confirmed) unless a dry run. A dry run of an extension
/// with the admin's own account shows the change too (against what the installed bundle needs),
/// or why it cannot.
async fn update_installer(
    args: &UpgradeArgs,
    client: &kube::Client,
    current: &ClusterExtension,
    catalog: &Value,
) -> Result<(), String> {
    let ours = installer::is_olmv1_installer(client, current).await?;
    if !ours && !args.dry_run {
        return Ok(());
    }
    let mut desired = serde_json::to_value(current).map_err(|e| e.to_string())?;
    desired["spec"]["source"]["catalog"] = catalog.clone();
    let desired: ClusterExtension = serde_json::from_value(desired).map_err(|e| e.to_string())?;
    let computed = installer::upgrade_diff(
        client,
        current,
        &desired,
        &args.system_namespace,
        false,
        WebhookProvider::default(),
        &args.sources,
    )
    .await;
    let (new, change) = match computed {
        Ok(found) => found,
        Err(e) if !ours => {
            outln!(
                "# permissions of {}: not computed: {e}",
                installer::account_name(current)
            );
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    out!(
        "# permissions of {} for {} {}:\n{change}",
        installer::account_name(current),
        value(&new.resolution.bundle.name),
        value(&new.resolution.bundle.status_version)
    );
    if args.dry_run || !ours {
        return Ok(());
    }
    if !change.is_empty() {
        installer::confirm(
            &format!(
                "change the permissions of ServiceAccount {}/{} as above",
                current.spec.namespace,
                installer::account_name(current)
            ),
            args.yes,
        )?;
    }
    installer::apply_installer(client, &current.name_any(), &new.objects).await
}

async fn write_or_show(
    command: &str,
    object: Value,
    installed: Option<crate::resolve::InstalledBundle>,
    dry_run: bool,
    sources: &SourceArgs,
) -> ExitCode {
    let ext: ClusterExtension = match serde_json::from_value(object.clone()) {
        Ok(e) => e,
        Err(e) => return fail(command, &format!("invalid ClusterExtension: {e}")),
    };
    let name = ext.metadata.name.clone().unwrap_or_default();
    if dry_run {
        match crate::admin::terminal::to_yaml(&object) {
            Ok(yaml) => out!("{yaml}"),
            Err(e) => return fail(command, &e.to_string()),
        }
        let request = match ResolveRequest::from_cluster_extension(&ext, installed) {
            Ok(r) => r,
            Err(e) => return fail(command, &e.to_string()),
        };
        let catalogs = match sources.load().await {
            Ok(c) => c,
            Err(e) => return fail(command, &e),
        };
        let selector = match crate::resolve::CatalogSelector::new(request.selector.as_ref()) {
            Ok(s) => s,
            Err(e) => return fail(command, &e),
        };
        if let Err(e) = check_readable(&catalogs, |c| selector.matches(&c.labels)) {
            return fail(command, &e.to_string());
        }
        let inputs: Vec<_> = catalogs.into_iter().map(|c| c.input).collect();
        return match resolve(&request, &inputs) {
            Ok(r) => {
                outln!(
                    "# dry run: would install {} {} from catalog {}",
                    value(&r.bundle.name),
                    value(&r.bundle.status_version),
                    value(&r.catalog)
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                outln!("# dry run: resolution fails: {}", value(&e.to_string()));
                ExitCode::from(1)
            }
        };
    }
    let client = match kube_client().await {
        Ok(c) => c,
        Err(e) => return fail(command, &e),
    };
    let params = PatchParams::apply(FIELD_MANAGER).force();
    match Api::<ClusterExtension>::all(client)
        .patch(&name, &params, &Patch::Apply(&object))
        .await
    {
        Ok(_) => {
            outln!("clusterextension/{name} applied");
            ExitCode::SUCCESS
        }
        Err(e) => fail(command, &format!("applying ClusterExtension {name:?}: {e}")),
    }
}

/// Runs `olmv1 uninstall`.
pub async fn uninstall(args: UninstallArgs) -> ExitCode {
    let client = match kube_client().await {
        Ok(c) => c,
        Err(e) => return fail("uninstall", &e),
    };
    let current = match cluster::cluster_extension(&client, &args.extension).await {
        Ok(e) => e,
        Err(e) => return fail("uninstall", &e.to_string()),
    };
    let installed = cluster::installed_bundle(&current)
        .map(|b| format!("{} {}", b.name, b.version))
        .unwrap_or_else(|| "nothing installed".into());
    if !args.force {
        match installed_dependents(&client, &args.extension, &args.system_namespace).await {
            Ok(broken) if broken.is_empty() => {}
            Ok(broken) => {
                let list: Vec<String> = broken.iter().map(ToString::to_string).collect();
                return fail(
                    "uninstall",
                    &format!(
                        "ClusterExtension {:?} is a dependency of installed extensions: {}; uninstall them first, or pass --force to remove it anyway",
                        args.extension,
                        list.join("; ")
                    ),
                );
            }
            Err(e) => {
                return fail(
                    "uninstall",
                    &format!(
                        "cannot check what depends on ClusterExtension {:?}: {e}; pass --force to remove it without checking",
                        args.extension
                    ),
                );
            }
        }
    }
    let installer_objects = match installer::installer_in_cluster(&client, &args.extension).await {
        Ok(found) => found,
        Err(e) => return fail("uninstall", &e),
    };
    if args.dry_run {
        outln!(
            "# dry run: would delete clusterextension/{} ({installed}) and the objects it installed in namespace {}",
            args.extension,
            current.spec.namespace
        );
        if !installer_objects.is_empty() {
            outln!("# dry run: then its installer: {}", installer_objects.join(", "));
        }
        return ExitCode::SUCCESS;
    }
    let api = Api::<ClusterExtension>::all(client.clone());
    if let Err(e) = api.delete(&args.extension, &DeleteParams::default()).await {
        return fail(
            "uninstall",
            &format!("deleting ClusterExtension {:?}: {e}", args.extension),
        );
    }
    outln!("clusterextension/{} deleted ({installed})", args.extension);
    if installer_objects.is_empty() {
        return ExitCode::SUCCESS;
    }
    // The controller uninstalls as the installer: its RBAC goes only once the extension is gone.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(args.timeout);
    loop {
        match api.get_opt(&args.extension).await {
            Ok(None) => break,
            Ok(Some(_)) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(500)).await
            }
            Ok(Some(_)) => {
                return fail(
                    "uninstall",
                    &format!(
                        "ClusterExtension {:?} is still being uninstalled after {}s; its installer ({}) is kept until it is gone: run uninstall again later",
                        args.extension,
                        args.timeout,
                        installer_objects.join(", ")
                    ),
                );
            }
            Err(e) => {
                return fail(
                    "uninstall",
                    &format!("reading ClusterExtension {:?}: {e}", args.extension),
                );
            }
        }
    }
    match installer::remove_installer(&client, &args.extension).await {
        Ok(()) => {
            outln!("installer removed: {}", installer_objects.join(", "));
            ExitCode::SUCCESS
        }
        Err(e) => fail("uninstall", &e),
    }
}

/// The bundles other ClusterExtensions (not being deleted) installed, by their revision records
/// in `system_namespace`, and the one `extension` installed (if any); each record completed with
/// its catalog entry's properties when that catalog is among `catalogs`, as the controller does.
pub async fn installed_extensions(
    client: &kube::Client,
    extension: Option<&str>,
    system_namespace: &str,
    catalogs: &[CatalogInput],
) -> Result<(Vec<InstalledExtension>, Option<InstalledExtension>), String> {
    let live: std::collections::BTreeSet<String> = cluster::cluster_extensions(client)
        .await
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|e| e.metadata.deletion_timestamp.is_none())
        .map(|e| e.metadata.name.unwrap_or_default())
        .collect();
    let records = RevisionStore::new(client.clone(), system_namespace)
        .installed()
        .await
        .map_err(|e| e.to_string())?;
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
pub async fn served_apis_of(client: &kube::Client) -> Result<Vec<crate::dependencies::Gvk>, String> {
    let discovery = match kube::Discovery::new(client.clone()).run_aggregated().await {
        Ok(discovery) => discovery,
        Err(_) => kube::Discovery::new(client.clone())
            .run()
            .await
            .map_err(|e| format!("discovering the cluster's APIs: {e}"))?,
    };
    Ok(served_apis(&discovery))
}

/// The requirements of installed extensions that removing `extension` would leave unsatisfied.
async fn installed_dependents(
    client: &kube::Client,
    extension: &str,
    system_namespace: &str,
) -> Result<Vec<BrokenDependent>, String> {
    let (others, own) = installed_extensions(client, Some(extension), system_namespace, &[]).await?;
    let Some(own) = own else {
        return Ok(Vec::new());
    };
    let served = served_apis_of(client).await?;
    let mut budget = WorkBudget::new(CHECK_WORK_UNITS);
    broken_by_change(&others, &served, &own, None, &mut budget)
        .map_err(|e| format!("checking what depends on ClusterExtension {extension:?} {e}"))
}

/// `olmv1 install --with-dependencies`: plans what the package needs with what is installed
/// kept, then applies one ClusterExtension per planned bundle, dependencies first, each with its
/// installer as `olmv1 install` makes it (`<extension>-installer` unless `--service-account`),
/// waiting for each to be installed; `--dry-run` prints them.
async fn install_with_dependencies(args: &InstallArgs, object: Value) -> Result<(), String> {
    let ext: ClusterExtension =
        serde_json::from_value(object.clone()).map_err(|e| format!("invalid ClusterExtension: {e}"))?;
    let name = ext.metadata.name.clone().unwrap_or_default();
    let client = kube_client().await?;
    let api = Api::<ClusterExtension>::all(client.clone());
    let existing = api
        .get_opt(&name)
        .await
        .map_err(|e| format!("reading ClusterExtension {name:?}: {e}"))?;
    let request =
        ResolveRequest::from_cluster_extension(&ext, existing.as_ref().and_then(cluster::installed_bundle))
            .map_err(|e| e.to_string())?;
    let catalogs = args.sources.load().await?;
    super::sources::warn_unreadable("install", &catalogs);
    let inputs: Vec<_> = catalogs.into_iter().map(|c| c.input).collect();
    let (others, own) = installed_extensions(&client, Some(&name), &args.system_namespace, &inputs).await?;
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
    .map_err(|e| format!("no plan for {}: {e}", request.package))?;
    let steps: Vec<(Value, &crate::dependencies::PlannedBundle)> = plan
        .plan
        .iter()
        .filter(|planned| planned.package != request.package)
        .map(|planned| (dependency_object(args, planned), planned))
        .collect();
    for (object, _) in &steps {
        let dependency = object["metadata"]["name"].as_str().unwrap_or_default();
        if let Some(present) = api
            .get_opt(dependency)
            .await
            .map_err(|e| format!("reading ClusterExtension {dependency:?}: {e}"))?
        {
            let package = present
                .spec
                .source
                .catalog
                .as_ref()
                .map(|c| c.package_name.as_str());
            if package != object["spec"]["source"]["catalog"]["packageName"].as_str() {
                return Err(format!(
                    "ClusterExtension {dependency:?} exists for package {:?}; install the dependency under another name by hand",
                    package.unwrap_or_default()
                ));
            }
        }
    }
    if args.dry_run {
        for (object, planned) in &steps {
            if args.service_account.is_none() {
                install_with_installer(&client, args, object).await?;
            }
            out!(
                "{}",
                crate::admin::terminal::to_yaml(object).map_err(|e| e.to_string())?
            );
            outln!(
                "# dry run: would install {} {} from catalog {} (required by {})",
                value(&planned.bundle),
                value(&planned.version),
                value(&planned.catalog),
                value(&planned.required_by.join(", "))
            );
        }
        if args.service_account.is_none() {
            install_with_installer(&client, args, &object).await?;
        }
        out!(
            "{}",
            crate::admin::terminal::to_yaml(&object).map_err(|e| e.to_string())?
        );
        if let Some(requested) = plan.plan.iter().find(|p| p.package == request.package) {
            outln!(
                "# dry run: would install {} {} from catalog {}",
                value(&requested.bundle),
                value(&requested.version),
                value(&requested.catalog)
            );
        }
        return Ok(());
    }
    let params = PatchParams::apply(FIELD_MANAGER).force();
    for (object, planned) in &steps {
        let dependency = object["metadata"]["name"].as_str().unwrap_or_default();
        if args.service_account.is_none() {
            install_with_installer(&client, args, object).await?;
        }
        api.patch(dependency, &params, &Patch::Apply(object))
            .await
            .map_err(|e| format!("applying ClusterExtension {dependency:?}: {e}"))?;
        outln!(
            "clusterextension/{dependency} applied ({} {})",
            value(&planned.bundle),
            value(&planned.version)
        );
        wait_installed(&api, dependency, Some(&planned.version), args.timeout).await?;
        outln!("clusterextension/{dependency} installed");
    }
    if args.service_account.is_none() {
        install_with_installer(&client, args, &object).await?;
    }
    api.patch(&name, &params, &Patch::Apply(&object))
        .await
        .map_err(|e| format!("applying ClusterExtension {name:?}: {e}"))?;
    outln!("clusterextension/{name} applied");
    wait_installed(&api, &name, None, args.timeout).await?;
    outln!("clusterextension/{name} installed");
    Ok(())
}

/// The ClusterExtension of a planned dependency: named after its package, in the requested
/// extension's namespace, installed as `--service-account` or else as its own
/// `<package>-installer`, pinned to the planned version and catalog.
fn dependency_object(args: &InstallArgs, planned: &crate::dependencies::PlannedBundle) -> Value {
    let service_account = args
        .service_account
        .clone()
        .unwrap_or_else(|| installer_name(&planned.package));
    json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterExtension",
        "metadata": {"name": planned.package},
        "spec": {
            "namespace": args.namespace,
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
) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(timeout_seconds);
    let mut last = String::from("no status yet");
    loop {
        let ext = api
            .get(name)
            .await
            .map_err(|e| format!("reading ClusterExtension {name:?}: {e}"))?;
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
                return Err(format!(
                    "ClusterExtension {name:?} cannot be installed: {}",
                    progressing.message
                ));
            }
            last = format!("Progressing {}: {}", progressing.reason, progressing.message);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "ClusterExtension {name:?} was not installed within {timeout_seconds} s ({last})"
            ));
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}
