//! `olmv1 rbac`: the ServiceAccount, roles and bindings an installer needs for a package or an
//! installed extension, as YAML for `kubectl apply -f -`; `--diff` shows what an upgrade changes.
//! Also the installer's life cycle that `olmv1 install|upgrade|uninstall` use: compute, show,
//! confirm, apply, remove. What the rules are is computed in `admin::rbac`.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use olmv1_api::v1::ClusterExtension;
use serde_json::{Value, json};

use super::render::{OutputFormat, format_objects};
use super::sources::{SourceArgs, fail, kube_client};
use crate::admin::cluster::{self, SourcedCatalog, check_readable};
use crate::admin::rbac::{
    InstallerSpec, LABEL_INSTALLER_FOR, RbacDiff, diff, grants_of_roles, installer_grants, installer_name,
    installer_objects,
};
use crate::apply::lookups::ClusterLookups;
use crate::apply::preflight::{Access, discover_resources};
use crate::apply::revision::{ObjectRef, RevisionStore};
use crate::bundle::registry_v1::RegistryV1Bundle;
use crate::bundle::render::{WebhookProvider, render_with_provider};
use crate::catalog::{Bundle, SCHEMA_BUNDLE};
use crate::image::pull_and_read;
use crate::resolve::{
    CatalogSelector, InstalledBundle, Resolution, ResolveRequest, resolve_allowing_dependencies,
};

/// The field manager of the installer objects the command line writes.
const FIELD_MANAGER: &str = super::install::FIELD_MANAGER;

/// Arguments of `olmv1 rbac`.
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["extension", "package", "diff"])))]
pub struct RbacArgs {
    /// An installed ClusterExtension: the RBAC covers upgrading it to what it resolves now (with
    /// the flags' overrides) and uninstalling what it has installed.
    pub extension: Option<String>,
    /// A package to install (with --namespace).
    #[arg(long, conflicts_with = "extension")]
    pub package: Option<String>,
    /// Show what upgrading this ClusterExtension (to --version, --channel) adds to and drops from
    /// its installer's permissions.
    #[arg(long, value_name = "EXTENSION", conflicts_with_all = ["extension", "package"])]
    pub diff: Option<String>,
    /// The ClusterExtension's name, for a package (default: the package name).
    #[arg(long, requires = "package")]
    pub name: Option<String>,
    /// The install namespace, for a package.
    #[arg(long, short = 'n', requires = "package")]
    pub namespace: Option<String>,
    /// The installer's ServiceAccount name (default: `<extension>-installer`, or the extension's).
    #[arg(long)]
    pub service_account: Option<String>,
    /// A version range (Masterminds syntax).
    #[arg(long)]
    pub version: Option<String>,
    /// A channel. Repeatable.
    #[arg(long = "channel", value_name = "CHANNEL")]
    pub channels: Vec<String>,
    /// Only catalogs with this label, `KEY=VALUE`. Repeatable.
    #[arg(long = "catalog-label", value_name = "KEY=VALUE", requires = "package")]
    pub catalog_labels: Vec<String>,
    /// The namespace the operator watches (SingleNamespace/OwnNamespace), for a package.
    #[arg(long, value_name = "NS", requires = "package")]
    pub watch_namespace: Option<String>,
    /// Grant `escalate`/`bind` on the bundle's own roles instead of every rule they grant.
    #[arg(long)]
    pub allow_escalate: bool,
    /// Who provides webhook serving certificates (as the controller's flag of the same name).
    #[arg(long, value_enum, default_value = "cert-manager")]
    pub webhook_provider: WebhookProvider,
    /// The controller's namespace (where it records installed revisions).
    #[arg(long, env = "OLMV1_SYSTEM_NAMESPACE", default_value = "olmv1-system")]
    pub system_namespace: String,
    #[command(flatten)]
    pub sources: SourceArgs,
}

/// What an installer is computed for: the ClusterExtension as it is (or will be) written.
pub struct Target<'a> {
    /// The desired ClusterExtension.
    pub extension: &'a ClusterExtension,
    /// Its installed bundle, for resolution (`None` for a new extension).
    pub installed: Option<InstalledBundle>,
    /// The installed revision's objects (an upgrade may prune them, the uninstall deletes them).
    pub installed_objects: &'a [ObjectRef],
    /// The installer's ServiceAccount.
    pub service_account: &'a str,
    /// See [`RbacArgs::allow_escalate`].
    pub allow_escalate: bool,
    /// See [`RbacArgs::webhook_provider`].
    pub webhook_provider: WebhookProvider,
}

/// An installer computed for a resolved bundle.
pub struct Installer {
    /// What the extension resolves to.
    pub resolution: Resolution,
    /// The requests the installer must be allowed to make.
    pub grants: Vec<Access>,
    /// The ServiceAccount, roles and bindings.
    pub objects: Vec<Value>,
}

impl Installer {
    /// The objects as a YAML stream, after a comment naming the bundle.
    pub fn yaml(&self, extension: &str) -> Result<String, String> {
        let header = format!(
            "# installer of ClusterExtension {extension:?}: install, upgrade and uninstall {} {} (catalog {})\n",
            crate::admin::terminal::escape_value(&self.resolution.bundle.name),
            crate::admin::terminal::escape_value(&self.resolution.bundle.status_version),
            crate::admin::terminal::escape_value(&self.resolution.catalog)
        );
        Ok(header + &format_objects(&self.objects, OutputFormat::Yaml)?)
    }
}

/// Resolves `target` from `sources`, renders the bundle and computes its installer.
pub async fn compute_installer(
    client: &Client,
    target: &Target<'_>,
    sources: &SourceArgs,
) -> Result<Installer, String> {
    let ext = target.extension;
    let name = ext.name_any();
    let catalogs = sources.load().await?;
    let request =
        ResolveRequest::from_cluster_extension(ext, target.installed.clone()).map_err(|e| e.to_string())?;
    let selector = CatalogSelector::new(request.selector.as_ref())?;
    check_readable(&catalogs, |c| selector.matches(&c.labels)).map_err(|e| e.to_string())?;
    let inputs: Vec<_> = catalogs.iter().map(|c| c.input.clone()).collect();
    // What the bundle requires does not change what installing it takes.
    let resolution = resolve_allowing_dependencies(&request, &inputs)
        .map_err(|e| format!("ClusterExtension {name:?}: {e}"))?;
    let bundle = load_bundle(&catalogs, &resolution, sources).await?;
    let config = ext
        .spec
        .config
        .as_ref()
        .and_then(|c| c.inline.clone())
        .map(Value::Object);
    let rendered = render_with_provider(
        &bundle,
        &ext.spec.namespace,
        config.as_ref(),
        target.webhook_provider,
    )
    .map_err(|e| format!("bundle {}: {e}", resolution.bundle.name))?;
    let resources = discover_resources(client, &ClusterLookups::new(), &rendered)
        .await
        .map_err(|e| e.to_string())?;
    let spec = InstallerSpec {
        extension: &name,
        namespace: &ext.spec.namespace,
        service_account: target.service_account,
        allow_escalate: target.allow_escalate,
    };
    let grants = installer_grants(&spec, &rendered, target.installed_objects, &resources)
        .map_err(|e| format!("bundle {}: {e}", resolution.bundle.name))?;
    let objects = installer_objects(&spec, &grants);
    Ok(Installer {
        resolution,
        grants,
        objects,
    })
}

/// The resolved bundle's manifests: from the catalog's `olm.bundle.object` properties when it
/// has them, else from its image.
async fn load_bundle(
    catalogs: &[SourcedCatalog],
    resolution: &Resolution,
    sources: &SourceArgs,
) -> Result<RegistryV1Bundle, String> {
    let wanted = &resolution.bundle.name;
    let catalog = catalogs.iter().find(|c| c.input.name == resolution.catalog);
    if let Some(content) = catalog.and_then(|c| c.content.as_ref()) {
        let mut found: Option<Bundle> = None;
        content
            .for_each_meta(|meta| {
                if found.is_none() && &*meta.schema == SCHEMA_BUNDLE && &*meta.name == wanted.as_str() {
                    found = serde_json::from_slice(&meta.blob).ok();
                }
                Ok(())
            })
            .map_err(|e| format!("catalog {:?}: {e}", resolution.catalog))?;
        if let Some(bundle) = found.filter(|b| {
            b.properties
                .iter()
                .any(|p| &*p.type_ == crate::catalog::PROPERTY_BUNDLE_OBJECT)
        }) {
            return RegistryV1Bundle::from_catalog_bundle(&bundle.package, &bundle.name, &bundle.properties)
                .map_err(|e| format!("bundle {wanted}: {e}"));
        }
    }
    let pull = sources.pull_options();
    let image = &resolution.bundle.image;
    let max_file_bytes = pull.limits.max_file_bytes;
    let (_, loaded) = pull_and_read(image, &pull, |dir| {
        RegistryV1Bundle::from_dir_within(dir, max_file_bytes)
    })
    .await
    .map_err(|e| format!("bundle image {image:?}: {e}"))?;
    loaded.map_err(|e| format!("bundle image {image:?}: {e}"))
}

/// The ClusterExtension `olmv1 rbac EXTENSION` and `--diff` start from: the installed one with
/// the flags' version and channels.
fn with_overrides(
    ext: &ClusterExtension,
    version: Option<&str>,
    channels: &[String],
) -> Result<ClusterExtension, String> {
    let mut value = serde_json::to_value(ext).map_err(|e| e.to_string())?;
    if let Some(v) = version {
        value["spec"]["source"]["catalog"]["version"] = json!(v);
    }
    if !channels.is_empty() {
        value["spec"]["source"]["catalog"]["channels"] = json!(channels);
    }
    serde_json::from_value(value).map_err(|e| e.to_string())
}

/// The installed revision's objects (empty when nothing is installed).
pub async fn installed_objects(
    client: &Client,
    system_namespace: &str,
    extension: &str,
) -> Result<Vec<ObjectRef>, String> {
    RevisionStore::new(client.clone(), system_namespace)
        .load(extension)
        .await
        .map(|r| r.map(|r| r.objects).unwrap_or_default())
        .map_err(|e| format!("reading the installed revision of {extension:?}: {e}"))
}

/// Runs `olmv1 rbac`.
pub async fn run(args: RbacArgs) -> ExitCode {
    match run_inner(&args).await {
        Ok(text) => {
            out!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => fail("rbac", &e),
    }
}

async fn run_inner(args: &RbacArgs) -> Result<String, String> {
    let client = kube_client().await?;
    if let Some(package) = &args.package {
        let namespace = args
            .namespace
            .clone()
            .ok_or("--namespace is required with --package")?;
        let name = args.name.clone().unwrap_or_else(|| package.clone());
        let service_account = args
            .service_account
            .clone()
            .unwrap_or_else(|| installer_name(&name));
        let mut catalog = json!({"packageName": package});
        if let Some(v) = &args.version {
            catalog["version"] = json!(v);
        }
        if !args.channels.is_empty() {
            catalog["channels"] = json!(args.channels);
        }
        if !args.catalog_labels.is_empty() {
            catalog["selector"] = json!({"matchLabels": super::install::label_map(&args.catalog_labels)?});
        }
        let mut object = json!({
            "apiVersion": "olm.operatorframework.io/v1",
            "kind": "ClusterExtension",
            "metadata": {"name": name},
            "spec": {"namespace": namespace, "serviceAccount": {"name": service_account},
                     "source": {"sourceType": "Catalog", "catalog": catalog}}
        });
        if let Some(ns) = &args.watch_namespace {
            object["spec"]["config"] = json!({"configType": "Inline", "inline": {"watchNamespace": ns}});
        }
        let ext: ClusterExtension = serde_json::from_value(object).map_err(|e| e.to_string())?;
        let target = Target {
            extension: &ext,
            installed: None,
            installed_objects: &[],
            service_account: &service_account,
            allow_escalate: args.allow_escalate,
            webhook_provider: args.webhook_provider,
        };
        let installer = compute_installer(&client, &target, &args.sources).await?;
        return installer.yaml(&name);
    }
    if let Some(name) = &args.diff {
        let current = cluster::cluster_extension(&client, name)
            .await
            .map_err(|e| e.to_string())?;
        let desired = with_overrides(&current, args.version.as_deref(), &args.channels)?;
        let (installer, change) = upgrade_diff(
            &client,
            &current,
            &desired,
            &args.system_namespace,
            args.allow_escalate,
            args.webhook_provider,
            &args.sources,
        )
        .await?;
        return Ok(format!(
            "# permissions of {} to upgrade ClusterExtension {name:?} to {} {}:\n{change}",
            account_name(&current),
            installer.resolution.bundle.name,
            installer.resolution.bundle.status_version
        ));
    }
    let name = args
        .extension
        .as_deref()
        .ok_or("an EXTENSION, --package or --diff is required")?;
    let current = cluster::cluster_extension(&client, name)
        .await
        .map_err(|e| e.to_string())?;
    let desired = with_overrides(&current, args.version.as_deref(), &args.channels)?;
    let objects = installed_objects(&client, &args.system_namespace, name).await?;
    let service_account = args
        .service_account
        .clone()
        .unwrap_or_else(|| account_name(&current));
    let target = Target {
        extension: &desired,
        installed: cluster::installed_bundle(&current),
        installed_objects: &objects,
        service_account: &service_account,
        allow_escalate: args.allow_escalate,
        webhook_provider: args.webhook_provider,
    };
    compute_installer(&client, &target, &args.sources)
        .await?
        .yaml(name)
}

/// The installer for upgrading `current` to `desired`, and how its permissions change: from
/// what the extension's installer roles in the cluster grant (an installer olmv1 created), or,
/// for an admin's own account, from what the installed bundle needs.
pub async fn upgrade_diff(
    client: &Client,
    current: &ClusterExtension,
    desired: &ClusterExtension,
    system_namespace: &str,
    allow_escalate: bool,
    webhook_provider: WebhookProvider,
    sources: &SourceArgs,
) -> Result<(Installer, RbacDiff), String> {
    let name = current.name_any();
    let installed = cluster::installed_bundle(current);
    let objects = installed_objects(client, system_namespace, &name).await?;
    let service_account = account_name(current);
    let service_account = service_account.as_str();
    let target = Target {
        extension: desired,
        installed: installed.clone(),
        installed_objects: &objects,
        service_account,
        allow_escalate,
        webhook_provider,
    };
    let new = compute_installer(client, &target, sources).await?;
    let old = match held_grants(client, &name).await? {
        Some(grants) => grants,
        None => {
            let Some(installed) = installed else {
                return Err(format!(
                    "ClusterExtension {name:?} has nothing installed to compare with"
                ));
            };
            // The installed bundle again: its exact version, needing no upgrade edge.
            let mut pinned = with_overrides(current, Some(&installed.version), &[])?;
            if let Some(c) = pinned.spec.source.catalog.as_mut() {
                c.upgrade_constraint_policy = olmv1_api::v1::UpgradeConstraintPolicy::SelfCertified;
            }
            let target = Target {
                extension: &pinned,
                installed: None,
                installed_objects: &[],
                service_account,
                allow_escalate,
                webhook_provider,
            };
            compute_installer(client, &target, sources).await?.grants
        }
    };
    let change = diff(&old, &new.grants);
    Ok((new, change))
}

/// The extension's ServiceAccount name, or `<extension>-installer` when it names none (the
/// account `olmv1 rbac` would write for it).
pub fn account_name(ext: &ClusterExtension) -> String {
    ext.spec
        .service_account_name()
        .map(str::to_string)
        .unwrap_or_else(|| installer_name(&ext.name_any()))
}

/// What the installer roles olmv1 created for `extension` grant; `None` when there are none.
pub async fn held_grants(client: &Client, extension: &str) -> Result<Option<Vec<Access>>, String> {
    let selector = ListParams::default().labels(&format!("{LABEL_INSTALLER_FOR}={extension}"));
    let err = |e: kube::Error| format!("reading the installer roles of {extension:?}: {e}");
    let cluster_roles = Api::<ClusterRole>::all(client.clone())
        .list(&selector)
        .await
        .map_err(err)?;
    let roles = Api::<Role>::all(client.clone())
        .list(&selector)
        .await
        .map_err(err)?;
    if cluster_roles.items.is_empty() && roles.items.is_empty() {
        return Ok(None);
    }
    let cluster_rules: Vec<_> = cluster_roles
        .items
        .into_iter()
        .flat_map(|r| r.rules.unwrap_or_default())
        .collect();
    let namespaced: Vec<_> = roles
        .items
        .into_iter()
        .map(|r| (r.namespace().unwrap_or_default(), r.rules.unwrap_or_default()))
        .collect();
    Ok(Some(grants_of_roles(&cluster_rules, &namespaced)))
}

/// Whether `extension` installs as an installer olmv1 created (its ServiceAccount carries the
/// label naming it).
pub async fn is_olmv1_installer(client: &Client, ext: &ClusterExtension) -> Result<bool, String> {
    let Some(name) = ext.spec.service_account_name() else {
        return Ok(false);
    };
    let account = Api::<ServiceAccount>::namespaced(client.clone(), &ext.spec.namespace)
        .get_opt(name)
        .await
        .map_err(|e| format!("reading ServiceAccount {name:?}: {e}"))?;
    Ok(account.is_some_and(|a| a.labels().get(LABEL_INSTALLER_FOR) == Some(&ext.name_any())))
}

/// Asks on the terminal whether to go on, unless `yes`; an error when it cannot ask.
pub fn confirm(question: &str, yes: bool) -> Result<(), String> {
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

/// Server-side applies the installer's objects, then deletes installer roles and bindings of
/// the extension that the new set no longer has (an upgrade that leaves a namespace).
pub async fn apply_installer(client: &Client, extension: &str, objects: &[Value]) -> Result<(), String> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    for object in objects {
        let kind = object["kind"].as_str().unwrap_or_default();
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
        let patch = Patch::Apply(object);
        let result = match kind {
            "ServiceAccount" => Api::<ServiceAccount>::namespaced(client.clone(), namespace)
                .patch(name, &params, &patch)
                .await
                .map(drop),
            "ClusterRole" => Api::<ClusterRole>::all(client.clone())
                .patch(name, &params, &patch)
                .await
                .map(drop),
            "ClusterRoleBinding" => Api::<ClusterRoleBinding>::all(client.clone())
                .patch(name, &params, &patch)
                .await
                .map(drop),
            "Role" => Api::<Role>::namespaced(client.clone(), namespace)
                .patch(name, &params, &patch)
                .await
                .map(drop),
            "RoleBinding" => Api::<RoleBinding>::namespaced(client.clone(), namespace)
                .patch(name, &params, &patch)
                .await
                .map(drop),
            other => return Err(format!("unexpected installer object kind {other:?}")),
        };
        result.map_err(|e| match &e {
            kube::Error::Api(s) if s.code == 404 && kind == "ServiceAccount" => {
                format!("namespace {namespace:?} does not exist: create it first (kubectl create namespace {namespace})")
            }
            _ => format!("applying {kind} {name:?}: {e}"),
        })?;
    }
    let keep = |kind: &str, ns: Option<&str>| {
        objects
            .iter()
            .any(|o| o["kind"] == kind && o["metadata"]["namespace"].as_str() == ns)
    };
    remove_installer_where(client, extension, |kind, ns| !keep(kind, ns), false).await
}

/// Deletes every object of `extension`'s installer (ServiceAccount, roles, bindings).
pub async fn remove_installer(client: &Client, extension: &str) -> Result<(), String> {
    remove_installer_where(client, extension, |_, _| true, true).await
}

/// The installer objects of `extension` in the cluster, as `kind/name` (namespaced: `ns/kind/name`).
pub async fn installer_in_cluster(client: &Client, extension: &str) -> Result<Vec<String>, String> {
    let mut found = Vec::new();
    let selector = ListParams::default().labels(&format!("{LABEL_INSTALLER_FOR}={extension}"));
    let err = |e: kube::Error| format!("listing the installer of {extension:?}: {e}");
    for a in Api::<ServiceAccount>::all(client.clone())
        .list(&selector)
        .await
        .map_err(err)?
    {
        found.push(format!(
            "{}/serviceaccount/{}",
            a.namespace().unwrap_or_default(),
            a.name_any()
        ));
    }
    for r in Api::<ClusterRole>::all(client.clone())
        .list(&selector)
        .await
        .map_err(err)?
    {
        found.push(format!("clusterrole/{}", r.name_any()));
    }
    for r in Api::<ClusterRoleBinding>::all(client.clone())
        .list(&selector)
        .await
        .map_err(err)?
    {
        found.push(format!("clusterrolebinding/{}", r.name_any()));
    }
    for r in Api::<Role>::all(client.clone())
        .list(&selector)
        .await
        .map_err(err)?
    {
        found.push(format!(
            "{}/role/{}",
            r.namespace().unwrap_or_default(),
            r.name_any()
        ));
    }
    for r in Api::<RoleBinding>::all(client.clone())
        .list(&selector)
        .await
        .map_err(err)?
    {
        found.push(format!(
            "{}/rolebinding/{}",
            r.namespace().unwrap_or_default(),
            r.name_any()
        ));
    }
    Ok(found)
}

async fn remove_installer_where(
    client: &Client,
    extension: &str,
    remove: impl Fn(&str, Option<&str>) -> bool,
    with_account: bool,
) -> Result<(), String> {
    let selector = ListParams::default().labels(&format!("{LABEL_INSTALLER_FOR}={extension}"));
    let err = |e: kube::Error| format!("removing the installer of {extension:?}: {e}");
    let params = DeleteParams::default();
    let gone = |r: Result<(), kube::Error>| match r {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        other => other,
    };
    for b in Api::<ClusterRoleBinding>::all(client.clone())
        .list(&selector)
        .await
        .map_err(err)?
    {
        if remove("ClusterRoleBinding", None) {
            gone(
                Api::<ClusterRoleBinding>::all(client.clone())
                    .delete(&b.name_any(), &params)
                    .await
                    .map(drop),
            )
            .map_err(err)?;
        }
    }
    for r in Api::<ClusterRole>::all(client.clone())
        .list(&selector)
        .await
        .map_err(err)?
    {
        if remove("ClusterRole", None) {
            gone(
                Api::<ClusterRole>::all(client.clone())
                    .delete(&r.name_any(), &params)
                    .await
                    .map(drop),
            )
            .map_err(err)?;
        }
    }
    for b in Api::<RoleBinding>::all(client.clone())
        .list(&selector)
        .await
        .map_err(err)?
    {
        let ns = b.namespace().unwrap_or_default();
        if remove("RoleBinding", Some(&ns)) {
            gone(
                Api::<RoleBinding>::namespaced(client.clone(), &ns)
                    .delete(&b.name_any(), &params)
                    .await
                    .map(drop),
            )
            .map_err(err)?;
        }
    }
    for r in Api::<Role>::all(client.clone())
        .list(&selector)
        .await
        .map_err(err)?
    {
        let ns = r.namespace().unwrap_or_default();
        if remove("Role", Some(&ns)) {
            gone(
                Api::<Role>::namespaced(client.clone(), &ns)
                    .delete(&r.name_any(), &params)
                    .await
                    .map(drop),
            )
            .map_err(err)?;
        }
    }
    if with_account {
        for a in Api::<ServiceAccount>::all(client.clone())
            .list(&selector)
            .await
            .map_err(err)?
        {
            let ns = a.namespace().unwrap_or_default();
            gone(
                Api::<ServiceAccount>::namespaced(client.clone(), &ns)
                    .delete(&a.name_any(), &params)
                    .await
                    .map(drop),
            )
            .map_err(err)?;
        }
    }
    Ok(())
}
