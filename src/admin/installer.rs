//! The installer of a ClusterExtension, as `olmv1 rbac` prints it and `olmv1 install|upgrade|
//! uninstall` and `migrate convert` create, change and remove it: the ServiceAccount, roles and
//! bindings the permission preflight's own computation (`admin::rbac::installer_grants`) says
//! the bundle's install, upgrade and uninstall need. Resolution, bundle loading and rendering are
//! the controller's (`resolve`, `bundle`), so the printed RBAC is what the controller will ask.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use olmv1_api::v1::ClusterExtension;
use serde_json::{Value, json};

use super::cluster::{self, ClusterError, SourcedCatalog, check_readable};
use super::rbac::{
    InstallerSpec, LABEL_INSTALLER_FOR, RbacDiff, diff, grants_of_roles, installer_grants, installer_name,
    installer_objects,
};
use super::sources::{CatalogSources, SourcesError};
use super::terminal::{escape_value, yaml_stream};
use crate::apply::lookups::ClusterLookups;
use crate::apply::preflight::{Access, PreflightError, discover_resources};
use crate::apply::revision::{ObjectRef, RecordError, RevisionStore};
use crate::bundle::registry_v1::{LoadError, RegistryV1Bundle};
use crate::bundle::render::{RenderError, RenderOptions, WebhookProvider, render_with_options};
use crate::catalog::{Bundle, CatalogError, SCHEMA_BUNDLE};
use crate::controller::cluster_extension::operator_conditions::OperatorConditionsMode;
use crate::image::pull_and_read;
use crate::resolve::{
    CatalogSelector, InstalledBundle, Resolution, ResolveError, ResolveRequest, resolve_allowing_dependencies,
};

/// The field manager of the objects the command line writes (installers and ClusterExtensions).
pub const FIELD_MANAGER: &str = "olmv1-cli";

/// Why an installer could not be computed, applied or removed.
#[derive(Debug, thiserror::Error)]
pub enum InstallerError {
    /// The catalogs could not be loaded.
    #[error(transparent)]
    Sources(#[from] SourcesError),
    /// The cluster could not be read, or a catalog consulted is unreadable.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// The ClusterExtension is not a valid resolution request.
    #[error(transparent)]
    Request(#[from] ResolveError),
    /// Its catalog selector is invalid.
    #[error("{0}")]
    Selector(String),
    /// Nothing resolves for the ClusterExtension.
    #[error("ClusterExtension {extension:?}: {source}")]
    Unresolved {
        /// The ClusterExtension.
        extension: String,
        /// Why.
        #[source]
        source: Box<ResolveError>,
    },
    /// The resolved catalog's content could not be read.
    #[error("catalog {catalog:?}: {source}")]
    Catalog {
        /// The catalog.
        catalog: String,
        /// Why.
        #[source]
        source: CatalogError,
    },
    /// The resolved bundle's catalog entry is not a registry+v1 bundle.
    #[error("bundle {bundle}: {source}")]
    Bundle {
        /// The bundle.
        bundle: String,
        /// Why.
        #[source]
        source: LoadError,
    },
    /// The bundle image could not be pulled or read.
    #[error("bundle image {image:?}: {message}")]
    BundleImage {
        /// The image reference.
        image: String,
        /// Why (the pull's or the bundle reader's error).
        message: String,
    },
    /// The bundle does not render.
    #[error("bundle {bundle}: {source}")]
    Render {
        /// The bundle.
        bundle: String,
        /// Why.
        #[source]
        source: RenderError,
    },
    /// The cluster's resources could not be discovered.
    #[error(transparent)]
    Discovery(PreflightError),
    /// The preflight could not compute what the installer must be allowed.
    #[error("bundle {bundle}: {source}")]
    Grants {
        /// The bundle.
        bundle: String,
        /// Why.
        #[source]
        source: PreflightError,
    },
    /// The installed revision could not be read.
    #[error("reading the installed revision of {extension:?}: {source}")]
    Revision {
        /// The ClusterExtension.
        extension: String,
        /// Why.
        #[source]
        source: Box<RecordError>,
    },
    /// `--diff` of an extension with its own account and nothing installed.
    #[error("ClusterExtension {0:?} has nothing installed to compare with")]
    NothingInstalled(String),
    /// The API server refused a read or write.
    #[error("{what}: {source}")]
    Api {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: Box<kube::Error>,
    },
    /// The installer's ServiceAccount cannot be written: its namespace is missing.
    #[error("namespace {0:?} does not exist: create it first (kubectl create namespace {0})")]
    NoNamespace(String),
    /// An object of a kind an installer never has (a bug of `installer_objects`).
    #[error("unexpected installer object kind {0:?}")]
    UnexpectedKind(String),
    /// A ClusterExtension or its YAML could not be (de)serialized.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// The installer's YAML could not be written.
    #[error(transparent)]
    Yaml(#[from] serde_saphyr::SerializeError),
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
    /// Grant `escalate`/`bind` on the bundle's own roles instead of every rule they grant.
    pub allow_escalate: bool,
    /// Who provides webhook serving certificates (as the controller's flag of the same name).
    pub webhook_provider: WebhookProvider,
    /// Whether the controller keeps OperatorConditions ([`cluster::operator_conditions_kept`]):
    /// the installer then writes each bundle's OperatorCondition, its Role and RoleBinding.
    pub operator_conditions: bool,
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
    pub fn yaml(&self, extension: &str) -> Result<String, InstallerError> {
        let header = format!(
            "# installer of ClusterExtension {extension:?}: install, upgrade and uninstall {} {} (catalog {})\n",
            escape_value(&self.resolution.bundle.name),
            escape_value(&self.resolution.bundle.status_version),
            escape_value(&self.resolution.catalog)
        );
        Ok(header + &yaml_stream(&self.objects)?)
    }
}

/// Resolves `target` from `sources`, renders the bundle and computes its installer.
pub async fn compute_installer(
    client: &Client,
    target: &Target<'_>,
    sources: &CatalogSources,
) -> Result<Installer, InstallerError> {
    let ext = target.extension;
    let name = ext.name_any();
    let catalogs = sources.load().await?;
    let request = ResolveRequest::from_cluster_extension(ext, target.installed.clone())?;
    let selector = CatalogSelector::new(request.selector.as_ref()).map_err(InstallerError::Selector)?;
    check_readable(&catalogs, |c| selector.matches(&c.labels))?;
    let inputs: Vec<_> = catalogs.iter().map(|c| c.input.clone()).collect();
    // What the bundle requires does not change what installing it takes.
    let resolution =
        resolve_allowing_dependencies(&request, &inputs).map_err(|source| InstallerError::Unresolved {
            extension: name.clone(),
            source: Box::new(source),
        })?;
    let bundle = load_bundle(&catalogs, &resolution, sources).await?;
    let config = ext
        .spec
        .config
        .as_ref()
        .and_then(|c| c.inline.clone())
        .map(Value::Object);
    let options = RenderOptions {
        webhook_provider: target.webhook_provider,
        operator_conditions: target.operator_conditions,
    };
    let rendered =
        render_with_options(&bundle, &ext.spec.namespace, config.as_ref(), options).map_err(|source| {
            InstallerError::Render {
                bundle: resolution.bundle.name.clone(),
                source,
            }
        })?;
    let resources = discover_resources(client, &ClusterLookups::new(), &rendered)
        .await
        .map_err(InstallerError::Discovery)?;
    let spec = InstallerSpec {
        extension: &name,
        namespace: &ext.spec.namespace,
        service_account: target.service_account,
        allow_escalate: target.allow_escalate,
    };
    let grants =
        installer_grants(&spec, &rendered, target.installed_objects, &resources).map_err(|source| {
            InstallerError::Grants {
                bundle: resolution.bundle.name.clone(),
                source,
            }
        })?;
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
    sources: &CatalogSources,
) -> Result<RegistryV1Bundle, InstallerError> {
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
            .map_err(|source| InstallerError::Catalog {
                catalog: resolution.catalog.clone(),
                source,
            })?;
        if let Some(bundle) = found.filter(|b| {
            b.properties
                .iter()
                .any(|p| &*p.type_ == crate::catalog::PROPERTY_BUNDLE_OBJECT)
        }) {
            return RegistryV1Bundle::from_catalog_bundle(&bundle.package, &bundle.name, &bundle.properties)
                .map_err(|source| InstallerError::Bundle {
                    bundle: wanted.clone(),
                    source,
                });
        }
    }
    let pull = sources.pull_options();
    let image = &resolution.bundle.image;
    let max_file_bytes = pull.limits.max_file_bytes;
    let (_, loaded) = pull_and_read(image, &pull, |dir| {
        RegistryV1Bundle::from_dir_within(dir, max_file_bytes)
    })
    .await
    .map_err(|e| bundle_image(image, e))?;
    loaded.map_err(|e| bundle_image(image, e))
}

fn bundle_image(image: &str, error: impl std::fmt::Display) -> InstallerError {
    InstallerError::BundleImage {
        image: image.to_string(),
        message: error.to_string(),
    }
}

/// The ClusterExtension `olmv1 rbac EXTENSION` and `--diff` start from: the installed one with
/// another version range and channels.
pub fn with_overrides(
    ext: &ClusterExtension,
    version: Option<&str>,
    channels: &[String],
) -> Result<ClusterExtension, InstallerError> {
    let mut value = serde_json::to_value(ext)?;
    if let Some(v) = version {
        value["spec"]["source"]["catalog"]["version"] = json!(v);
    }
    if !channels.is_empty() {
        value["spec"]["source"]["catalog"]["channels"] = json!(channels);
    }
    Ok(serde_json::from_value(value)?)
}

/// The installed revision's objects (empty when nothing is installed).
pub async fn installed_objects(
    client: &Client,
    system_namespace: &str,
    extension: &str,
) -> Result<Vec<ObjectRef>, InstallerError> {
    RevisionStore::new(client.clone(), system_namespace)
        .load(extension)
        .await
        .map(|r| r.map(|r| r.objects).unwrap_or_default())
        .map_err(|source| InstallerError::Revision {
            extension: extension.to_string(),
            source: Box::new(source),
        })
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
    render: RenderOptions,
    sources: &CatalogSources,
) -> Result<(Installer, RbacDiff), InstallerError> {
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
        webhook_provider: render.webhook_provider,
        operator_conditions: render.operator_conditions,
    };
    let new = compute_installer(client, &target, sources).await?;
    let old = match held_grants(client, &name).await? {
        Some(grants) => grants,
        None => {
            let Some(installed) = installed else {
                return Err(InstallerError::NothingInstalled(name));
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
                webhook_provider: render.webhook_provider,
                operator_conditions: render.operator_conditions,
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
pub async fn held_grants(client: &Client, extension: &str) -> Result<Option<Vec<Access>>, InstallerError> {
    let selector = ListParams::default().labels(&format!("{LABEL_INSTALLER_FOR}={extension}"));
    let err = api_error(format!("reading the installer roles of {extension:?}"));
    let cluster_roles = Api::<ClusterRole>::all(client.clone())
        .list(&selector)
        .await
        .map_err(&err)?;
    let roles = Api::<Role>::all(client.clone())
        .list(&selector)
        .await
        .map_err(&err)?;
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
pub async fn is_olmv1_installer(client: &Client, ext: &ClusterExtension) -> Result<bool, InstallerError> {
    let Some(name) = ext.spec.service_account_name() else {
        return Ok(false);
    };
    let account = Api::<ServiceAccount>::namespaced(client.clone(), &ext.spec.namespace)
        .get_opt(name)
        .await
        .map_err(api_error(format!("reading ServiceAccount {name:?}")))?;
    Ok(account.is_some_and(|a| a.labels().get(LABEL_INSTALLER_FOR) == Some(&ext.name_any())))
}

/// Server-side applies the installer's objects, then deletes installer roles and bindings of
/// the extension that the new set no longer has (an upgrade that leaves a namespace).
pub async fn apply_installer(
    client: &Client,
    extension: &str,
    objects: &[Value],
) -> Result<(), InstallerError> {
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
            other => return Err(InstallerError::UnexpectedKind(other.to_string())),
        };
        result.map_err(|e| match &e {
            kube::Error::Api(s) if s.code == 404 && kind == "ServiceAccount" => {
                InstallerError::NoNamespace(namespace.to_string())
            }
            _ => api_error(format!("applying {kind} {name:?}"))(e),
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
pub async fn remove_installer(client: &Client, extension: &str) -> Result<(), InstallerError> {
    remove_installer_where(client, extension, |_, _| true, true).await
}

/// The installer objects of `extension` in the cluster, as `kind/name` (namespaced: `ns/kind/name`).
pub async fn installer_in_cluster(client: &Client, extension: &str) -> Result<Vec<String>, InstallerError> {
    let mut found = Vec::new();
    let selector = ListParams::default().labels(&format!("{LABEL_INSTALLER_FOR}={extension}"));
    let err = api_error(format!("listing the installer of {extension:?}"));
    for a in Api::<ServiceAccount>::all(client.clone())
        .list(&selector)
        .await
        .map_err(&err)?
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
        .map_err(&err)?
    {
        found.push(format!("clusterrole/{}", r.name_any()));
    }
    for r in Api::<ClusterRoleBinding>::all(client.clone())
        .list(&selector)
        .await
        .map_err(&err)?
    {
        found.push(format!("clusterrolebinding/{}", r.name_any()));
    }
    for r in Api::<Role>::all(client.clone())
        .list(&selector)
        .await
        .map_err(&err)?
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
        .map_err(&err)?
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
) -> Result<(), InstallerError> {
    let selector = ListParams::default().labels(&format!("{LABEL_INSTALLER_FOR}={extension}"));
    let err = api_error(format!("removing the installer of {extension:?}"));
    let params = DeleteParams::default();
    let gone = |r: Result<(), kube::Error>| match r {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        other => other,
    };
    for b in Api::<ClusterRoleBinding>::all(client.clone())
        .list(&selector)
        .await
        .map_err(&err)?
    {
        if remove("ClusterRoleBinding", None) {
            gone(
                Api::<ClusterRoleBinding>::all(client.clone())
                    .delete(&b.name_any(), &params)
                    .await
                    .map(drop),
            )
            .map_err(&err)?;
        }
    }
    for r in Api::<ClusterRole>::all(client.clone())
        .list(&selector)
        .await
        .map_err(&err)?
    {
        if remove("ClusterRole", None) {
            gone(
                Api::<ClusterRole>::all(client.clone())
                    .delete(&r.name_any(), &params)
                    .await
                    .map(drop),
            )
            .map_err(&err)?;
        }
    }
    for b in Api::<RoleBinding>::all(client.clone())
        .list(&selector)
        .await
        .map_err(&err)?
    {
        let ns = b.namespace().unwrap_or_default();
        if remove("RoleBinding", Some(&ns)) {
            gone(
                Api::<RoleBinding>::namespaced(client.clone(), &ns)
                    .delete(&b.name_any(), &params)
                    .await
                    .map(drop),
            )
            .map_err(&err)?;
        }
    }
    for r in Api::<Role>::all(client.clone())
        .list(&selector)
        .await
        .map_err(&err)?
    {
        let ns = r.namespace().unwrap_or_default();
        if remove("Role", Some(&ns)) {
            gone(
                Api::<Role>::namespaced(client.clone(), &ns)
                    .delete(&r.name_any(), &params)
                    .await
                    .map(drop),
            )
            .map_err(&err)?;
        }
    }
    if with_account {
        for a in Api::<ServiceAccount>::all(client.clone())
            .list(&selector)
            .await
            .map_err(&err)?
        {
            let ns = a.namespace().unwrap_or_default();
            gone(
                Api::<ServiceAccount>::namespaced(client.clone(), &ns)
                    .delete(&a.name_any(), &params)
                    .await
                    .map(drop),
            )
            .map_err(&err)?;
        }
    }
    Ok(())
}

/// An API error, with what was being done.
fn api_error(what: String) -> impl Fn(kube::Error) -> InstallerError {
    move |source| InstallerError::Api {
        what: what.clone(),
        source: Box::new(source),
    }
}

/// What `olmv1 rbac` prints the installer of.
#[derive(Debug, Clone)]
pub enum RbacFor {
    /// A package to install.
    Package(PackageInstall),
    /// An installed ClusterExtension: upgrading it to what it resolves now (with `version` and
    /// `channels` overriding its own) and uninstalling what it installed.
    Extension {
        /// The ClusterExtension.
        name: String,
        /// Its installer's ServiceAccount (default: the extension's, else `<extension>-installer`).
        service_account: Option<String>,
        /// A version range replacing the extension's.
        version: Option<String>,
        /// Channels replacing the extension's.
        channels: Vec<String>,
    },
    /// How upgrading a ClusterExtension (to `version`, `channels`) changes its installer's
    /// permissions.
    Diff {
        /// The ClusterExtension.
        name: String,
        /// A version range replacing the extension's.
        version: Option<String>,
        /// Channels replacing the extension's.
        channels: Vec<String>,
    },
}

/// A package's ClusterExtension as `olmv1 rbac --package` describes it.
#[derive(Debug, Clone, Default)]
pub struct PackageInstall {
    /// The package.
    pub package: String,
    /// The ClusterExtension's name (default: the package).
    pub name: Option<String>,
    /// The install namespace.
    pub namespace: String,
    /// The installer's ServiceAccount (default: `<extension>-installer`).
    pub service_account: Option<String>,
    /// A version range.
    pub version: Option<String>,
    /// Channels.
    pub channels: Vec<String>,
    /// Only catalogs with these labels.
    pub catalog_labels: BTreeMap<String, String>,
    /// The namespace the operator watches (SingleNamespace/OwnNamespace).
    pub watch_namespace: Option<String>,
}

/// How every installer of `olmv1 rbac` is computed.
#[derive(Debug, Clone)]
pub struct RbacOptions {
    /// See [`Target::allow_escalate`].
    pub allow_escalate: bool,
    /// See [`Target::webhook_provider`].
    pub webhook_provider: WebhookProvider,
    /// The controller's `--operator-conditions`, if known (else as its default decides).
    pub operator_conditions: Option<OperatorConditionsMode>,
    /// The controller's namespace (where it records installed revisions).
    pub system_namespace: String,
}

/// `olmv1 rbac`'s output: the installer's YAML stream, or (`RbacFor::Diff`) how its permissions
/// change.
pub async fn rbac(
    client: &Client,
    what: &RbacFor,
    options: &RbacOptions,
    sources: &CatalogSources,
) -> Result<String, InstallerError> {
    let operator_conditions = cluster::operator_conditions_kept(client, options.operator_conditions).await?;
    let render = RenderOptions {
        webhook_provider: options.webhook_provider,
        operator_conditions,
    };
    match what {
        RbacFor::Package(package) => {
            let name = package.name.clone().unwrap_or_else(|| package.package.clone());
            let service_account = package
                .service_account
                .clone()
                .unwrap_or_else(|| installer_name(&name));
            let ext = package_extension(package, &name, &service_account)?;
            let target = Target {
                extension: &ext,
                installed: None,
                installed_objects: &[],
                service_account: &service_account,
                allow_escalate: options.allow_escalate,
                webhook_provider: options.webhook_provider,
                operator_conditions,
            };
            compute_installer(client, &target, sources).await?.yaml(&name)
        }
        RbacFor::Diff {
            name,
            version,
            channels,
        } => {
            let current = cluster::cluster_extension(client, name).await?;
            let desired = with_overrides(&current, version.as_deref(), channels)?;
            let (installer, change) = upgrade_diff(
                client,
                &current,
                &desired,
                &options.system_namespace,
                options.allow_escalate,
                render,
                sources,
            )
            .await?;
            Ok(format!(
                "# permissions of {} to upgrade ClusterExtension {name:?} to {} {}:\n{change}",
                account_name(&current),
                installer.resolution.bundle.name,
                installer.resolution.bundle.status_version
            ))
        }
        RbacFor::Extension {
            name,
            service_account,
            version,
            channels,
        } => {
            let current = cluster::cluster_extension(client, name).await?;
            let desired = with_overrides(&current, version.as_deref(), channels)?;
            let objects = installed_objects(client, &options.system_namespace, name).await?;
            let service_account = service_account.clone().unwrap_or_else(|| account_name(&current));
            let target = Target {
                extension: &desired,
                installed: cluster::installed_bundle(&current),
                installed_objects: &objects,
                service_account: &service_account,
                allow_escalate: options.allow_escalate,
                webhook_provider: options.webhook_provider,
                operator_conditions,
            };
            compute_installer(client, &target, sources).await?.yaml(name)
        }
    }
}

/// Sets what a command line asks of `spec.source.catalog`: the version range, the channels
/// (when any) and the upgrade constraint policy, each only when given.
pub fn set_catalog_filter(
    catalog: &mut Value,
    version: Option<&str>,
    channels: &[String],
    upgrade_constraint_policy: Option<&str>,
) {
    if let Some(v) = version {
        catalog["version"] = json!(v);
    }
    if !channels.is_empty() {
        catalog["channels"] = json!(channels);
    }
    if let Some(p) = upgrade_constraint_policy {
        catalog["upgradeConstraintPolicy"] = json!(p);
    }
}

/// The ClusterExtension `package` describes, named `name`, installed as `service_account`.
fn package_extension(
    package: &PackageInstall,
    name: &str,
    service_account: &str,
) -> Result<ClusterExtension, InstallerError> {
    let mut catalog = json!({"packageName": package.package});
    set_catalog_filter(&mut catalog, package.version.as_deref(), &package.channels, None);
    if !package.catalog_labels.is_empty() {
        catalog["selector"] = json!({"matchLabels": package.catalog_labels});
    }
    let mut object = json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterExtension",
        "metadata": {"name": name},
        "spec": {"namespace": package.namespace, "serviceAccount": {"name": service_account},
                 "source": {"sourceType": "Catalog", "catalog": catalog}}
    });
    if let Some(ns) = &package.watch_namespace {
        object["spec"]["config"] = json!({"configType": "Inline", "inline": {"watchNamespace": ns}});
    }
    Ok(serde_json::from_value(object)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_package_install_is_the_cluster_extension_the_installer_is_computed_for() {
        let package = PackageInstall {
            package: "argocd".into(),
            namespace: "argocd".into(),
            version: Some("2.x".into()),
            channels: vec!["stable".into()],
            catalog_labels: BTreeMap::from([("tier".into(), "prod".into())]),
            watch_namespace: Some("apps".into()),
            ..PackageInstall::default()
        };
        let ext = package_extension(&package, "cd", "cd-installer").unwrap();
        let catalog = ext.spec.source.catalog.as_ref().unwrap();
        assert_eq!(ext.name_any(), "cd");
        assert_eq!(ext.spec.namespace, "argocd");
        assert_eq!(ext.spec.service_account_name(), Some("cd-installer"));
        assert_eq!(catalog.package_name, "argocd");
        assert_eq!(catalog.version.as_deref(), Some("2.x"));
        assert_eq!(catalog.channels, vec!["stable".to_string()]);
        let value = serde_json::to_value(&ext).unwrap();
        assert_eq!(
            value["spec"]["source"]["catalog"]["selector"],
            json!({"matchLabels": {"tier": "prod"}})
        );
        assert_eq!(
            value["spec"]["config"]["inline"],
            json!({"watchNamespace": "apps"})
        );
    }

    #[test]
    fn overrides_replace_only_what_they_name() {
        let package = PackageInstall {
            package: "argocd".into(),
            namespace: "argocd".into(),
            version: Some("2.x".into()),
            channels: vec!["stable".into()],
            ..PackageInstall::default()
        };
        let ext = package_extension(&package, "cd", "cd-installer").unwrap();
        let same = with_overrides(&ext, None, &[]).unwrap();
        assert_eq!(
            serde_json::to_value(&same).unwrap(),
            serde_json::to_value(&ext).unwrap()
        );
        let moved = with_overrides(&ext, Some("3.0.0"), &["fast".into()]).unwrap();
        let catalog = moved.spec.source.catalog.unwrap();
        assert_eq!(catalog.version.as_deref(), Some("3.0.0"));
        assert_eq!(catalog.channels, vec!["fast".to_string()]);
        assert_eq!(catalog.package_name, "argocd");
    }

    #[test]
    fn an_extension_without_an_account_is_given_its_installer() {
        let package = PackageInstall {
            package: "argocd".into(),
            namespace: "argocd".into(),
            ..PackageInstall::default()
        };
        let mut ext = package_extension(&package, "cd", "mine").unwrap();
        assert_eq!(account_name(&ext), "mine");
        ext.spec.service_account = None;
        assert_eq!(account_name(&ext), installer_name("cd"));
    }
}
