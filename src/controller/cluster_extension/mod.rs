//! Owns the ClusterExtension reconciler: its steps, its reconcile state, status and errors.
//! May import controller's shared parts and every module below controller; never cmd.
//!
//! The ClusterExtension reconciler: finalizers -> read installed revision -> resolve -> hold an
//! upgrade its OperatorCondition holds -> unpack -> preflights -> apply -> wait for readiness ->
//! status. Each step is a function in [`steps`];
//! this module wires them to kube-runtime and writes status once per reconcile.

mod dependencies;
mod drift;
mod error;
mod fallback;
pub mod operator_conditions;
mod status;
mod steps;
mod watches;

use std::{sync::Arc, time::Duration};

use futures::StreamExt;
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{DynamicObject, Patch, PatchParams},
    runtime::{
        controller::{self, Action},
        events::{Event, EventType, Recorder, Reporter},
        finalizer::{self as kube_finalizer, Event as Finalizer},
        reflector::{ObjectRef, Store},
    },
};
use olmv1_api::v1::{
    ClusterCatalog, ClusterExtension,
    conditions::{ANNOTATION_RELEASED, FINALIZER_CLEANUP_CONTENT, REASON_PROGRESS_DEADLINE_EXCEEDED},
};
use tracing::{debug, info, warn};

pub use dependencies::{
    DependencyMode, DependencyWaits, UNSATISFIED_DEPENDENCIES, catalog_entry_properties, installed_extension,
    served_apis,
};
pub use drift::DRIFT_CHECK;
pub use error::{Error, StepError};

use crate::{
    apply::{
        identity::{Installer, InstallerClients},
        lookups::ClusterLookups,
        objects::{Applied, Holding},
        revision::{RevisionStore, WatchedObject},
    },
    bundle::render::WebhookProvider,
    catalog::cache::CachedCatalogClient,
    controller::{finalizer::finalizer, metrics::Metrics},
    image::cache::PullOptions,
};

/// The field manager of the controller's status writes.
const STATUS_FIELD_MANAGER: &str = "olmv1-status";
/// How often an installed extension is reconciled again with nothing changed (each period drawn
/// in `[RESYNC, 1.2 * RESYNC)`): controller-runtime's default sync period, upstream's. Drift is
/// repaired without it: the watches report owned CRDs and Deployments, and the drift check
/// ([`drift::DRIFT_CHECK`]) the other kinds, at a few list requests for every extension at once.
/// (Re-applying each extension in full every 30 minutes cost ~15 requests each:
/// docs/benchmarks.md.)
const RESYNC: Duration = Duration::from_secs(10 * 3600);
/// How soon an extension blocked on an error only a change can fix is looked at again: the
/// watches bring it back on a change of its spec, a catalog or an owned object; this catches
/// what is not watched (a ServiceAccount or RBAC the admin created since).
const BLOCKED_RECHECK: Duration = Duration::from_secs(1800);
/// How soon an extension whose upgrade its OperatorCondition holds is looked at again with
/// nothing changed (the watch of OperatorConditions brings it back as soon as one changes).
const HELD_RECHECK: Duration = Duration::from_secs(300);
/// How soon a rollout in progress is looked at again.
const ROLLOUT_POLL: Duration = Duration::from_secs(5);
/// How soon a rollout past its deadline is looked at again: the watch on its Deployments and
/// CRDs brings it back as soon as they change, so this is only a safety net.
const STUCK_ROLLOUT_POLL: Duration = Duration::from_secs(60);
/// One unit of `spec.progressDeadlineMinutes`.
pub const PROGRESS_DEADLINE_UNIT: Duration = Duration::from_secs(60);
/// How long a bundle image cache entry no revision record names is kept after it was written:
/// a reconcile may have pulled a digest it has not recorded yet (preflights and apply come
/// between), and another reconcile's sweep must not delete it under it.
pub const BUNDLE_CACHE_GRACE: Duration = Duration::from_secs(600);

/// What every reconcile shares.
pub struct Context {
    /// The controller's own client: ClusterExtensions, ClusterCatalogs, revision records,
    /// TokenRequests and SubjectAccessReviews. Never bundle content.
    pub client: Client,
    /// Who writes each ClusterExtension's content (its service account, or the controller in
    /// upstream's model), and clients acting as them: all bundle content.
    pub identities: InstallerClients,
    /// Where installed revisions are recorded.
    pub revisions: RevisionStore,
    /// Catalog content, cached by resolved image digest.
    pub catalogs: Arc<CachedCatalogClient>,
    /// How bundle images are pulled and where they are cached.
    pub pull: PullOptions,
    /// How long an unrecorded bundle image stays cached (see [`BUNDLE_CACHE_GRACE`]).
    pub bundle_cache_grace: Duration,
    /// One unit of `spec.progressDeadlineMinutes`: a minute ([`PROGRESS_DEADLINE_UNIT`]), shorter
    /// only in tests.
    pub progress_deadline_unit: Duration,
    /// Kubernetes Events.
    pub recorder: Recorder,
    /// Prometheus metrics.
    pub metrics: Arc<Metrics>,
    /// Who provides the serving certificates of bundles' webhooks.
    pub webhook_provider: WebhookProvider,
    /// Discovery and access-review answers, kept until a watch says they changed.
    pub lookups: ClusterLookups,
    /// The last full apply of each extension that ended ready, cleared by the watches when an
    /// owned object changes: a reconcile with nothing new makes no request for its content.
    pub last_apply: LastApplies,
    /// How often the drift check compares the objects of unwatched kinds with their last apply
    /// ([`drift::DRIFT_CHECK`], shorter only in tests).
    pub drift_check: Duration,
    /// What a bundle's dependencies mean: refused (upstream) or checked.
    pub dependencies: DependencyMode,
    /// The extensions blocked on dependencies, woken when what is installed changes.
    pub dependency_waits: DependencyWaits,
    /// The OperatorConditions kept for installed bundles (`--operator-conditions`), if on.
    pub operator_conditions: Option<operator_conditions::OperatorConditions>,
    /// The ClusterExtensions as the controller's watch last saw them, once it runs: a reconcile
    /// asks it, before each write, whether its extension still holds its content.
    pub extensions: std::sync::OnceLock<Store<ClusterExtension>>,
    /// The ClusterCatalogs as the controller's watch last saw them, once it runs: what a
    /// reconcile resolves from, instead of listing them (controller-runtime's cached reads).
    pub catalog_store: std::sync::OnceLock<Store<ClusterCatalog>>,
}

/// What was last applied to each extension, and when (see [`Context::last_apply`]).
#[derive(Clone, Default)]
pub struct LastApplies(Arc<std::sync::Mutex<Applies>>);

#[derive(Default)]
struct Applies {
    /// Per extension: the fingerprint of its last full apply that ended ready, and its CRDs and
    /// Deployments as they were then.
    last: std::collections::HashMap<String, (String, Vec<WatchedObject>)>,
    /// Per extension: its last full apply, if it ended with something still rolling out and
    /// nothing since said it was undone.
    waiting: std::collections::HashMap<String, WaitingApply>,
    /// The extensions looked at since this process started.
    seen: std::collections::HashSet<String>,
    /// Per extension, what its watches reported since its current (or last) reconcile began.
    reports: std::collections::HashMap<String, Reports>,
}

/// A full apply that ended with something still rolling out (see [`LastApplies::waiting_apply`]).
#[derive(Clone, Debug)]
pub struct WaitingApply {
    /// The fingerprint of the content applied.
    pub fingerprint: String,
    /// What it wrote.
    pub applied: Applied,
    /// When.
    at: std::time::Instant,
}

/// How long the reconciles of a rollout in progress trust its full apply: they read readiness
/// only. A rollout still in progress after this long is applied in full again, which takes back
/// any object of a kind no watch follows that was changed meanwhile (as every reconcile of a
/// rollout did before, every [`ROLLOUT_POLL`]); one that ends ready within it is remembered as
/// ready once each such object is read as that apply left it, and applied in full once more if
/// one is not.
const WAITING_APPLY_TRUST: Duration = Duration::from_secs(60);

/// What the watches reported of an extension's objects since [`LastApplies::begin`]: each
/// object's last report, for at most [`Reports::MAX`] objects.
#[derive(Default)]
struct Reports {
    last: std::collections::HashMap<ObjectRef<DynamicObject>, Reported>,
    /// A change no later report undoes (drift, a deleted OperatorCondition), or more objects
    /// than are kept.
    changed: bool,
}

/// An object's last report.
enum Reported {
    /// Its state (`None`: not ready).
    State(Option<WatchedObject>),
    /// Deleted: the object with this uid is gone, whatever its last state said.
    Deleted(String),
}

impl Reports {
    const MAX: usize = 64;

    fn push(&mut self, object: ObjectRef<DynamicObject>, report: Reported) {
        if self.last.len() >= Self::MAX && !self.last.contains_key(&object) {
            self.changed = true;
            return;
        }
        self.last.insert(object, report);
    }

    /// Whether `object` with `uid` was reported deleted: a report of its state after that is
    /// the deletion's own (the watch's last state of the object), not news.
    fn deleted(&self, object: &ObjectRef<DynamicObject>, uid: Option<&str>) -> bool {
        matches!(self.last.get(object), Some(Reported::Deleted(deleted)) if Some(deleted.as_str()) == uid)
    }

    /// What was reported unlike `watched`, if anything: an object last reported other than as
    /// `watched` has it, ready, or one it names deleted. Only the last report of each object
    /// counts: the not-ready states of the rollout the reconcile waited for are over once it is
    /// ready, and a scale or a replacement leaves a last state not watched. An object `watched`
    /// does not name, deleted, was pruned.
    fn unlike(&self, watched: &[WatchedObject]) -> Option<String> {
        if self.changed {
            return Some("drift, a deleted OperatorCondition, or too many objects".into());
        }
        self.last.iter().find_map(|(object, report)| match report {
            Reported::State(None) => Some(format!("{object} not ready")),
            Reported::State(Some(state)) if !watched.contains(state) => Some(format!(
                "{object} at uid {} generation {}",
                state.uid, state.generation
            )),
            Reported::Deleted(uid) if watched.iter().any(|w| w.uid == *uid) => {
                Some(format!("{object} deleted"))
            }
            _ => None,
        })
    }
}

/// What [`LastApplies::freshness`] says of an extension's content.
#[derive(Debug, PartialEq, Eq)]
pub enum Freshness {
    /// Applied and ready, and neither a watch nor the drift check reported a change since:
    /// trust it.
    Fresh,
    /// Not known to be in place: apply in full.
    Stale,
    /// Not looked at since this process started: its revision record says what was ready.
    FirstSinceStart,
}

impl LastApplies {
    fn applies(&self) -> std::sync::MutexGuard<'_, Applies> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `fingerprint` was applied to `extension` and nothing reported a change since:
    /// the watches (CRDs, Deployments) and the drift check (every other kind) forget an apply
    /// whose objects changed.
    pub fn freshness(&self, extension: &str, fingerprint: &str) -> Freshness {
        let mut applies = self.applies();
        if applies.seen.insert(extension.to_string()) {
            return Freshness::FirstSinceStart;
        }
        match applies.last.get(extension) {
            Some((applied, _)) if applied == fingerprint => Freshness::Fresh,
            _ => Freshness::Stale,
        }
    }

    /// The last full apply of `fingerprint` to `extension`, if it ended with something still
    /// rolling out less than [`WAITING_APPLY_TRUST`] ago and nothing since said it was undone
    /// (drift, a deleted object it wrote): the reconciles of that rollout need not apply again,
    /// once what they read of readiness matches what it left ([`Applied::states`]).
    pub fn waiting_apply(&self, extension: &str, fingerprint: &str) -> Option<WaitingApply> {
        let applies = self.applies();
        applies
            .waiting
            .get(extension)
            .filter(|w| w.fingerprint == fingerprint && w.at.elapsed() < WAITING_APPLY_TRUST)
            .cloned()
    }

    /// Remembers a full apply of `fingerprint` that ended with something still rolling out,
    /// unless the watches reported, since the reconcile began, something undone (drift, an
    /// object it wrote deleted).
    pub fn applied_waiting(&self, extension: &str, fingerprint: &str, applied: Applied) {
        let mut applies = self.applies();
        let undone = applies.reports.get(extension).is_some_and(|reports| {
            reports.changed
                || reports.last.values().any(|report| {
                    matches!(report, Reported::Deleted(uid) if applied.objects.iter().any(|a| a.uid == *uid))
                })
        });
        if undone {
            applies.waiting.remove(extension);
            return;
        }
        applies.waiting.insert(
            extension.to_string(),
            WaitingApply {
                fingerprint: fingerprint.to_string(),
                applied,
                at: std::time::Instant::now(),
            },
        );
    }

    /// Forgets the waiting apply of `extension`: what its rollout read is not what it left.
    pub fn forget_waiting(&self, extension: &str) {
        self.applies().waiting.remove(extension);
    }

    /// The drift check found an object of `extension` changed: its next reconcile applies in
    /// full (also the first one since this process started), and one in flight does not
    /// remember its apply as trusted.
    pub fn drifted(&self, extension: &str) {
        self.content_changed(extension);
        self.applies().seen.insert(extension.to_string());
    }

    /// A reconcile of `extension` begins: what the watches report from now on is checked by
    /// [`LastApplies::remember`].
    pub fn begin(&self, extension: &str) {
        self.applies()
            .reports
            .insert(extension.to_string(), Reports::default());
    }

    /// Remembers a full apply (or a check of one) that ended with everything ready, unless a
    /// watch reported, since the reconcile began, an object other than as `watched` has it (a
    /// deletion or a scale while the reconcile read readiness): that report's reconcile, queued
    /// behind this one, must not find the content trusted. Says what was reported if it did not
    /// remember.
    pub fn remember(
        &self,
        extension: &str,
        fingerprint: &str,
        watched: Vec<WatchedObject>,
    ) -> Result<(), String> {
        let mut applies = self.applies();
        applies.seen.insert(extension.to_string());
        applies.waiting.remove(extension);
        if let Some(unlike) = applies.reports.get(extension).and_then(|r| r.unlike(&watched)) {
            applies.last.remove(extension);
            return Err(unlike);
        }
        applies
            .last
            .insert(extension.to_string(), (fingerprint.to_string(), watched));
        Ok(())
    }

    /// An owned CRD, Deployment or APIService (`object`, with `uid`) was reported: forgets the
    /// extension's last apply unless the object is as it was then and still ready
    /// (`ready_state`; `None` when it is not ready). Status updates, a restarted watch's initial
    /// list, and the last state of an object reported deleted leave it.
    pub fn object_changed(
        &self,
        extension: &str,
        object: ObjectRef<DynamicObject>,
        uid: Option<&str>,
        ready_state: Option<&WatchedObject>,
    ) {
        let mut applies = self.applies();
        if applies
            .reports
            .get(extension)
            .is_some_and(|reports| reports.deleted(&object, uid))
        {
            return;
        }
        if let Some(reports) = applies.reports.get_mut(extension) {
            reports.push(object, Reported::State(ready_state.cloned()));
        }
        let unchanged = applies
            .last
            .get(extension)
            .is_some_and(|(_, watched)| ready_state.is_some_and(|state| watched.contains(state)));
        if !unchanged {
            applies.last.remove(extension);
        }
    }

    /// An owned CRD, Deployment or APIService (`object`, with `uid`) was deleted: forgets the
    /// extension's last apply if that apply left it (an object pruned by the apply was not).
    pub fn object_deleted(&self, extension: &str, object: ObjectRef<DynamicObject>, uid: Option<&str>) {
        let mut applies = self.applies();
        let Some(uid) = uid else {
            drop(applies);
            return self.content_changed(extension);
        };
        if let Some(reports) = applies.reports.get_mut(extension) {
            reports.push(object, Reported::Deleted(uid.to_string()));
        }
        if applies
            .waiting
            .get(extension)
            .is_some_and(|w| w.applied.objects.iter().any(|a| a.uid == uid))
        {
            applies.waiting.remove(extension);
        }
        if applies
            .last
            .get(extension)
            .is_some_and(|(_, watched)| watched.iter().any(|w| w.uid == uid))
        {
            applies.last.remove(extension);
        }
    }

    /// Something of the extension changed that no later report undoes (found drifted, an
    /// OperatorCondition deleted): forgets its last apply, and a reconcile in flight does not
    /// remember its own.
    pub fn content_changed(&self, extension: &str) {
        let mut applies = self.applies();
        if let Some(reports) = applies.reports.get_mut(extension) {
            reports.changed = true;
        }
        applies.last.remove(extension);
        applies.waiting.remove(extension);
    }

    /// Forgets an extension: it is gone.
    pub fn forget(&self, extension: &str) {
        let mut applies = self.applies();
        applies.last.remove(extension);
        applies.waiting.remove(extension);
        applies.seen.remove(extension);
        applies.reports.remove(extension);
    }
}

impl Context {
    /// Builds the context; `reporter` names the controller in Events.
    pub fn new(
        client: Client,
        identities: InstallerClients,
        revisions: RevisionStore,
        catalogs: Arc<CachedCatalogClient>,
        pull: PullOptions,
        metrics: Arc<Metrics>,
    ) -> Self {
        let reporter = Reporter {
            controller: "olmv1-controller".into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        let recorder = Recorder::new(client.clone(), reporter);
        Self {
            client,
            identities,
            revisions,
            catalogs,
            pull,
            bundle_cache_grace: BUNDLE_CACHE_GRACE,
            progress_deadline_unit: PROGRESS_DEADLINE_UNIT,
            recorder,
            metrics,
            webhook_provider: WebhookProvider::default(),
            lookups: ClusterLookups::new(),
            last_apply: LastApplies::default(),
            drift_check: drift::DRIFT_CHECK,
            dependencies: DependencyMode::default(),
            dependency_waits: DependencyWaits::default(),
            operator_conditions: None,
            extensions: std::sync::OnceLock::new(),
            catalog_store: std::sync::OnceLock::new(),
        }
    }

    /// Whether `ext` still holds its content, as the watch sees it now: the same object, not
    /// being deleted, not released, with the finalizer that uninstalls it. A reconcile started
    /// before an uninstall or a `migrate rollback` stops writing at its next object. Without the
    /// watch (a test calling the steps alone), it always holds.
    pub fn holding(&self, ext: &ClusterExtension) -> Holding {
        match self.extensions.get() {
            Some(store) => holding_in(store.clone(), ext),
            None => Holding::always(),
        }
    }
}

/// Whether `ext`, as `store` has it now, is the same object and holds its content.
fn holding_in(store: Store<ClusterExtension>, ext: &ClusterExtension) -> Holding {
    let (key, uid) = (ObjectRef::from_obj(ext), ext.uid());
    Holding::new(move || {
        store
            .get(&key)
            .is_some_and(|live| live.uid() == uid && holds_content(&live))
    })
}

/// Whether an extension, as read, holds its content: not being deleted, not released, with the
/// finalizer that uninstalls it.
fn holds_content(ext: &ClusterExtension) -> bool {
    ext.meta().deletion_timestamp.is_none() && !is_released(ext) && holds_finalizer(ext)
}

/// Whether the extension carries the finalizer that uninstalls it.
pub fn holds_finalizer(ext: &ClusterExtension) -> bool {
    ext.finalizers().iter().any(|f| f == FINALIZER_CLEANUP_CONTENT)
}

/// Whether the extension's content was handed to someone else ([`ANNOTATION_RELEASED`]).
fn is_released(ext: &ClusterExtension) -> bool {
    ext.annotations().contains_key(ANNOTATION_RELEASED)
}

/// Runs the ClusterExtension controller until shutdown.
pub async fn run(ctx: Arc<Context>, concurrency: u16) {
    let client = ctx.client.clone();
    let extensions: Api<ClusterExtension> = Api::all(client.clone());
    // Consistent lists (not `any_semantic`): after an API server restart, a list served from a
    // still-filling watch cache can hand out a resourceVersion the next watch rejects as too
    // old, over and over.
    let controller = crate::watch::controller(extensions, crate::watch::config());
    let store = controller.store();
    // Set once: a second `run` in one process would share the first one's watch.
    let _ = ctx.extensions.set(store.clone());
    let every_extension = store.clone();
    let (catalogs, catalogs_writer) = kube::runtime::reflector::store();
    let _ = ctx.catalog_store.set(catalogs);
    // Review answers are kept while these watches run (they end with the process); discovery
    // follows the controller's one CRD and one APIService watch (`watches::crds`,
    // `watches::api_services`).
    tokio::spawn({
        let (lookups, client) = (ctx.lookups.clone(), client.clone());
        async move { lookups.watch_rbac(client).await }
    });
    // An API appeared or went: extensions waiting on a served API are looked at again, once
    // discovery has caught up.
    tokio::spawn({
        let (mut changes, waits) = (ctx.lookups.discovery_changes(), ctx.dependency_waits.clone());
        async move {
            while changes.changed().await.is_ok() {
                tokio::time::sleep(crate::apply::lookups::DISCOVERY_SETTLE).await;
                changes.mark_unchanged();
                waits.changed();
            }
        }
    });
    // Entries left within the grace by the sweeps after installs and deletes go on a later one:
    // the one after they come out of the grace. With no entry aged between one and two graces,
    // none can have become removable since the last sweep, and the sweep (a list of the records)
    // is skipped: after an install burst one sweep, then none while the controller idles.
    tokio::spawn({
        let ctx = ctx.clone();
        async move {
            let period = ctx.bundle_cache_grace.max(Duration::from_secs(1));
            // What a previous process left, once.
            remove_unused_bundle_images(&ctx, None).await;
            loop {
                tokio::time::sleep(period).await;
                let due = crate::image::cache::has_entries_aged(
                    &ctx.pull.cache_dir,
                    ctx.bundle_cache_grace,
                    ctx.bundle_cache_grace + period,
                );
                if !matches!(due, Ok(false)) {
                    remove_unused_bundle_images(&ctx, None).await;
                }
            }
        }
    });
    let controller = match ctx
        .operator_conditions
        .as_ref()
        .and_then(|c| watches::operator_conditions(client.clone(), c, &ctx.last_apply))
    {
        // What an installed bundle's OperatorCondition says of upgrades changed: a held upgrade
        // goes, or one about to go is held.
        Some(conditions) => controller.watches_stream(conditions, |oc| operator_conditions::owner(&oc)),
        None => controller,
    };
    controller
        .with_config(kube::runtime::controller::Config::default().concurrency(concurrency))
        // Catalog content changed (or a catalog came or went): every extension may resolve
        // differently. Upstream re-enqueues all of them too.
        .watches_stream(
            watches::catalogs(client.clone(), catalogs_writer, ctx.catalogs.clone()),
            move |_| {
                every_extension
                    .state()
                    .iter()
                    .map(|ext| ObjectRef::from_obj(&**ext))
                    .collect::<Vec<_>>()
            },
        )
        // The objects the controller applied: rollouts progress, drift is repaired (the last
        // apply is no longer to be trusted).
        .watches_stream(watches::owned_deployments(client.clone(), &ctx.last_apply), {
            let last_apply = ctx.last_apply.clone();
            move |object| watches::deployment_changed(&object, &last_apply)
        })
        .watches_stream(watches::crds(client.clone(), &ctx.lookups, &ctx.last_apply), {
            let last_apply = ctx.last_apply.clone();
            move |object| watches::crd_changed(&object, &last_apply)
        })
        // An owned APIService turning unavailable (its server gone) is reported.
        .watches_stream(watches::api_services(client.clone(), &ctx.lookups, &ctx.last_apply), {
            let last_apply = ctx.last_apply.clone();
            move |object| watches::api_service_changed(&object, &last_apply)
        })
        // Objects of the kinds not watched that changed since their apply.
        .reconcile_on(drift::checks(ctx.clone(), store.clone(), ctx.drift_check))
        // New registry credentials (a pull secret created or rotated): retry every extension.
        .reconcile_all_on(ctx.pull.registry.credentials.changes())
        // Another extension's installed bundle changed: those blocked on dependencies retry.
        .reconcile_on(ctx.dependency_waits.wakes())
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            match result {
                Ok(_) => {}
                // A trigger for an extension already deleted (its objects going after it): done.
                Err(controller::Error::ObjectNotFound(object)) => {
                    debug!(extension = %object.name, "ClusterExtension no longer exists: nothing to reconcile");
                }
                // error_policy logged it, with the extension's name.
                Err(controller::Error::ReconcilerFailed(..)) => {}
                Err(e) => warn!(error = %e, "reconcile stream error"),
            }
        })
        .await;
}

/// Deletes the bundle image cache entries that no revision record names, that were not written
/// within the grace, and that are not `just_installed` (a digest reference). Never fails a
/// reconcile: what goes wrong is logged, and the next sweep tries again.
async fn remove_unused_bundle_images(ctx: &Context, just_installed: Option<&str>) {
    let (cache_dir, grace) = (ctx.pull.cache_dir.clone(), ctx.bundle_cache_grace);
    let just_installed_entry: std::collections::BTreeSet<String> = just_installed
        .and_then(crate::image::cache::entry_name_of)
        .into_iter()
        .collect();
    let removable = tokio::task::spawn_blocking({
        let cache_dir = cache_dir.clone();
        move || crate::image::cache::has_removable(&cache_dir, &just_installed_entry, grace)
    })
    .await;
    // Nothing past the grace: the records (a list of every one) need not be read.
    if matches!(removable, Ok(Ok(false))) {
        return;
    }
    let images = match ctx.revisions.installed_images().await {
        Ok(images) => images,
        Err(e) => {
            warn!(error = %e, "bundle image cache not swept: the revision records cannot be read");
            return;
        }
    };
    let keep = images
        .iter()
        .map(String::as_str)
        .chain(just_installed)
        .filter_map(crate::image::cache::entry_name_of)
        .collect();
    let swept =
        tokio::task::spawn_blocking(move || crate::image::cache::remove_unused(&cache_dir, &keep, grace))
            .await;
    match swept {
        Ok(Ok(removed)) => {
            for path in removed {
                info!(path = %path.display(), "removed an unused bundle image from the cache");
            }
        }
        Ok(Err(e)) => warn!(error = %e, "bundle image cache sweep failed"),
        Err(e) => warn!(error = %e, "bundle image cache sweep was interrupted"),
    }
}

async fn reconcile(ext: Arc<ClusterExtension>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile_timer();
    let name = ext.name_any();
    let api: Api<ClusterExtension> = Api::all(ctx.client.clone());
    if is_released(&ext) {
        return let_go(&ext, &api).await;
    }
    let (result, api_requests) = crate::api_requests::count(
        &name,
        finalizer(&api, FINALIZER_CLEANUP_CONTENT, ext, |event| async {
            match event {
                Finalizer::Apply(ext) => install(&ext, &ctx).await,
                Finalizer::Cleanup(ext) => uninstall(&ext, &ctx).await,
            }
        }),
    )
    .await;
    ctx.metrics.reconcile_api_requests(api_requests);
    info!(%name, api_requests, "reconcile finished");
    result.map_err(|e| match e {
        kube_finalizer::Error::ApplyFailed(e) | kube_finalizer::Error::CleanupFailed(e) => e,
        other => Error::Finalizer(Box::new(other)),
    })
}

/// A released extension ([`ANNOTATION_RELEASED`]): its finalizer comes off without uninstalling,
/// and nothing else is written. This reconcile runs after any one that was writing its content
/// (one reconcile per object at a time), so the finalizer gone tells whoever released it that
/// the controller let go (`olmv1 migrate rollback` waits for it).
async fn let_go(ext: &ClusterExtension, api: &Api<ClusterExtension>) -> Result<Action, Error> {
    if holds_finalizer(ext) {
        crate::controller::finalizer::remove(api, ext, FINALIZER_CLEANUP_CONTENT)
            .await
            .map_err(|e| Error::Finalizer(Box::new(kube_finalizer::Error::RemoveFinalizer(e))))?;
        info!(
            name = %ext.name_any(),
            to = %ext.annotations().get(ANNOTATION_RELEASED).map(String::as_str).unwrap_or_default(),
            "released: finalizer removed, content left in place"
        );
    }
    Ok(Action::await_change())
}

fn error_policy(ext: Arc<ClusterExtension>, error: &Error, ctx: Arc<Context>) -> Action {
    warn!(name = %ext.name_any(), %error, "reconcile failed");
    ctx.metrics.reconcile_failed(error.category());
    Action::requeue(Duration::from_secs(10))
}

/// Brings the cluster to the ClusterExtension's desired state and reports it in status.
async fn install(ext: &ClusterExtension, ctx: &Context) -> Result<Action, Error> {
    let name = ext.name_any();
    let outcome = steps::run_pipeline(ext, ctx).await;
    if let Err(let_go @ StepError::LetGo(_)) = &outcome.result {
        // Deleted or released meanwhile: the reconcile that follows uninstalls or lets go.
        info!(%name, %let_go, "stopped writing");
        return Ok(Action::await_change());
    }
    let new_status = status::compute(ext, &outcome, k8s_openapi::jiff::Timestamp::now());
    let changed = ext.status.as_ref() != Some(&new_status);
    let waits_on_dependencies = outcome
        .result
        .as_ref()
        .is_err_and(StepError::waits_on_other_extensions);
    ctx.dependency_waits.set_blocked(&name, waits_on_dependencies);
    if changed {
        write_status(ctx, &name, &new_status).await?;
        publish_events(ext, &outcome, ctx).await;
        warn_of_ignored_service_account(ext, ctx).await;
    }
    ctx.metrics.conditions.set(&name, &new_status.conditions);
    let installed_before = ext
        .status
        .as_ref()
        .and_then(|s| s.install.as_ref())
        .map(|i| &i.bundle.name);
    if outcome.installed_bundle().map(|b| &b.bundle_name) != installed_before {
        // What other extensions' dependencies may rely on changed.
        ctx.dependency_waits.changed();
    }
    ctx.metrics
        .set_installed(&name, outcome.installed_bundle().map(|b| b.bundle_name.as_str()));
    Ok(match &outcome.result {
        Ok(steps::Progress::Done) if outcome.held.is_some() => {
            info!(%name, held = %outcome.held.as_ref().map(ToString::to_string).unwrap_or_default(), "upgrade held");
            // The OperatorCondition's watch brings it back when it changes; this is a safety net.
            Action::requeue(HELD_RECHECK)
        }
        Ok(steps::Progress::Done) => {
            info!(%name, bundle = ?outcome.installed_bundle().map(|b| &b.bundle_name), "reconciled");
            Action::requeue(crate::watch::jittered(RESYNC))
        }
        Ok(steps::Progress::RollingOut(_)) => Action::requeue(ROLLOUT_POLL),
        Ok(steps::Progress::DeadlineExceeded { minutes, waiting }) => {
            warn!(%name, minutes, %waiting, "rollout past its progress deadline");
            Action::requeue(STUCK_ROLLOUT_POLL)
        }
        Err(error) => {
            warn!(%name, %error, terminal = error.is_terminal(), "reconcile step failed");
            ctx.metrics.reconcile_failed(error.category());
            if waits_on_dependencies {
                // Woken when another extension's bundle changes; an API served by an object
                // the controller does not watch is seen on this recheck.
                Action::requeue(dependencies::DEPENDENCY_RECHECK)
            } else if error.is_terminal() {
                // Nothing changes until the spec, a catalog or an owned object does: the
                // watches bring the extension back; this recheck is a safety net.
                Action::requeue(crate::watch::jittered(BLOCKED_RECHECK))
            } else {
                Action::requeue(error.retry_after())
            }
        }
    })
}

async fn write_status(
    ctx: &Context,
    name: &str,
    status: &olmv1_api::v1::ClusterExtensionStatus,
) -> Result<(), Error> {
    let api: Api<ClusterExtension> = Api::all(ctx.client.clone());
    let patch = serde_json::json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterExtension",
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(STATUS_FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(Error::StatusWrite)?;
    Ok(())
}

async fn publish_events(ext: &ClusterExtension, outcome: &steps::Outcome, ctx: &Context) {
    let previous = ext
        .status
        .as_ref()
        .and_then(|s| s.install.as_ref())
        .map(|i| i.bundle.name.clone());
    let event = match (&outcome.result, outcome.installed_bundle()) {
        (Ok(steps::Progress::Done), Some(now)) if previous.as_deref() != Some(&now.bundle_name) => {
            let (reason, action) = if previous.is_some() {
                ("Upgraded", "Upgrade")
            } else {
                ("Installed", "Install")
            };
            Event {
                type_: EventType::Normal,
                reason: reason.into(),
                note: Some(format!(
                    "{reason} bundle {} version {}",
                    now.bundle_name, now.bundle_version
                )),
                action: action.into(),
                secondary: None,
            }
        }
        (Ok(steps::Progress::Done), _) if let Some(held) = &outcome.held => Event {
            type_: EventType::Normal,
            reason: olmv1_api::v1::conditions::REASON_OPERATOR_CONDITION_NOT_UPGRADEABLE.into(),
            note: Some(
                crate::controller::status::truncate_message(&held.to_string())
                    .chars()
                    .take(1024)
                    .collect(),
            ),
            action: "Upgrade".into(),
            secondary: None,
        },
        (Ok(steps::Progress::DeadlineExceeded { .. }), _) => Event {
            type_: EventType::Warning,
            reason: REASON_PROGRESS_DEADLINE_EXCEEDED.into(),
            note: status::progressing_message(&outcome.result).map(|m| m.chars().take(1024).collect()),
            action: "Reconcile".into(),
            secondary: None,
        },
        (Err(error), _) => Event {
            type_: EventType::Warning,
            reason: error.category().into(),
            note: Some(
                crate::controller::status::truncate_message(&error.to_string())
                    .chars()
                    .take(1024)
                    .collect(),
            ),
            action: "Reconcile".into(),
            secondary: None,
        },
        _ => return,
    };
    if let Err(e) = ctx.recorder.publish(&event, &ext.object_ref(&())).await {
        warn!(error = %e, "failed to publish event");
    }
}

/// Upstream's model ignores spec.serviceAccount: an extension that sets it is told so, with a
/// Warning, since its admin may believe the account limits what is written. Sent with each
/// status change (a new generation, an install, an upgrade), not on every reconcile.
async fn warn_of_ignored_service_account(ext: &ClusterExtension, ctx: &Context) {
    let Ok(Installer::Controller {
        ignored: Some(account),
    }) = ctx.identities.installer_of(ext)
    else {
        return;
    };
    let event = Event {
        type_: EventType::Warning,
        reason: "ServiceAccountIgnored".into(),
        note: Some(format!(
            "spec.serviceAccount.name {account:?} is ignored: the controller runs with \
             --install-identity controller and writes the bundle's objects with its own identity"
        )),
        action: "Install".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &ext.object_ref(&())).await {
        warn!(error = %e, "failed to publish event");
    }
}

/// Removes what the ClusterExtension installed. Objects carry an ownerReference to the
/// ClusterExtension, so when the installer cannot act (its service account or namespace is
/// gone, or the extension names none) the garbage collector still removes them: the finalizer
/// never hangs on a missing account.
async fn uninstall(ext: &ClusterExtension, ctx: &Context) -> Result<Action, Error> {
    let name = ext.name_any();
    let record = ctx
        .revisions
        .load(&name)
        .await
        .map_err(|e| Error::Step(Box::new(StepError::ReadInstalled(e))))?;
    if let Some(record) = record {
        match ctx.identities.installer_of(ext) {
            Ok(installer) => {
                match ctx.identities.client_for(&installer).await {
                    Ok(client) => {
                        if let Err(e) =
                            crate::apply::objects::delete_all(&client, &name, &record.objects).await
                        {
                            warn!(%name, error = %e, "uninstall as the installer failed; leaving the rest to garbage collection");
                        }
                    }
                    Err(e) => {
                        warn!(%name, error = %e, "installer unavailable; garbage collection removes the objects")
                    }
                }
                ctx.identities.forget(&installer).await;
            }
            Err(e) => warn!(%name, error = %e, "no installer; garbage collection removes the objects"),
        }
        ctx.revisions
            .delete(&name)
            .await
            .map_err(|e| Error::Step(Box::new(StepError::WriteRecord(e))))?;
        let event = Event {
            type_: EventType::Normal,
            reason: "Uninstalled".into(),
            note: Some(format!("Uninstalled bundle {}", record.bundle_name)),
            action: "Uninstall".into(),
            secondary: None,
        };
        let _ = ctx.recorder.publish(&event, &ext.object_ref(&())).await;
    }
    ctx.metrics.set_installed(&name, None);
    ctx.metrics.conditions.forget(&name);
    ctx.last_apply.forget(&name);
    ctx.dependency_waits.set_blocked(&name, false);
    // What it provided is gone; what it required no longer holds back another's upgrade.
    ctx.dependency_waits.changed();
    remove_unused_bundle_images(ctx, None).await;
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::{Freshness, LastApplies};
    use crate::apply::revision::{ObjectRef, WatchedObject};

    #[test]
    fn an_extension_holds_its_content_until_deleted_released_or_unfinalized() {
        use kube::runtime::{reflector, watcher};
        use olmv1_api::v1::{
            ClusterExtension,
            conditions::{ANNOTATION_RELEASED, FINALIZER_CLEANUP_CONTENT},
        };

        let ext = |uid: &str, extra: serde_json::Value| -> ClusterExtension {
            let mut value = serde_json::json!({
                "apiVersion": "olm.operatorframework.io/v1",
                "kind": "ClusterExtension",
                "metadata": {"name": "e", "uid": uid, "finalizers": [FINALIZER_CLEANUP_CONTENT]},
                "spec": {
                    "namespace": "ns",
                    "serviceAccount": {"name": "sa"},
                    "source": {"sourceType": "Catalog", "catalog": {"packageName": "p"}}
                }
            });
            for (key, v) in extra.as_object().unwrap() {
                value["metadata"][key] = v.clone();
            }
            serde_json::from_value(value).unwrap()
        };
        let installing = ext("u1", serde_json::json!({}));
        let (store, mut writer) = reflector::store::<ClusterExtension>();
        let holding = super::holding_in(store, &installing);
        let mut live = |e: ClusterExtension| writer.apply_watcher_event(&watcher::Event::Apply(e));

        assert!(holding.check("e").is_err(), "not seen by the watch yet: not held");
        live(installing.clone());
        assert!(holding.check("e").is_ok());
        for (what, now) in [
            (
                "released",
                ext(
                    "u1",
                    serde_json::json!({"annotations": {ANNOTATION_RELEASED: "classic"}}),
                ),
            ),
            (
                "finalizer removed",
                ext("u1", serde_json::json!({"finalizers": []})),
            ),
            (
                "being deleted",
                ext(
                    "u1",
                    serde_json::json!({"deletionTimestamp": "2026-11-30T00:00:00Z"}),
                ),
            ),
            ("deleted and made again", ext("u2", serde_json::json!({}))),
        ] {
            live(now);
            let refused = holding.check("e").unwrap_err().to_string();
            assert!(
                refused.starts_with("ClusterExtension e let go of its objects"),
                "{what}: {refused}"
            );
            live(installing.clone());
            assert!(holding.check("e").is_ok(), "{what}, then held again");
        }
    }

    fn deployment(uid: &str, generation: i64) -> WatchedObject {
        WatchedObject {
            object: ObjectRef {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                namespace: Some("ns".into()),
                name: "operator".into(),
            },
            uid: uid.into(),
            generation,
        }
    }

    /// The reflector's reference to the Deployment `deployment` describes.
    fn reported(name: &str) -> kube::runtime::reflector::ObjectRef<kube::api::DynamicObject> {
        kube::runtime::reflector::ObjectRef::<k8s_openapi::api::apps::v1::Deployment>::new(name)
            .within("ns")
            .erase()
    }

    /// Applies in which `ext` was already looked at since the process started.
    fn looked_at() -> LastApplies {
        let last_apply = LastApplies::default();
        last_apply.freshness("ext", "fp");
        last_apply
    }

    /// A reconcile of `ext` that ended ready with `watched`, then the next reconcile's verdict.
    fn after(ext: &str, last_apply: &LastApplies, during: impl FnOnce(&LastApplies)) -> Freshness {
        last_apply.begin(ext);
        during(last_apply);
        last_apply.remember(ext, "fp", vec![deployment("a", 2)]).ok();
        last_apply.begin(ext);
        last_apply.freshness(ext, "fp")
    }

    /// An apply of the Deployment `deployment` describes (uid `a`, generation 2), still
    /// rolling out.
    fn waiting_apply() -> crate::apply::objects::Applied {
        crate::apply::objects::Applied {
            objects: vec![crate::apply::revision::AppliedObject {
                object: deployment("a", 2).object,
                uid: "a".into(),
                resource_version: "7".into(),
            }],
            states: vec![deployment("a", 2)],
        }
    }

    #[test]
    fn an_apply_still_rolling_out_is_trusted_until_undone_ready_or_other_content() {
        let last_apply = looked_at();
        let waiting = |l: &LastApplies| l.waiting_apply("ext", "fp").map(|w| w.applied.states);
        last_apply.begin("ext");
        last_apply.applied_waiting("ext", "fp", waiting_apply());
        assert_eq!(waiting(&last_apply), Some(vec![deployment("a", 2)]));
        assert!(last_apply.waiting_apply("ext", "other content").is_none());
        assert!(last_apply.waiting_apply("other", "fp").is_none());
        // Status reports (the rollout progressing) leave it; the reconcile compares what it reads.
        last_apply.object_changed("ext", reported("operator"), Some("a"), None);
        assert!(waiting(&last_apply).is_some());

        // Undone: a Deployment it wrote deleted, drift found, the extension gone.
        type Undo = fn(&LastApplies);
        let undo: [(&str, Undo); 3] = [
            ("deleted", |l| {
                l.object_deleted("ext", reported("operator"), Some("a"))
            }),
            ("drifted", |l| l.drifted("ext")),
            ("forgotten", |l| l.forget("ext")),
        ];
        for (what, undo) in undo {
            last_apply.begin("ext");
            last_apply.applied_waiting("ext", "fp", waiting_apply());
            undo(&last_apply);
            assert!(waiting(&last_apply).is_none(), "{what}");
        }
        // Another object of that name deleted (another uid): still trusted.
        last_apply.begin("ext");
        last_apply.applied_waiting("ext", "fp", waiting_apply());
        last_apply.object_deleted("ext", reported("operator"), Some("b"));
        assert!(waiting(&last_apply).is_some());
        // Ready: the ready apply is remembered instead.
        last_apply.begin("ext");
        last_apply
            .remember("ext", "fp", vec![deployment("a", 2)])
            .unwrap();
        assert!(waiting(&last_apply).is_none());
        assert_eq!(last_apply.freshness("ext", "fp"), Freshness::Fresh);

        // Trusted for a while only: then a reconcile applies in full again.
        last_apply.begin("ext");
        last_apply.applied_waiting("ext", "fp", waiting_apply());
        let long_ago = std::time::Instant::now()
            .checked_sub(super::WAITING_APPLY_TRUST)
            .unwrap();
        last_apply.applies().waiting.get_mut("ext").unwrap().at = long_ago;
        assert!(waiting(&last_apply).is_none());

        // Undone while the apply ran: not remembered at all.
        last_apply.begin("ext");
        last_apply.object_deleted("ext", reported("operator"), Some("a"));
        last_apply.applied_waiting("ext", "fp", waiting_apply());
        assert!(waiting(&last_apply).is_none());
    }

    #[test]
    fn a_ready_apply_with_nothing_reported_meanwhile_is_trusted() {
        let last_apply = looked_at();
        assert_eq!(after("ext", &last_apply, |_| {}), Freshness::Fresh);
        assert_eq!(last_apply.freshness("ext", "other"), Freshness::Stale);
    }

    #[test]
    fn reports_of_the_objects_as_the_apply_left_them_keep_it_trusted() {
        let last_apply = looked_at();
        let status_only = |l: &LastApplies| {
            l.object_changed("ext", reported("operator"), Some("a"), Some(&deployment("a", 2)));
            l.object_changed("other", reported("operator"), Some("a"), None);
        };
        assert_eq!(after("ext", &last_apply, status_only), Freshness::Fresh);
        // Reported after the apply was remembered, the same state changes nothing either.
        last_apply.object_changed("ext", reported("operator"), Some("a"), Some(&deployment("a", 2)));
        assert_eq!(last_apply.freshness("ext", "fp"), Freshness::Fresh);
    }

    #[test]
    fn the_rollout_the_reconcile_waited_for_leaves_its_ready_apply_trusted() {
        // The install's own rollout: not ready, then ready as the reconcile read it. The next
        // reconcile trusts the apply (applying again would write every object a second time).
        let last_apply = looked_at();
        let rollout = |l: &LastApplies| {
            l.object_changed("ext", reported("operator"), Some("a"), None);
            l.object_changed("ext", reported("operator"), Some("a"), Some(&deployment("a", 2)));
        };
        assert_eq!(after("ext", &last_apply, rollout), Freshness::Fresh);
        // Not ready again as last reported: not trusted.
        let last_apply = looked_at();
        let unready = |l: &LastApplies| {
            l.object_changed("ext", reported("operator"), Some("a"), Some(&deployment("a", 2)));
            l.object_changed("ext", reported("operator"), Some("a"), None);
        };
        assert_eq!(after("ext", &last_apply, unready), Freshness::Stale);
    }

    #[test]
    fn a_deletion_or_scale_reported_while_readiness_was_read_is_never_trusted_away() {
        for (what, report) in [
            ("not ready", None),
            ("scaled (a new generation)", Some(deployment("a", 3))),
            ("replaced (a new uid)", Some(deployment("b", 1))),
        ] {
            let last_apply = looked_at();
            let verdict = after("ext", &last_apply, |l| {
                let uid = report.as_ref().map_or("a", |r| r.uid.as_str());
                l.object_changed("ext", reported("operator"), Some(uid), report.as_ref())
            });
            assert_eq!(verdict, Freshness::Stale, "{what}");
        }
        // A deletion stays a change even when the deleted object's last state, reported after
        // it, looks as the apply left it.
        let last_apply = looked_at();
        let deleted = |l: &LastApplies| {
            l.object_deleted("ext", reported("operator"), Some("a"));
            l.object_changed("ext", reported("operator"), Some("a"), Some(&deployment("a", 2)));
        };
        assert_eq!(after("ext", &last_apply, deleted), Freshness::Stale, "deleted");
        // Deleted once trusted too.
        assert_eq!(after("ext", &last_apply, |_| {}), Freshness::Fresh);
        last_apply.object_deleted("ext", reported("operator"), Some("a"));
        last_apply.object_changed("ext", reported("operator"), Some("a"), Some(&deployment("a", 2)));
        assert_eq!(
            last_apply.freshness("ext", "fp"),
            Freshness::Stale,
            "deleted after"
        );
    }

    #[test]
    fn an_object_the_apply_pruned_deleted_leaves_it_trusted() {
        // An upgrade's prune deletes the previous bundle's Deployment, which the ready apply
        // does not name: its deletion (and its last state, reported after) changes nothing.
        let last_apply = looked_at();
        let pruned = |l: &LastApplies| {
            l.object_changed(
                "ext",
                reported("old-operator"),
                Some("old"),
                Some(&deployment("old", 1)),
            );
            l.object_deleted("ext", reported("old-operator"), Some("old"));
            l.object_changed(
                "ext",
                reported("old-operator"),
                Some("old"),
                Some(&deployment("old", 1)),
            );
        };
        assert_eq!(after("ext", &last_apply, pruned), Freshness::Fresh);
        last_apply.object_deleted("ext", reported("old-operator"), Some("old"));
        assert_eq!(last_apply.freshness("ext", "fp"), Freshness::Fresh);
    }

    #[test]
    fn drift_found_by_the_check_is_never_trusted_away_even_after_a_restart() {
        let last_apply = looked_at();
        let verdict = after("ext", &last_apply, |_| {});
        assert_eq!(verdict, Freshness::Fresh);
        last_apply.drifted("ext");
        assert_eq!(last_apply.freshness("ext", "fp"), Freshness::Stale);
        // Found before this process looked at the extension: not re-verified from the record.
        let restarted = LastApplies::default();
        restarted.drifted("ext");
        assert_eq!(restarted.freshness("ext", "fp"), Freshness::Stale);
        // Found while a reconcile read readiness: that reconcile does not remember its apply.
        let in_flight = LastApplies::default();
        in_flight.freshness("ext", "fp");
        assert_eq!(after("ext", &in_flight, |l| l.drifted("ext")), Freshness::Stale);
    }

    #[test]
    fn more_reports_than_are_kept_count_as_a_change() {
        let last_apply = looked_at();
        // Each object's last report is kept, for up to MAX objects; the same one reported again
        // and again takes one place.
        let again = |l: &LastApplies| {
            for _ in 0..=super::Reports::MAX {
                l.object_changed("ext", reported("operator"), Some("a"), Some(&deployment("a", 2)));
            }
        };
        assert_eq!(after("ext", &last_apply, again), Freshness::Fresh);
        let flood = |l: &LastApplies| {
            for i in 0..=super::Reports::MAX {
                l.object_changed(
                    "ext",
                    reported(&format!("operator-{i}")),
                    Some("a"),
                    Some(&deployment("a", 2)),
                );
            }
        };
        assert_eq!(after("ext", &last_apply, flood), Freshness::Stale);
    }
}
