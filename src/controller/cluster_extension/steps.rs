//! The reconcile pipeline: one function per step, each over the one [`ReconcileState`], in the
//! order docs/controller.md lists them. Steps only read and apply; status is computed from the
//! [`Outcome`] afterwards and written once.

use std::{collections::BTreeMap, time::Duration};

use futures::FutureExt;
use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};

use kube::{Api, Client, ResourceExt, api::ListParams};
use olmv1_api::{
    operator_condition::Upgradeability,
    v1::{
        AvailabilityMode, ClusterCatalog, ClusterExtension, CrdUpgradeSafetyEnforcement,
        conditions::LABEL_CATALOG_NAME,
    },
};
use serde_json::Value;
use tracing::debug;

use super::{
    Context, DependencyMode, Freshness, StepError,
    dependencies::{self, DependencyCheckError},
    drift,
    error::BundleError,
    fallback::{self, AfterResolutionFailure, MatchingCatalogs},
    operator_conditions::{self, Found, HeldUpgrade},
};
use crate::{
    apply::{
        ApplyError,
        identity::Installer,
        objects::{self, Applied, Owner},
        preflight::{self, AccessPolicy},
        revision::{AppliedObject, InstalledRevision, ObjectRef, ReadyMark, RolloutStart},
    },
    bundle::{registry_v1::RegistryV1Bundle, render},
    catalog::{Deprecation, Property},
    dependencies::{CHECK_DURATION, DependencyVerdict, check_dependencies_within, check_meter},
    image::cache::{PulledImage, pull_and_read},
    resolve::{self, CatalogSelector, ConditionData, ResolveError},
};

/// How far a successful reconcile got.
#[derive(Debug)]
pub enum Progress {
    /// Everything is applied and ready.
    Done,
    /// Applied; the named object is still rolling out.
    RollingOut(String),
    /// Applied, and still not rolled out when `spec.progressDeadlineMinutes` ran out.
    DeadlineExceeded {
        /// The deadline, in minutes.
        minutes: i32,
        /// What the rollout still waits for.
        waiting: String,
    },
}

/// What a reconcile found and did; status is computed from it.
#[derive(Debug)]
pub struct Outcome {
    /// The installed revision after this reconcile (the new one once its record is written).
    pub record: Option<InstalledRevision>,
    /// The four deprecation conditions.
    pub deprecation: [ConditionData; 4],
    /// How far the pipeline got.
    pub result: Result<Progress, StepError>,
    /// The upgrade the installed bundle's OperatorCondition holds, if any (the installed bundle
    /// was reconciled instead).
    pub held: Option<HeldUpgrade>,
}

impl Outcome {
    /// The revision installed after this reconcile, if any.
    pub fn installed_bundle(&self) -> Option<&InstalledRevision> {
        self.record.as_ref()
    }
}

/// Runs every step and says how far it got.
pub async fn run_pipeline(ext: &ClusterExtension, ctx: &Context) -> Outcome {
    let mut state = ReconcileState {
        ext,
        ctx,
        installed: None,
        deprecation: None,
        catalogs: Vec::new(),
        held: None,
    };
    ctx.last_apply.begin(&ext.name_any());
    let result = state.run().await;
    state.outcome(result)
}

/// One reconcile: the extension, what every reconcile shares, and what the steps found.
struct ReconcileState<'a> {
    ext: &'a ClusterExtension,
    ctx: &'a Context,
    /// The installed revision: read first, replaced by the new record once it is written.
    installed: Option<InstalledRevision>,
    /// The package's deprecations once the catalogs were consulted (`Some(None)`: it has none);
    /// `None` when they were not (no catalog data).
    deprecation: Option<Option<Deprecation>>,
    /// The ClusterCatalogs listed for resolution (other extensions' bundles are looked up in
    /// them).
    catalogs: Vec<ClusterCatalog>,
    /// The upgrade [`ReconcileState::hold_upgrade`] held.
    held: Option<HeldUpgrade>,
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
    properties: Vec<Property>,
}

impl Target {
    fn resolved(resolution: &resolve::Resolution, package: &str) -> Self {
        Self {
            bundle_name: resolution.bundle.name.clone(),
            version: resolution.bundle.status_version.clone(),
            image: resolution.bundle.image.clone(),
            catalog: Some(resolution.catalog.clone()),
            package: package.to_string(),
            properties: resolution.bundle.properties.clone(),
        }
    }

    fn installed(record: &InstalledRevision) -> Self {
        Self {
            bundle_name: record.bundle_name.clone(),
            version: record.bundle_version.clone(),
            image: record.image.clone(),
            catalog: record.catalog.clone(),
            package: record.package.clone(),
            properties: record.properties.clone(),
        }
    }

    /// An error of a step on this bundle, with upstream's prefix naming it.
    fn error(&self, source: impl Into<BundleError>) -> StepError {
        StepError::Bundle {
            bundle: self.bundle_name.clone(),
            version: self.version.clone(),
            source: Box::new(source.into()),
        }
    }

    /// An apply's error: the bundle's, unless the extension let go of its content meanwhile.
    fn apply_error(&self, source: ApplyError) -> StepError {
        match source {
            ApplyError::LetGo(_) => StepError::LetGo(source),
            other => self.error(other),
        }
    }
}

/// The bundle image, pulled and loaded.
struct Unpacked {
    image: PulledImage,
    bundle: RegistryV1Bundle,
    /// `metadata/dependencies.yaml`, if the image has one (or why it cannot be read).
    dependencies_yaml: Result<Option<String>, String>,
}

impl ReconcileState<'_> {
    /// The steps, in order.
    async fn run(&mut self) -> Result<Progress, StepError> {
        self.read_installed().await?;
        let installer = self.choose_installer()?;
        let catalogs = self.list_catalogs().await;
        let target = self.resolve(catalogs).await?;
        let target = self.hold_upgrade(target, &installer).await?;
        let unpacked = self.unpack(&target).await?;
        self.check_dependencies(&target, &unpacked).await?;
        let rendered = self.render(&target, &unpacked)?;
        let fingerprint = apply_fingerprint(self.ext, &installer, &unpacked.image.digest_ref, &rendered);
        if self.still_in_place(&unpacked, &fingerprint).await {
            return Ok(Progress::Done);
        }
        let installer_client = self.installer_client(&installer).await?;
        if let Some(progress) = self
            .rollout_of_last_apply(&target, &unpacked, &installer_client, &fingerprint)
            .await?
        {
            return Ok(progress);
        }
        self.preflights(&target, &unpacked, &installer, &installer_client, &rendered)
            .await?;
        self.withdraw_dropped_api_services(&target, &installer_client, &rendered)
            .await?;
        let (to_apply, held) = hold_new_api_services(self.previous_objects(), rendered);
        let applied = self.apply(&target, &installer_client, &to_apply).await?;
        let previous_image = self.installed.as_ref().map(|r| r.image.clone());
        let objects = applied.objects.iter().map(|a| a.object.clone()).collect();
        self.record_and_prune(&target, &unpacked, &installer_client, objects, &fingerprint)
            .await?;
        if previous_image.as_deref() != Some(unpacked.image.digest_ref.as_str()) {
            // Installed or upgraded: the bundle image it replaced may be unused now.
            super::remove_unused_bundle_images(self.ctx, Some(&unpacked.image.digest_ref)).await;
        }
        let mut applied = applied;
        if !held.is_empty() {
            match self
                .wait_for_readiness(&target, &installer_client, fingerprint.clone(), None)
                .await?
            {
                Progress::Done => applied.extend(
                    self.publish_api_services(&target, &installer_client, &held)
                        .await?,
                ),
                waiting => return Ok(waiting),
            }
        }
        self.wait_for_readiness(&target, &installer_client, fingerprint, Some(applied))
            .await
    }

    /// What the steps found, with the deprecation conditions of the bundle installed after them.
    fn outcome(self, result: Result<Progress, StepError>) -> Outcome {
        let channels = self
            .ext
            .spec
            .source
            .catalog
            .as_ref()
            .map(|c| c.channels.clone())
            .unwrap_or_default();
        let installed_name = self.installed.as_ref().map(|r| r.bundle_name.as_str());
        let deprecation = match &self.deprecation {
            Some(d) => resolve::deprecation_conditions(d.as_ref(), true, &channels, installed_name),
            None => resolve::deprecation_conditions(None, false, &channels, installed_name),
        };
        Outcome {
            record: self.installed,
            deprecation,
            result,
            held: self.held,
        }
    }

    /// Step: read the installed revision from its record.
    async fn read_installed(&mut self) -> Result<(), StepError> {
        let name = self.ext.name_any();
        self.installed = self
            .ctx
            .revisions
            .load(&name)
            .await
            .map_err(StepError::ReadInstalled)?;
        Ok(())
    }

    /// Step: who writes the extension's content (`--install-identity`). In the default mode an
    /// extension naming no service account stops here: nothing is resolved, pulled or applied,
    /// and what an earlier revision installed keeps running.
    fn choose_installer(&self) -> Result<Installer, StepError> {
        Ok(self.ctx.identities.installer_of(self.ext)?)
    }

    /// Step: the ClusterCatalogs, sorted by name as a list returns them: from the controller's
    /// watch once it has listed them, else listed (right after a start, a test calling the steps
    /// alone, or a watch that cannot list them, e.g. without the CRD). An error is not returned
    /// here: upstream's fallback rules decide what it means once resolution has failed.
    async fn list_catalogs(&self) -> Result<Vec<ClusterCatalog>, kube::Error> {
        if let Some(store) = self.ctx.catalog_store.get()
            && matches!(store.wait_until_ready().now_or_never(), Some(Ok(())))
        {
            let mut catalogs: Vec<ClusterCatalog> = store.state().iter().map(|c| (**c).clone()).collect();
            catalogs.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            return Ok(catalogs);
        }
        let list = Api::<ClusterCatalog>::all(self.ctx.client.clone())
            .list(&ListParams::default())
            .await?;
        Ok(list.items)
    }

    /// Step: resolve the bundle to install from the selected catalogs; when that fails, keep the
    /// installed bundle if upstream's fallback rules say so.
    async fn resolve(
        &mut self,
        listed: Result<Vec<ClusterCatalog>, kube::Error>,
    ) -> Result<Target, StepError> {
        let filter = self
            .ext
            .spec
            .source
            .catalog
            .as_ref()
            .ok_or(ResolveError::NoCatalogSource)?;
        let selector =
            CatalogSelector::new(filter.selector.as_ref()).map_err(ResolveError::InvalidSelector)?;
        let matching = MatchingCatalogs::of_list(&listed, |c| selector.matches(&catalog_labels(c)));
        let resolved = match listed {
            Ok(catalogs) => {
                let resolved = self
                    .resolve_from(&selector, &filter.package_name, &catalogs)
                    .await;
                self.catalogs = catalogs;
                resolved
            }
            Err(e) => Err(StepError::ListCatalogs(e)),
        };
        let error = match resolved {
            Ok(target) => return Ok(target),
            Err(error) => error,
        };
        let installed = self.installed.as_ref();
        let decision = fallback::after_resolution_failure(
            installed.map(|r| r.bundle_version.as_str()),
            filter.version.as_deref(),
            matching,
        );
        match (decision, installed) {
            (AfterResolutionFailure::KeepInstalled, Some(record)) => Ok(Target::installed(record)),
            _ => Err(error),
        }
    }

    /// Reads every selected, available catalog (any that cannot be read stops resolution, as
    /// upstream) and resolves the bundle from them.
    async fn resolve_from(
        &mut self,
        selector: &CatalogSelector,
        package: &str,
        catalogs: &[ClusterCatalog],
    ) -> Result<Target, StepError> {
        let mut inputs = Vec::with_capacity(catalogs.len());
        for catalog in catalogs {
            let labels = catalog_labels(catalog);
            // Only selected, available catalogs are read: the others cannot contribute.
            if !selector.matches(&labels) || catalog.spec.availability_mode == AvailabilityMode::Unavailable {
                continue;
            }
            let index = self
                .ctx
                .catalogs
                .index(catalog)
                .await
                .map_err(|source| StepError::ReadCatalog {
                    package: package.to_string(),
                    catalog: catalog.name_any(),
                    source: Box::new(source),
                })?;
            inputs.push(resolve::CatalogInput {
                name: catalog.name_any(),
                priority: catalog.spec.priority,
                labels,
                available: true,
                index,
            });
        }
        let installed = self.installed.as_ref().map(|r| resolve::InstalledBundle {
            name: r.bundle_name.clone(),
            version: r.bundle_version.clone(),
            release: None,
        });
        let request = resolve::ResolveRequest::from_cluster_extension(self.ext, installed)?;
        // With `check`, the dependency step checks them once the bundle is unpacked.
        let resolution = self.ctx.dependencies.resolve(&request, &inputs)?;
        self.deprecation = Some(resolution.deprecation.clone());
        Ok(Target::resolved(&resolution, package))
    }

    /// Step (with `--operator-conditions`): the installed bundle's OperatorCondition, its status
    /// mirrored, decides whether `target`, another bundle, may replace it; while it is not
    /// upgradeable the installed bundle is reconciled instead and the hold reported.
    async fn hold_upgrade(&mut self, target: Target, installer: &Installer) -> Result<Target, StepError> {
        let (Some(conditions), Some(installed)) = (&self.ctx.operator_conditions, &self.installed) else {
            return Ok(target);
        };
        let (namespace, name) = (&self.ext.spec.namespace, &installed.bundle_name);
        let upgrading = target.bundle_name != *name;
        let oc = match conditions.get(namespace, name, &self.ext.name_any()).await {
            Some(Found::Present(oc)) => oc,
            Some(Found::Absent) => return Ok(target),
            None if upgrading => return Err(StepError::OperatorConditionsNotListed),
            None => return Ok(target),
        };
        if oc.mirrored_status("").is_some() {
            let client = self.installer_client(installer).await?;
            operator_conditions::mirror_status(&client, &oc).await;
        }
        let Upgradeability::Held(hold) = oc.upgradeability() else {
            return Ok(target);
        };
        if !upgrading {
            return Ok(target);
        }
        self.held = Some(HeldUpgrade {
            bundle: target.bundle_name.clone(),
            version: target.version.clone(),
            condition: format!("{namespace}/{name}"),
            hold,
        });
        Ok(Target::installed(installed))
    }

    /// Step: pull the bundle image into the digest-keyed cache and load it as registry+v1.
    /// Everything later steps read of the image is read here, checked against the cache entry's
    /// digest afterwards.
    async fn unpack(&self, target: &Target) -> Result<Unpacked, StepError> {
        let max_file_bytes = self.ctx.pull.limits.max_file_bytes;
        let (image, (bundle, dependencies_yaml)) = pull_and_read(&target.image, &self.ctx.pull, |dir| {
            (
                RegistryV1Bundle::from_dir_within(dir, max_file_bytes),
                read_dependencies_yaml(dir, max_file_bytes),
            )
        })
        .await
        .map_err(|e| target.error(e))?;
        let bundle = bundle.map_err(|e| target.error(e))?;
        Ok(Unpacked {
            image,
            bundle,
            dependencies_yaml,
        })
    }

    /// Step (`--dependencies=check`): a bundle new to this extension installs only when every
    /// requirement it declares is satisfied by a bundle another extension installed (one naming
    /// an API also by the cluster serving it), and an upgrade only when every installed
    /// dependent's requirement stays satisfied. The bundle already installed is not checked again.
    async fn check_dependencies(&self, target: &Target, unpacked: &Unpacked) -> Result<(), StepError> {
        let upgrading_from = match &self.installed {
            Some(record) if record.bundle_name == target.bundle_name => return Ok(()),
            installed => installed.as_ref(),
        };
        if self.ctx.dependencies == DependencyMode::Refuse {
            return Ok(());
        }
        let fail = |e: DependencyCheckError| target.error(e);
        // One meter for the whole check, reading the requirements included; on blocking threads,
        // so the reconcile workers go on meanwhile.
        let bundle = target.bundle_name.clone();
        let catalog_properties = target.properties.clone();
        let image_properties = unpacked.bundle.properties.clone();
        let dependencies_yaml = unpacked.dependencies_yaml.clone();
        let (requirements, meter) = tokio::task::spawn_blocking(move || {
            let mut meter = check_meter();
            let requirements = requirements_of_target(
                &bundle,
                &catalog_properties,
                dependencies_yaml,
                &image_properties,
                &mut meter,
            );
            (requirements, meter)
        })
        .await
        .map_err(|e| fail(DependencyCheckError::Panicked(e.to_string())))?;
        let requirements = requirements.map_err(|e| fail(e.into()))?;
        if requirements.is_empty() && upgrading_from.is_none() {
            return Ok(());
        }
        let others = self.installed_elsewhere().await.map_err(fail)?;
        let served = self.served_apis().await.map_err(fail)?;
        let upgrade = match upgrading_from {
            Some(record) => {
                let from_catalog = self.catalog_properties(record).await;
                let before =
                    dependencies::installed_extension(&self.ext.name_any(), record, from_catalog.as_deref());
                let after = dependencies::union(&unpacked.bundle.properties, &target.properties);
                Some((before, target.bundle_name.clone(), after))
            }
            None => None,
        };
        let command = dependencies::install_command(self.ext);
        let bundle = target.bundle_name.clone();
        let verdict = tokio::task::spawn_blocking(move || {
            // The API server's answers above are not the check's time.
            let mut meter = meter.with_deadline(CHECK_DURATION);
            check_dependencies_within(&requirements, &others, &served, upgrade, &mut meter)
        })
        .await
        .map_err(|e| fail(DependencyCheckError::Panicked(e.to_string())))?
        .map_err(|exhausted| fail(DependencyCheckError::OverBudget { bundle, exhausted }))?;
        match verdict {
            DependencyVerdict::Satisfied => Ok(()),
            DependencyVerdict::Unsatisfied(unsatisfied) => {
                Err(fail(DependencyCheckError::Unsatisfied { unsatisfied, command }))
            }
            DependencyVerdict::BreaksDependents { installed, broken } => {
                Err(fail(DependencyCheckError::BreaksDependents { installed, broken }))
            }
        }
    }

    /// The bundles the other ClusterExtensions (not being deleted) installed: each one's revision
    /// record, with the properties its catalog entry adds when the catalog still serves it.
    async fn installed_elsewhere(
        &self,
    ) -> Result<Vec<crate::dependencies::InstalledExtension>, DependencyCheckError> {
        let own = self.ext.name_any();
        let live: std::collections::BTreeSet<String> = Api::<ClusterExtension>::all(self.ctx.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(DependencyCheckError::ListExtensions)?
            .items
            .iter()
            .filter(|e| e.metadata.deletion_timestamp.is_none())
            .map(ResourceExt::name_any)
            .filter(|name| *name != own)
            .collect();
        let records = self
            .ctx
            .revisions
            .installed()
            .await
            .map_err(DependencyCheckError::ReadRecords)?;
        let mut others = Vec::new();
        for (name, record) in records {
            if !live.contains(&name) {
                continue;
            }
            let from_catalog = self.catalog_properties(&record).await;
            others.push(dependencies::installed_extension(
                &name,
                &record,
                from_catalog.as_deref(),
            ));
        }
        Ok(others)
    }

    /// The properties the catalog a record names lists for its bundle, when that catalog is
    /// still listed and readable (a record alone still says what the bundle provides).
    async fn catalog_properties(&self, record: &InstalledRevision) -> Option<Vec<Property>> {
        let name = record.catalog.as_deref()?;
        let catalog = self.catalogs.iter().find(|c| c.name_any() == name)?;
        let index = match self.ctx.catalogs.index(catalog).await {
            Ok(index) => index,
            Err(e) => {
                debug!(catalog = name, error = %e, "catalog unreadable; the revision record's properties are used alone");
                return None;
            }
        };
        dependencies::catalog_entry_properties(&index, record).map(<[Property]>::to_vec)
    }

    /// The group/version/kinds the API server serves.
    async fn served_apis(&self) -> Result<Vec<crate::dependencies::Gvk>, DependencyCheckError> {
        let discovery = self
            .ctx
            .lookups
            .discovery(&self.ctx.client)
            .await
            .map_err(DependencyCheckError::Discovery)?;
        Ok(dependencies::served_apis(&discovery))
    }

    /// Step: render with `spec.namespace` and `spec.config.inline`.
    fn render(&self, target: &Target, unpacked: &Unpacked) -> Result<Vec<Value>, StepError> {
        let ext = self.ext;
        let config = ext
            .spec
            .config
            .as_ref()
            .and_then(|c| c.inline.clone())
            .map(Value::Object);
        let options = render::RenderOptions {
            webhook_provider: self.ctx.webhook_provider,
            operator_conditions: self.ctx.operator_conditions.is_some(),
        };
        render::render_with_options(&unpacked.bundle, &ext.spec.namespace, config.as_ref(), options)
            .map_err(|e| target.error(e))
    }

    /// Whether this image was applied for this generation and the same full apply ended ready,
    /// with nothing watched changed since: then nothing needs applying. Known from memory, or,
    /// the first time since the process started, from the revision record's ready mark and a
    /// read of the CRDs and Deployments it names (a restart re-verifies without writing).
    async fn still_in_place(&self, unpacked: &Unpacked, fingerprint: &str) -> bool {
        if !self.already_applied(unpacked) {
            return false;
        }
        let name = self.ext.name_any();
        match self.ctx.last_apply.freshness(&name, fingerprint) {
            Freshness::Fresh => true,
            Freshness::Stale => false,
            Freshness::FirstSinceStart => {
                let Some(mark) = self.installed.as_ref().and_then(|r| r.ready.as_ref()) else {
                    return false;
                };
                if mark.fingerprint != fingerprint {
                    return false;
                }
                match objects::still_ready(&self.ctx.client, &mark.watched).await {
                    // Trusted only if no watch reported a change meanwhile.
                    Ok(true) => self
                        .ctx
                        .last_apply
                        .remember(&name, fingerprint, mark.watched.clone())
                        .is_ok(),
                    Ok(false) => false,
                    Err(e) => {
                        debug!(extension = %name, error = %e, "re-verifying the last ready apply failed; applying in full");
                        false
                    }
                }
            }
        }
    }

    /// Whether the installed revision is this image applied for this generation.
    fn already_applied(&self, unpacked: &Unpacked) -> bool {
        self.installed.as_ref().is_some_and(|r| {
            r.image == unpacked.image.digest_ref && r.generation == self.ext.metadata.generation
        })
    }

    /// Step: a client acting as the installer.
    async fn installer_client(&self, installer: &Installer) -> Result<Client, StepError> {
        Ok(self.ctx.identities.client_for(installer).await?)
    }

    /// Step: the permission preflight of the installer's account, then CRD upgrade safety
    /// unless the extension turns it off. A revision already applied for this image and this
    /// generation passed them then; re-applying it (drift repair, resync) does not ask again.
    async fn preflights(
        &self,
        target: &Target,
        unpacked: &Unpacked,
        installer: &Installer,
        installer_client: &Client,
        rendered: &[Value],
    ) -> Result<(), StepError> {
        if self.already_applied(unpacked) {
            return Ok(());
        }
        let ext = self.ext;
        if let Some(account) = installer.reviewed_account() {
            preflight::check_permissions(
                &self.ctx.client,
                &self.ctx.lookups,
                account,
                rendered,
                self.previous_objects(),
                &AccessPolicy::default(),
                &[preflight::owner_finalizers_access(&ext.name_any())],
            )
            .await
            .map_err(|e| target.error(e))?;
        }
        let crd_safety = ext
            .spec
            .install
            .as_ref()
            .and_then(|i| i.preflight.as_ref())
            .map(|p| p.crd_upgrade_safety.enforcement)
            .unwrap_or(CrdUpgradeSafetyEnforcement::Strict);
        if crd_safety == CrdUpgradeSafetyEnforcement::Strict {
            preflight::check_crd_upgrades(installer_client, rendered)
                .await
                .map_err(|e| target.error(e))?;
        }
        Ok(())
    }

    /// Step: an upgrade that drops an owned APIService deletes it before anything is applied: the
    /// new Deployment may no longer serve it, and an APIService left without its server breaks
    /// discovery for every client (the prune after the apply would come too late).
    async fn withdraw_dropped_api_services(
        &self,
        target: &Target,
        installer_client: &Client,
        rendered: &[Value],
    ) -> Result<(), StepError> {
        let dropped = dropped_api_services(self.previous_objects(), rendered);
        if dropped.is_empty() {
            return Ok(());
        }
        self.still_held()?;
        objects::delete_all(installer_client, &self.ext.name_any(), &dropped)
            .await
            .map_err(|e| target.error(e))
    }

    /// Step: apply as the installer (CRDs first, objects owned by others refused).
    async fn apply(
        &self,
        target: &Target,
        installer_client: &Client,
        rendered: &[Value],
    ) -> Result<Applied, StepError> {
        objects::apply(installer_client, &self.ctx.lookups, &self.owner(), rendered)
            .await
            .map_err(|e| target.apply_error(e))
    }

    /// Step (only once everything else is rolled out): apply the APIServices new to this
    /// extension and record them; readiness then waits for them to be Available. An APIService
    /// applied before its server runs would be unavailable meanwhile, failing discovery for every
    /// client.
    async fn publish_api_services(
        &mut self,
        target: &Target,
        installer_client: &Client,
        held: &[Value],
    ) -> Result<Applied, StepError> {
        let applied = objects::apply(installer_client, &self.ctx.lookups, &self.owner(), held)
            .await
            .map_err(|e| target.apply_error(e))?;
        if let Some(record) = self.installed.clone() {
            let mut recorded = record.objects.clone();
            recorded.extend(
                applied
                    .objects
                    .iter()
                    .map(|a| &a.object)
                    .filter(|o| !record.objects.contains(o))
                    .cloned(),
            );
            self.store(InstalledRevision {
                objects: recorded,
                ..record
            })
            .await?;
        }
        Ok(applied)
    }

    /// Step: write the revision record, prune what the previous revision had and this one lacks,
    /// then write the record again without them. Until the prune succeeds the objects it deletes
    /// stay in the record, so a failed prune (or a crash) never loses track of them.
    async fn record_and_prune(
        &mut self,
        target: &Target,
        unpacked: &Unpacked,
        installer_client: &Client,
        applied: Vec<ObjectRef>,
        fingerprint: &str,
    ) -> Result<(), StepError> {
        let previous = self.previous_objects().to_vec();
        let record = new_record(
            self.installed.as_ref(),
            target,
            unpacked,
            self.ext.metadata.generation,
            applied,
            fingerprint,
        );
        let tracked = InstalledRevision {
            objects: tracked_until_pruned(&record.objects, &previous),
            ..record.clone()
        };
        self.store(tracked).await?;
        self.still_held()?;
        let owner = self.ext.name_any();
        objects::prune(installer_client, &owner, &previous, &record.objects)
            .await
            .map_err(|e| target.error(e))?;
        self.store(record).await
    }

    /// Writes `record` unless it is what is recorded already; it is then the installed revision.
    async fn store(&mut self, record: InstalledRevision) -> Result<(), StepError> {
        if self.installed.as_ref() != Some(&record) {
            self.still_held()?;
            let owner = self.owner();
            self.ctx
                .revisions
                .store(&owner.name, &owner.uid, &record)
                .await
                .map_err(StepError::WriteRecord)?;
        }
        self.installed = Some(record);
        Ok(())
    }

    /// Step: wait for readiness (CRDs Established, Deployments rolled out, APIServices
    /// Available). A full apply (`applied`: everything applied; `None` while APIServices are held
    /// back) that ends ready is remembered, so that the next reconcile with nothing new makes no
    /// request, and marked in the revision record (written only when the mark changes), so that a
    /// restarted controller can check it with reads instead of applying again, and the drift check
    /// can compare the objects of unwatched kinds with what `applied` left. Content never ready
    /// yet that waits past `spec.progressDeadlineMinutes` is reported as stuck.
    async fn wait_for_readiness(
        &mut self,
        target: &Target,
        installer_client: &Client,
        fingerprint: String,
        applied: Option<Applied>,
    ) -> Result<Progress, StepError> {
        let rollout = objects::rollout_status(installer_client, self.previous_objects())
            .await
            .map_err(|e| target.error(e))?;
        let just_applied = applied.is_some();
        self.readiness(rollout, fingerprint, applied, just_applied).await
    }

    /// Step: the full apply of this content that an earlier reconcile made still rolls out, the
    /// revision record is the one it wrote (this image, this generation, the same CRDs,
    /// Deployments and APIServices), and what readiness reads now is as that apply left it (same
    /// uids, same spec generations): readiness is all this reconcile checks, nothing is applied
    /// until the content is ready ([`Self::unwatched_as_applied`]). `None`: apply in full (no
    /// such apply, something replaced or changed since, or readiness could not be read); what
    /// was remembered is then forgotten.
    async fn rollout_of_last_apply(
        &mut self,
        target: &Target,
        unpacked: &Unpacked,
        installer_client: &Client,
        fingerprint: &str,
    ) -> Result<Option<Progress>, StepError> {
        let name = self.ext.name_any();
        let waiting = self
            .ctx
            .last_apply
            .waiting_apply(&name, fingerprint)
            .filter(|waiting| {
                let mut recorded: Vec<&ObjectRef> = self
                    .previous_objects()
                    .iter()
                    .filter(|o| objects::is_readiness_kind(o))
                    .collect();
                let mut left: Vec<&ObjectRef> = waiting.applied.states.iter().map(|s| &s.object).collect();
                recorded.sort();
                left.sort();
                self.already_applied(unpacked) && recorded == left
            });
        let Some(waiting) = waiting else {
            self.ctx.last_apply.forget_waiting(&name);
            return Ok(None);
        };
        let rollout = match objects::rollout_status(installer_client, self.previous_objects()).await {
            Ok(rollout) => rollout,
            Err(e) => {
                debug!(extension = %name, error = %target.error(e), "readiness of the last apply not read; applying in full");
                return Ok(None);
            }
        };
        let mut read = rollout.watched.iter().chain(&rollout.waiting_state);
        if !read.all(|state| waiting.applied.states.contains(state))
            || (rollout.waiting.is_none()
                && !self
                    .unwatched_as_applied(installer_client, &waiting.applied)
                    .await)
        {
            self.ctx.last_apply.forget_waiting(&name);
            return Ok(None);
        }
        // Not applied now: the trust keeps counting from when it was.
        self.readiness(rollout, fingerprint.to_string(), Some(waiting.applied), false)
            .await
            .map(Some)
    }

    /// Whether each object of a kind no watch follows (all but CRDs and Deployments) is as
    /// `applied` left it, read now as the installer: the ready mark keeps their resourceVersions
    /// for the drift check. Others write some of them while a rollout goes on (an APIService's
    /// status once its server runs, cert-manager's status of an Issuer, an injected CA bundle):
    /// content ready after such a write is applied in full once more, so that the mark holds
    /// what the cluster has, and the drift check does not take that write for drift later.
    async fn unwatched_as_applied(&self, installer_client: &Client, applied: &Applied) -> bool {
        let unwatched: Vec<AppliedObject> = applied
            .objects
            .iter()
            .filter(|a| !objects::is_watched_kind(&a.object))
            .cloned()
            .collect();
        let refs: Vec<ObjectRef> = unwatched.iter().map(|a| a.object.clone()).collect();
        let found = match objects::read_applied(installer_client, &self.ctx.lookups, &refs).await {
            Ok(found) => refs.into_iter().zip(found).collect::<BTreeMap<_, _>>(),
            Err(e) => {
                debug!(extension = %self.ext.name_any(), error = %e, "the applied objects not read; applying in full");
                return false;
            }
        };
        match drift::drifted(&unwatched, |o| found.get(o).cloned()) {
            None => true,
            Some((object, how)) => {
                debug!(extension = %self.ext.name_any(), object = %objects::describe(object), how, "changed since the apply while it rolled out; applying in full");
                false
            }
        }
    }

    /// What `rollout` says of the content of `fingerprint`: still rolling out (a full apply
    /// made now, `applied` with `just_applied`, is remembered as waiting), stuck, or ready (see
    /// [`Self::wait_for_readiness`]).
    async fn readiness(
        &mut self,
        rollout: objects::Rollout,
        fingerprint: String,
        applied: Option<Applied>,
        just_applied: bool,
    ) -> Result<Progress, StepError> {
        if let Some(waiting) = rollout.waiting {
            if just_applied && let Some(applied) = applied {
                self.ctx
                    .last_apply
                    .applied_waiting(&self.ext.name_any(), &fingerprint, applied);
            }
            let started = self
                .installed
                .as_ref()
                .and_then(|r| r.rollout.as_ref())
                .map(|r| r.started_at.0);
            let deadline = self.ext.spec.progress_deadline_minutes;
            return Ok(rollout_progress(
                waiting,
                deadline,
                self.ctx.progress_deadline_unit,
                started,
                Timestamp::now(),
            ));
        }
        let Some(applied) = applied else {
            // Ready so far, with APIServices still to apply: nothing is remembered as done.
            return Ok(Progress::Done);
        };
        if let Err(reported) =
            self.ctx
                .last_apply
                .remember(&self.ext.name_any(), &fingerprint, rollout.watched.clone())
        {
            debug!(extension = %self.ext.name_any(), %reported, "an owned object changed while readiness was read; the next reconcile applies in full");
        }
        if let Some(record) = self.installed.clone() {
            let ready = Some(ReadyMark {
                fingerprint,
                watched: rollout.watched,
                applied: applied
                    .objects
                    .into_iter()
                    .filter(|a| !objects::is_watched_kind(&a.object))
                    .collect(),
            });
            let rollout = None;
            self.store(InstalledRevision {
                ready,
                rollout,
                ..record
            })
            .await?;
        }
        Ok(Progress::Done)
    }

    /// The objects the installed revision recorded.
    fn previous_objects(&self) -> &[ObjectRef] {
        self.installed
            .as_ref()
            .map(|r| r.objects.as_slice())
            .unwrap_or_default()
    }

    fn owner(&self) -> Owner {
        Owner {
            name: self.ext.name_any(),
            uid: self.ext.uid().unwrap_or_default(),
            install_namespace: self.ext.spec.namespace.clone(),
            holding: self.ctx.holding(self.ext),
        }
    }

    /// Before a write other than an apply (a delete, the revision record): stops when the
    /// extension was deleted or released meanwhile.
    fn still_held(&self) -> Result<(), StepError> {
        self.ctx
            .holding(self.ext)
            .check(&self.ext.name_any())
            .map_err(StepError::LetGo)
    }
}

/// A catalog's labels, with the name label catalogd's webhook puts on every catalog (selectors
/// rely on it).
fn catalog_labels(catalog: &ClusterCatalog) -> BTreeMap<String, String> {
    let mut labels = catalog.labels().clone();
    labels.insert(LABEL_CATALOG_NAME.into(), catalog.name_any());
    labels
}

/// How far a rollout still waiting for `waiting` got: stuck once the content it waits for
/// (first applied at `started`, `None` when it was ready once) has waited `deadline_minutes`
/// units of `unit` (a minute, but for tests).
fn rollout_progress(
    waiting: String,
    deadline_minutes: Option<i32>,
    unit: Duration,
    started: Option<Timestamp>,
    now: Timestamp,
) -> Progress {
    let (Some(minutes), Some(started)) = (deadline_minutes.filter(|m| *m > 0), started) else {
        return Progress::RollingOut(waiting);
    };
    let deadline = unit.saturating_mul(minutes as u32);
    let waited = now.duration_since(started);
    if waited.is_positive() && waited.unsigned_abs() >= deadline {
        Progress::DeadlineExceeded { minutes, waiting }
    } else {
        Progress::RollingOut(waiting)
    }
}

/// The record of `target` applied as `applied`: the same revision number when the same bundle
/// and image are re-applied, the next one otherwise. Content applied with `fingerprint` that was
/// never ready keeps the time it was first applied (the progress deadline counts from it).
fn new_record(
    installed: Option<&InstalledRevision>,
    target: &Target,
    unpacked: &Unpacked,
    generation: Option<i64>,
    applied: Vec<ObjectRef>,
    fingerprint: &str,
) -> InstalledRevision {
    let image = &unpacked.image.digest_ref;
    let revision = match installed {
        Some(r) if r.bundle_name == target.bundle_name && &r.image == image => r.revision,
        Some(r) => r.revision + 1,
        None => 1,
    };
    InstalledRevision {
        revision,
        package: target.package.clone(),
        bundle_name: target.bundle_name.clone(),
        bundle_version: target.version.clone(),
        image: image.clone(),
        catalog: target.catalog.clone(),
        properties: merged_properties(&unpacked.bundle.properties, &target.properties),
        objects: applied,
        generation,
        // Kept until readiness replaces it: a mark names the fingerprint it was made for, so a
        // mark of other content is never taken for this one.
        ready: installed.and_then(|r| r.ready.clone()),
        rollout: rollout_start(installed, fingerprint),
    }
}

/// When the content of `fingerprint` was first applied, unless it was ready once.
fn rollout_start(installed: Option<&InstalledRevision>, fingerprint: &str) -> Option<RolloutStart> {
    let installed_ready = installed
        .and_then(|r| r.ready.as_ref())
        .is_some_and(|mark| mark.fingerprint == fingerprint);
    if installed_ready {
        return None;
    }
    match installed.and_then(|r| r.rollout.as_ref()) {
        Some(start) if start.fingerprint == fingerprint => Some(start.clone()),
        _ => Some(RolloutStart {
            fingerprint: fingerprint.to_string(),
            started_at: Time(Timestamp::now()),
        }),
    }
}

/// The bundle's own properties (CSV `olm.properties` + `metadata/properties.yaml`, their JSON
/// text intact) first; the catalog entry adds only the kinds the bundle does not declare.
fn merged_properties(bundle: &[Property], catalog: &[Property]) -> Vec<Property> {
    let mut properties = bundle.to_vec();
    for property in catalog {
        if !properties.iter().any(|p| p.type_ == property.type_) {
            properties.push(property.clone());
        }
    }
    properties
}

/// The text of the bundle image's `metadata/dependencies.yaml`, if it has one (read confined to
/// the image and bounded, as every file of it).
fn read_dependencies_yaml(dir: &std::path::Path, max_file_bytes: u64) -> Result<Option<String>, String> {
    let root = crate::confined::ConfinedDir::open(dir).map_err(|e| e.to_string())?;
    match root.read_file(std::path::Path::new("metadata/dependencies.yaml"), max_file_bytes) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| "not UTF-8 text".to_string()),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// `rendered` split into what is applied now and the APIServices `previous` does not have yet,
/// which wait until everything else is rolled out.
fn hold_new_api_services(previous: &[ObjectRef], rendered: Vec<Value>) -> (Vec<Value>, Vec<Value>) {
    let installed: std::collections::BTreeSet<&str> = previous
        .iter()
        .filter(|o| is_api_service(&o.api_version, &o.kind))
        .map(|o| o.name.as_str())
        .collect();
    rendered.into_iter().partition(|o| {
        !is_api_service(
            o["apiVersion"].as_str().unwrap_or_default(),
            o["kind"].as_str().unwrap_or_default(),
        ) || installed.contains(o["metadata"]["name"].as_str().unwrap_or_default())
    })
}

fn is_api_service(api_version: &str, kind: &str) -> bool {
    kind == "APIService" && api_version.starts_with("apiregistration.k8s.io/")
}

/// The APIServices of `previous` that `rendered` no longer has.
fn dropped_api_services(previous: &[ObjectRef], rendered: &[Value]) -> Vec<ObjectRef> {
    let kept: std::collections::BTreeSet<&str> = rendered
        .iter()
        .filter(|o| {
            is_api_service(
                o["apiVersion"].as_str().unwrap_or_default(),
                o["kind"].as_str().unwrap_or_default(),
            )
        })
        .filter_map(|o| o["metadata"]["name"].as_str())
        .collect();
    previous
        .iter()
        .filter(|o| is_api_service(&o.api_version, &o.kind) && !kept.contains(o.name.as_str()))
        .cloned()
        .collect()
}

/// What a record lists while a prune is pending: everything applied, then what the previous
/// revision had and this one lacks (still to be deleted).
fn tracked_until_pruned(applied: &[ObjectRef], previous: &[ObjectRef]) -> Vec<ObjectRef> {
    let mut tracked = applied.to_vec();
    tracked.extend(previous.iter().filter(|o| !applied.contains(o)).cloned());
    tracked
}

/// What a full apply depends on: the extension (its uid and generation), its installer, the
/// image digest and the rendered manifests, as SHA-256 in hex (stable across processes and
/// builds: revision records keep it).
fn apply_fingerprint(
    ext: &ClusterExtension,
    installer: &Installer,
    digest_ref: &str,
    rendered: &[Value],
) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    let generation = ext.metadata.generation.unwrap_or_default().to_string();
    let rendered = serde_json::to_string(rendered).unwrap_or_default();
    for part in [
        ext.uid().unwrap_or_default().as_str(),
        &generation,
        &ext.spec.namespace,
        installer.fingerprint_part(),
        digest_ref,
        &rendered,
    ] {
        // Length-prefixed, so that parts cannot run into each other.
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hex::encode(hasher.finalize())
}

/// A bundle's requirements: its catalog entry's (`catalog_properties`), then those only its image
/// declares (`metadata/dependencies.yaml`, `metadata/properties.yaml`, the CSV's
/// `olm.properties`: `image_properties`), read within `meter`.
fn requirements_of_target(
    bundle: &str,
    catalog_properties: &[Property],
    dependencies_yaml: Result<Option<String>, String>,
    image_properties: &[Property],
    meter: &mut crate::meter::Meter,
) -> Result<Vec<crate::dependencies::Requirement>, crate::dependencies::DependencyError> {
    use crate::dependencies::{requirements_from_bundle_metadata, requirements_of};
    let mut requirements = requirements_of(bundle, catalog_properties, meter)?;
    let dependencies_yaml =
        dependencies_yaml.map_err(|message| crate::dependencies::DependencyError::File {
            bundle: bundle.to_string(),
            file: "metadata/dependencies.yaml".into(),
            message,
        })?;
    let mut from_image =
        requirements_from_bundle_metadata(bundle, dependencies_yaml.as_deref(), None, meter)?;
    from_image.extend(requirements_of(bundle, image_properties, meter)?);
    let key =
        |r: &crate::dependencies::Requirement| (r.property.clone(), r.to_string(), r.failure_message.clone());
    let mut seen: std::collections::BTreeSet<_> = requirements.iter().map(key).collect();
    for requirement in from_image {
        if seen.insert(key(&requirement)) {
            requirements.push(requirement);
        }
    }
    Ok(requirements)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(kind: &str, name: &str) -> ObjectRef {
        ObjectRef {
            api_version: "v1".into(),
            kind: kind.into(),
            namespace: Some("ns".into()),
            name: name.into(),
        }
    }

    #[test]
    fn an_upgrade_withdraws_the_api_services_it_no_longer_renders_and_nothing_else() {
        let api_service = |name: &str| ObjectRef {
            api_version: "apiregistration.k8s.io/v1".into(),
            kind: "APIService".into(),
            namespace: None,
            name: name.into(),
        };
        let previous = [
            api_service("v1alpha1.example.com"),
            api_service("v1.example.com"),
            object("Deployment", "server"),
        ];
        let rendered = [
            serde_json::json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": {"name": "v1.example.com"}}),
            // Same name, another kind: not the APIService.
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "v1alpha1.example.com"}}),
        ];
        assert_eq!(
            dropped_api_services(&previous, &rendered),
            vec![api_service("v1alpha1.example.com")]
        );
        assert!(
            dropped_api_services(&previous[2..], &[]).is_empty(),
            "a dropped Deployment is the prune's"
        );
    }

    #[test]
    fn api_services_new_to_the_extension_wait_and_installed_ones_are_applied_with_the_rest() {
        let api_service = |name: &str| {
            serde_json::json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": {"name": name}})
        };
        let deployment = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "server"}});
        let previous = [ObjectRef {
            api_version: "apiregistration.k8s.io/v1".into(),
            kind: "APIService".into(),
            namespace: None,
            name: "v1alpha1.example.com".into(),
        }];
        let rendered = vec![
            deployment.clone(),
            api_service("v1alpha1.example.com"),
            api_service("v1.example.com"),
        ];
        let (now, held) = hold_new_api_services(&previous, rendered.clone());
        assert_eq!(now, vec![deployment.clone(), api_service("v1alpha1.example.com")]);
        assert_eq!(held, vec![api_service("v1.example.com")]);
        let (now, held) = hold_new_api_services(&[], rendered);
        assert_eq!(
            now,
            vec![deployment],
            "a first install applies its APIServices last"
        );
        assert_eq!(held.len(), 2);
    }

    #[test]
    fn objects_still_to_prune_stay_tracked_after_those_applied() {
        let (kept, dropped, added) = (
            object("Service", "s"),
            object("ConfigMap", "c"),
            object("Secret", "x"),
        );
        let tracked = tracked_until_pruned(&[kept.clone(), added.clone()], &[kept.clone(), dropped.clone()]);
        assert_eq!(tracked, [kept.clone(), added.clone(), dropped]);
        // Nothing to prune: the record lists exactly what was applied.
        assert_eq!(
            tracked_until_pruned(&[kept.clone(), added.clone()], std::slice::from_ref(&kept)),
            [kept, added]
        );
    }

    #[test]
    fn a_rollout_is_stuck_once_it_waited_its_deadline_and_only_if_never_ready() {
        let at = |second: i64| Timestamp::from_second(second).expect("a timestamp");
        let minute = Duration::from_secs(60);
        let progress =
            |deadline, started, now| match rollout_progress("waiting".into(), deadline, minute, started, now)
            {
                Progress::RollingOut(_) => "rolling out",
                Progress::DeadlineExceeded { minutes: 10, .. } => "stuck",
                other => panic!("unexpected {other:?}"),
            };
        assert_eq!(progress(Some(10), Some(at(0)), at(599)), "rolling out");
        assert_eq!(progress(Some(10), Some(at(0)), at(600)), "stuck");
        // No deadline, or content that was ready once: never stuck.
        assert_eq!(progress(None, Some(at(0)), at(100_000)), "rolling out");
        assert_eq!(progress(Some(10), None, at(100_000)), "rolling out");
        // A clock that went back does not count as waiting.
        assert_eq!(progress(Some(10), Some(at(1000)), at(0)), "rolling out");
    }

    #[test]
    fn the_rollout_start_is_kept_for_the_same_content_and_dropped_once_it_was_ready() {
        let started = Time(Timestamp::from_second(5).expect("a timestamp"));
        let mut installed = InstalledRevision {
            rollout: Some(RolloutStart {
                fingerprint: "a".into(),
                started_at: started.clone(),
            }),
            ..InstalledRevision::default()
        };
        // The same content applied again: the clock runs on.
        assert_eq!(
            rollout_start(Some(&installed), "a").map(|r| r.started_at),
            Some(started.clone())
        );
        // New content: a new clock.
        let new = rollout_start(Some(&installed), "b").expect("a start");
        assert!(new.fingerprint == "b" && new.started_at != started);
        // Content that was ready once has no clock (a later unready spell is not stuck).
        installed.ready = Some(ReadyMark {
            fingerprint: "a".into(),
            watched: vec![],
            applied: vec![],
        });
        assert_eq!(rollout_start(Some(&installed), "a"), None);
        assert!(rollout_start(None, "a").is_some());
    }

    #[test]
    fn catalog_properties_only_add_kinds_the_bundle_lacks() {
        let property = |text: &str| serde_json::from_str::<Property>(text).expect("a property");
        let merged = merged_properties(
            &[property(
                r#"{"type":"olm.package","value":{"packageName":"p","version":"1.0.0"}}"#,
            )],
            &[
                property(r#"{"type":"olm.package","value":{"packageName":"p","version":"9.9.9"}}"#),
                property(r#"{"type":"olm.maxOpenShiftVersion","value":4.20}"#),
            ],
        );
        assert_eq!(
            serde_json::to_string(&merged).expect("serializable"),
            r#"[{"type":"olm.package","value":{"packageName":"p","version":"1.0.0"}},{"type":"olm.maxOpenShiftVersion","value":4.20}]"#
        );
    }
}
