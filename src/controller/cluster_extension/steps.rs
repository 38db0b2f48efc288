//! The reconcile pipeline, one function per step. Steps only read and apply; status is computed
//! from the [`Outcome`] afterwards and written once.

use kube::{Api, ResourceExt, api::ListParams};
use olmv1_api::v1::{
    AvailabilityMode, ClusterCatalog, ClusterExtension, CrdUpgradeSafetyEnforcement,
    conditions::LABEL_CATALOG_NAME,
};
use serde_json::Value;

use super::{Context, StepError};
use crate::{
    apply::{
        objects::{self, Owner},
        preflight::{self, AccessPolicy, ServiceAccountRef},
        revision::InstalledRevision,
    },
    bundle::{registry_v1::RegistryV1Bundle, render},
    catalog::BundleProperty,
    image::cache::pull_to_dir,
    resolve::{self, ConditionData},
};

/// How far a successful reconcile got.
#[derive(Debug)]
pub enum Progress {
    /// Everything is applied and ready.
    Done,
    /// Applied; the named object is still rolling out.
    RollingOut(String),
}

/// What a reconcile found and did; status is computed from it.
#[derive(Debug)]
pub struct Outcome {
    /// The installed revision after this reconcile (the new one when an apply succeeded).
    pub record: Option<InstalledRevision>,
    /// The four deprecation conditions.
    pub deprecation: [ConditionData; 4],
    /// How far the pipeline got.
    pub result: Result<Progress, StepError>,
}

impl Outcome {
    /// The revision installed after this reconcile, if any.
    pub fn installed_bundle(&self) -> Option<&InstalledRevision> {
        self.record.as_ref()
    }
}

/// The bundle a reconcile installs: resolved from catalogs, or the installed one kept when no
/// catalog applies (upstream's fallback).
#[derive(Debug, Clone)]
struct Target {
    bundle_name: String,
    /// The version as status reports it.
    version: String,
    image: String,
    catalog: Option<String>,
    package: String,
    properties: Vec<BundleProperty>,
}

/// Runs every step and says how far it got.
pub async fn run_pipeline(ext: &ClusterExtension, ctx: &Context) -> Outcome {
    let name = ext.name_any();
    let channels = ext
        .spec
        .source
        .catalog
        .as_ref()
        .map(|c| c.channels.clone())
        .unwrap_or_default();

    // Step: read the installed revision.
    let installed = match ctx.revisions.load(&name).await {
        Ok(record) => record,
        Err(e) => {
            return Outcome {
                record: None,
                deprecation: resolve::deprecation_conditions(None, false, &channels, None),
                result: Err(StepError::ReadInstalled(e)),
            };
        }
    };

    // Step: resolve.
    let resolved = resolve_bundle(ext, ctx, installed.as_ref()).await;
    let (target, deprecation) = match resolved {
        Ok(found) => found,
        Err(error) => {
            let installed_name = installed.as_ref().map(|r| r.bundle_name.as_str());
            return Outcome {
                deprecation: resolve::deprecation_conditions(None, false, &channels, installed_name),
                record: installed,
                result: Err(error),
            };
        }
    };

    // Steps: unpack, preflights, apply, wait for readiness.
    let result = install_target(ext, ctx, &target, installed.as_ref()).await;
    let record = match &result {
        Ok((record, _)) => Some(record.clone()),
        Err(_) => installed,
    };
    let installed_name = record.as_ref().map(|r| r.bundle_name.as_str());
    let deprecation = match &deprecation {
        Some(d) => resolve::deprecation_conditions(d.as_ref(), true, &channels, installed_name),
        None => resolve::deprecation_conditions(None, false, &channels, installed_name),
    };
    Outcome {
        record,
        deprecation,
        result: result.map(|(_, progress)| progress),
    }
}

/// The deprecation data of the resolved package: `None` when the catalogs were not consulted
/// (the installed bundle was kept), `Some(None)` when the package has no deprecations.
type ResolvedDeprecation = Option<Option<crate::catalog::Deprecation>>;

/// Step: resolve the bundle to install, with upstream's fallback rules when resolution fails.
async fn resolve_bundle(
    ext: &ClusterExtension,
    ctx: &Context,
    installed: Option<&InstalledRevision>,
) -> Result<(Target, ResolvedDeprecation), StepError> {
    let Some(filter) = ext.spec.source.catalog.as_ref() else {
        return Err(StepError::Resolve {
            message: "catalog is required when sourceType is Catalog, and forbidden otherwise".into(),
            terminal: true,
        });
    };
    let selector =
        resolve::CatalogSelector::new(filter.selector.as_ref()).map_err(|e| StepError::Resolve {
            message: format!("desired catalog selector is invalid: {e}"),
            terminal: true,
        })?;

    let catalogs = Api::<ClusterCatalog>::all(ctx.client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| StepError::Resolve {
            message: format!("error listing catalogs: {e}"),
            terminal: false,
        })?;
    let mut inputs = Vec::with_capacity(catalogs.items.len());
    let mut any_selected = false;
    let mut walk_error = None;
    for catalog in &catalogs.items {
        // catalogd's webhook labels every catalog with its own name; selectors rely on it.
        let mut labels = catalog.labels().clone();
        labels.insert(LABEL_CATALOG_NAME.into(), catalog.name_any());
        // Only selected, available catalogs are read: the others cannot contribute.
        if !selector.matches(&labels) {
            continue;
        }
        any_selected = true;
        if catalog.spec.availability_mode == AvailabilityMode::Unavailable {
            continue;
        }
        match ctx.catalogs.index(catalog).await {
            Ok(index) => inputs.push(resolve::CatalogInput {
                name: catalog.name_any(),
                priority: catalog.spec.priority,
                labels,
                available: true,
                index,
            }),
            Err(e) => {
                // Upstream: any catalog that cannot be read aborts the whole resolution.
                walk_error = Some(format!(
                    "error walking catalogs: error getting package {:?} from catalog {:?}: {e}",
                    filter.package_name,
                    catalog.name_any()
                ));
                break;
            }
        }
    }

    let installed_bundle = installed.map(|r| resolve::InstalledBundle {
        name: r.bundle_name.clone(),
        version: r.bundle_version.clone(),
        release: None,
    });
    let result = match walk_error {
        Some(message) => Err(StepError::Resolve {
            message,
            terminal: false,
        }),
        None => resolve::ResolveRequest::from_cluster_extension(ext, installed_bundle)
            .and_then(|request| resolve::resolve(&request, &inputs))
            .map_err(|e| StepError::Resolve {
                terminal: e.is_terminal(),
                message: e.to_string(),
            }),
    };

    match result {
        Ok(resolution) => Ok((
            Target {
                bundle_name: resolution.bundle.name.clone(),
                version: resolution.bundle.status_version.clone(),
                image: resolution.bundle.image.clone(),
                catalog: Some(resolution.catalog.clone()),
                package: filter.package_name.clone(),
                properties: resolution
                    .bundle
                    .properties
                    .iter()
                    .cloned()
                    .map(BundleProperty::from)
                    .collect(),
            },
            Some(resolution.deprecation.clone()),
        )),
        Err(error) => {
            // Upstream's handleResolutionError: keep the installed bundle only when nothing else
            // is asked for and no catalog matches the selector (catalogs removed).
            let Some(installed) = installed else {
                return Err(error);
            };
            let pinned_elsewhere = filter
                .version
                .as_deref()
                .is_some_and(|v| !v.is_empty() && v != installed.bundle_version);
            if pinned_elsewhere || any_selected {
                return Err(error);
            }
            Ok((
                Target {
                    bundle_name: installed.bundle_name.clone(),
                    version: installed.bundle_version.clone(),
                    image: installed.image.clone(),
                    catalog: installed.catalog.clone(),
                    package: installed.package.clone(),
                    properties: installed.properties.clone(),
                },
                None,
            ))
        }
    }
}

/// Steps: unpack the bundle, render it, run the preflights, apply as the service account,
/// record the revision, prune, and check readiness.
async fn install_target(
    ext: &ClusterExtension,
    ctx: &Context,
    target: &Target,
    installed: Option<&InstalledRevision>,
) -> Result<(InstalledRevision, Progress), StepError> {
    let bundle_err = |bundle: &Target| (bundle.bundle_name.clone(), bundle.version.clone());

    // Step: unpack.
    let pulled = pull_to_dir(&target.image, &ctx.pull).await.map_err(|source| {
        let (bundle, version) = bundle_err(target);
        StepError::Pull {
            bundle,
            version,
            source,
        }
    })?;
    let bundle =
        RegistryV1Bundle::from_dir_within(&pulled.dir, ctx.pull.limits.max_file_bytes).map_err(|source| {
            let (bundle, version) = bundle_err(target);
            StepError::Load {
                bundle,
                version,
                source,
            }
        })?;
    let config = ext
        .spec
        .config
        .as_ref()
        .and_then(|c| c.inline.clone())
        .map(Value::Object);
    let rendered = render::render_with_provider(
        &bundle,
        &ext.spec.namespace,
        config.as_ref(),
        ctx.webhook_provider,
    )
    .map_err(|source| {
        let (bundle, version) = bundle_err(target);
        StepError::Render {
            bundle,
            version,
            source,
        }
    })?;

    // Step: preflights, as the service account's permissions and the cluster's CRDs say. A
    // revision already applied for this image and this generation passed them then; re-applying
    // it (drift repair, resync) does not ask again.
    let namespace = &ext.spec.namespace;
    let account = &ext.spec.service_account.name;
    let already_applied =
        installed.is_some_and(|r| r.image == pulled.digest_ref && r.generation == ext.metadata.generation);
    // Nothing new since the last full apply, and no owned object changed since: no request.
    let fingerprint = apply_fingerprint(ext, &pulled.digest_ref, &rendered);
    if let Some(record) = installed
        && already_applied
        && ctx.last_apply.is_fresh(&ext.name_any(), fingerprint)
    {
        return Ok((record.clone(), Progress::Done));
    }
    let sa_client = ctx.identities.client_for(namespace, account).await?;
    let previous = installed.map(|r| r.objects.as_slice()).unwrap_or_default();
    if !already_applied {
        run_preflights(ext, ctx, &sa_client, &rendered, previous)
            .await
            .map_err(|source| {
                let (bundle, version) = bundle_err(target);
                StepError::Preflight {
                    bundle,
                    version,
                    source,
                }
            })?;
    }

    // Step: apply, record, prune.
    let apply_err = |source| {
        let (bundle, version) = bundle_err(target);
        StepError::Apply {
            bundle,
            version,
            source,
        }
    };
    let owner = Owner {
        name: ext.name_any(),
        uid: ext.uid().unwrap_or_default(),
        install_namespace: namespace.clone(),
    };
    let applied = objects::apply(&sa_client, &owner, &rendered)
        .await
        .map_err(apply_err)?;
    let same_bundle =
        installed.is_some_and(|r| r.bundle_name == target.bundle_name && r.image == pulled.digest_ref);
    // The bundle's own properties (CSV `olm.properties` + `metadata/properties.yaml`, their JSON
    // text intact) come first; the catalog entry adds only the kinds the bundle does not declare.
    let mut properties = bundle.properties.clone();
    for property in &target.properties {
        if !properties.iter().any(|p| p.type_ == property.type_) {
            properties.push(property.clone());
        }
    }
    let record = InstalledRevision {
        revision: match installed {
            Some(r) if same_bundle => r.revision,
            Some(r) => r.revision + 1,
            None => 1,
        },
        package: target.package.clone(),
        bundle_name: target.bundle_name.clone(),
        bundle_version: target.version.clone(),
        image: pulled.digest_ref.clone(),
        catalog: target.catalog.clone(),
        properties,
        objects: applied,
        generation: ext.metadata.generation,
    };
    if installed != Some(&record) {
        ctx.revisions
            .store(&owner.name, &owner.uid, &record)
            .await
            .map_err(StepError::ReadInstalled)?;
    }
    objects::prune(&sa_client, &owner.name, previous, &record.objects)
        .await
        .map_err(apply_err)?;

    // Step: wait for readiness.
    let progress = match objects::rollout_status(&sa_client, &record.objects)
        .await
        .map_err(apply_err)?
    {
        None => Progress::Done,
        Some(waiting) => Progress::RollingOut(waiting),
    };
    if matches!(progress, Progress::Done) {
        ctx.last_apply.remember(&owner.name, fingerprint);
    }
    Ok((record, progress))
}

/// What a full apply depends on: the extension (its uid, generation and service account), the
/// image digest and the rendered manifests.
fn apply_fingerprint(ext: &ClusterExtension, digest_ref: &str, rendered: &[Value]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    ext.uid().hash(&mut hasher);
    ext.metadata.generation.hash(&mut hasher);
    ext.spec.namespace.hash(&mut hasher);
    ext.spec.service_account.name.hash(&mut hasher);
    digest_ref.hash(&mut hasher);
    serde_json::to_string(rendered)
        .unwrap_or_default()
        .hash(&mut hasher);
    hasher.finish()
}

/// The permission preflight, then CRD upgrade safety unless the extension turns it off.
async fn run_preflights(
    ext: &ClusterExtension,
    ctx: &Context,
    sa_client: &kube::Client,
    rendered: &[Value],
    previous: &[crate::apply::revision::ObjectRef],
) -> Result<(), preflight::PreflightError> {
    let account = ServiceAccountRef::new(
        ext.spec.namespace.as_str(),
        ext.spec.service_account.name.as_str(),
    );
    preflight::check_permissions(
        &ctx.client,
        &account,
        rendered,
        previous,
        &AccessPolicy::default(),
        &[preflight::owner_finalizers_access(&ext.name_any())],
    )
    .await?;
    let crd_safety = ext
        .spec
        .install
        .as_ref()
        .and_then(|i| i.preflight.as_ref())
        .map(|p| p.crd_upgrade_safety.enforcement)
        .unwrap_or(CrdUpgradeSafetyEnforcement::Strict);
    if crd_safety == CrdUpgradeSafetyEnforcement::Strict {
        preflight::check_crd_upgrades(sa_client, rendered).await?;
    }
    Ok(())
}
