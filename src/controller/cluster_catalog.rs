//! The ClusterCatalog reconciler (catalogd's role): pulls `spec.source.image.ref`, takes the
//! directory named by the image label `operators.operatorframework.io.index.configs.v1`, stores
//! and serves its FBC, and writes status as upstream does (`resolvedSource`, `urls.base`,
//! `lastUnpacked`, `Serving`, `Progressing`). Tags are polled every `pollIntervalMinutes` with
//! 1% jitter; digests never. A failed poll keeps serving the last good content.

use crate::controller::{
    finalizer::finalizer,
    metrics::{ConditionMetrics, ReconcileMetrics},
    status::set_condition,
};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{self, Event as Finalizer};
use kube::{Client, ResourceExt};
use olmv1_api::v1::conditions::{
    ConditionStatus, FINALIZER_DELETE_SERVER_CACHE, LABEL_CATALOG_NAME, REASON_AVAILABLE, REASON_BLOCKED,
    REASON_RETRYING, REASON_SUCCEEDED, REASON_UNAVAILABLE, REASON_USER_SPECIFIED_UNAVAILABLE,
    TYPE_PROGRESSING, TYPE_SERVING,
};
use olmv1_api::v1::{
    AvailabilityMode, CatalogSourceType, ClusterCatalog, ClusterCatalogStatus, ClusterCatalogUrls,
    ResolvedCatalogSource, ResolvedImageSource,
};
use serde_json::json;

use crate::backoff::Backoff;
use crate::catalog::server::CatalogStore;
use crate::image::{self, ImageError, ImageReference, RegistryClient, UnpackLimits};

/// The image label naming the FBC directory of a catalog image.
pub use crate::catalog::source::CONFIGS_LABEL;
const MESSAGE_SUCCEEDED: &str = "Successfully unpacked and stored content from resolved source";
const MESSAGE_SERVING: &str = "Serving desired content from resolved source";
const MESSAGE_UNAVAILABLE_MODE: &str = "Catalog availability mode is set to Unavailable";
const POLL_JITTER_FACTOR: f64 = 0.01;
/// Retries of a failed reconcile: 1 s, 2 s, 4 s, ... up to 5 minutes.
const ERROR_BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(300));

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Pulling or reading the image failed (`Progressing` message: `source catalog content: ...`).
    #[error("source catalog content: {message}")]
    Source {
        /// The cause, naming the image.
        message: String,
        /// Whether retrying cannot help (e.g. a digest-pinned image with no configs label).
        terminal: bool,
    },
    /// The FBC could not be parsed or written.
    #[error("error storing fbc: {0}")]
    Store(String),
    /// The API server refused a write.
    #[error("updating ClusterCatalog {name:?}: {source}")]
    Kube {
        /// The catalog.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Adding or removing the finalizer failed, or the helper refused the object (no name).
    #[error("ClusterCatalog {name:?}: {message}")]
    Finalizer {
        /// The catalog.
        name: String,
        /// What the helper said.
        message: String,
    },
}

impl Error {
    /// Terminal errors set `Progressing=False/Blocked` and are not retried on a timer.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Error::Source { terminal: true, .. })
    }

    /// A stable name for the failures metric.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Source { .. } => "SourceFailed",
            Error::Store(_) => "StoreFailed",
            Error::Kube { .. } => "StatusWriteFailed",
            Error::Finalizer { .. } => "FinalizerFailed",
        }
    }
}

/// Settings of the reconciler.
#[derive(Clone, Debug)]
pub struct CatalogdSettings {
    /// Scheme and host of `status.urls.base`, e.g. `https://catalogd-service.olmv1-system.svc`.
    pub base_url: String,
    /// Where pulled images are unpacked (entries are removed once stored).
    pub image_cache_dir: PathBuf,
    /// Bounds on unpacked content.
    pub unpack_limits: UnpackLimits,
    /// The length of one `pollIntervalMinutes` unit: one minute, shorter only in tests.
    pub poll_unit: Duration,
    /// Label selector of the ClusterCatalogs to reconcile (all when empty).
    pub selector: String,
}

/// What was last stored for a catalog.
#[derive(Clone, Debug)]
struct StoredState {
    digest_ref: String,
    unpacked_at: SystemTime,
    last_successful_poll: SystemTime,
    observed_generation: i64,
}

/// Shared state of the reconciler.
pub struct Context {
    client: Client,
    store: Arc<CatalogStore>,
    registry: Arc<RegistryClient>,
    settings: CatalogdSettings,
    stored: Mutex<HashMap<String, StoredState>>,
    failures: Mutex<HashMap<String, u32>>,
    metrics: Option<Arc<ReconcileMetrics>>,
    conditions: Option<Arc<ConditionMetrics>>,
}

impl Context {
    /// A context serving into `store`, pulling with `registry`.
    pub fn new(
        client: Client,
        store: Arc<CatalogStore>,
        registry: Arc<RegistryClient>,
        settings: CatalogdSettings,
    ) -> Self {
        Context {
            client,
            store,
            registry,
            settings,
            stored: Mutex::new(HashMap::new()),
            failures: Mutex::new(HashMap::new()),
            metrics: None,
            conditions: None,
        }
    }

    /// Records each catalog's Serving and Progressing in `conditions`.
    pub fn with_condition_metrics(mut self, conditions: Arc<ConditionMetrics>) -> Self {
        self.conditions = Some(conditions);
        self
    }

    /// Counts reconciles and failures in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<ReconcileMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    fn stored_state(&self, name: &str) -> Option<StoredState> {
        self.stored
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    fn forget(&self, name: &str) {
        self.stored.lock().unwrap_or_else(|e| e.into_inner()).remove(name);
        self.store.remove(name);
        if let Some(conditions) = &self.conditions {
            conditions.forget(name);
        }
    }
}

/// Runs the reconciler until the watch ends (on shutdown).
pub async fn run(context: Arc<Context>) {
    let api: Api<ClusterCatalog> = Api::all(context.client.clone());
    let mut watch = crate::watch::config();
    if !context.settings.selector.is_empty() {
        watch = watch.labels(&context.settings.selector);
    }
    // New registry credentials (a pull secret created or rotated): retry every catalog now
    // rather than after its failure backoff.
    let credentials_changed = context.registry.config().credentials.changes();
    // Stored content found damaged (and no longer served): store it again now.
    let content_damaged = context.store.damage_events();
    crate::watch::controller(api, watch)
        .reconcile_all_on(credentials_changed)
        .reconcile_all_on(content_damaged)
        .shutdown_on_signal()
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            // error_policy logged the failures, with the catalog's name; a trigger for a catalog
            // already deleted has nothing to do.
            if let Err(e) = result {
                tracing::debug!(error = %e, "ClusterCatalog reconcile ended with an error");
            }
        })
        .await;
}

fn error_policy(catalog: Arc<ClusterCatalog>, error: &Error, context: Arc<Context>) -> Action {
    let name = catalog.name_any();
    tracing::warn!(catalog = %name, error = %error, "ClusterCatalog reconcile failed");
    if let Some(metrics) = &context.metrics {
        metrics.reconcile_failed(error.category());
    }
    if error.is_terminal() {
        return Action::await_change();
    }
    let mut failures = context.failures.lock().unwrap_or_else(|e| e.into_inner());
    let count = failures.entry(name).or_insert(0);
    *count = count.saturating_add(1);
    Action::requeue(ERROR_BACKOFF.delay(*count))
}

/// Reconciles one ClusterCatalog: the server-cache finalizer through `kube::runtime::finalizer`
/// (cleanup forgets the served content), except on an Unavailable catalog, which keeps none.
pub async fn reconcile(catalog: Arc<ClusterCatalog>, context: Arc<Context>) -> Result<Action, Error> {
    let _timer = context.metrics.as_deref().map(ReconcileMetrics::reconcile_timer);
    let name = catalog.name_any();
    let api: Api<ClusterCatalog> = Api::all(context.client.clone());
    if catalog.spec.availability_mode == AvailabilityMode::Unavailable
        && catalog.metadata.deletion_timestamp.is_none()
    {
        return make_unavailable(&api, &catalog, &context).await;
    }
    finalizer(&api, FINALIZER_DELETE_SERVER_CACHE, catalog, |event| async {
        match event {
            Finalizer::Apply(catalog) => serve(&api, &catalog, &context).await,
            Finalizer::Cleanup(catalog) => {
                context.forget(&catalog.name_any());
                tracing::info!(catalog = %catalog.name_any(), "ClusterCatalog deleted: its content is no longer served");
                Ok(Action::await_change())
            }
        }
    })
    .await
    .map_err(|error| match error {
        finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => e,
        other => Error::Finalizer {
            name,
            message: other.to_string(),
        },
    })
}

/// Upstream's Unavailable mode: nothing served, conditions say so, and no finalizer is kept
/// (there is no content to clean up).
async fn make_unavailable(
    api: &Api<ClusterCatalog>,
    catalog: &ClusterCatalog,
    context: &Context,
) -> Result<Action, Error> {
    let name = catalog.name_any();
    let generation = catalog.metadata.generation.unwrap_or_default();
    let old_status = catalog.status.clone().unwrap_or_default();
    let has_finalizer = catalog
        .finalizers()
        .iter()
        .any(|f| f == FINALIZER_DELETE_SERVER_CACHE);
    context.forget(&name);
    let mut status = old_status.clone();
    set_not_serving(&mut status, generation);
    set_condition(
        &mut status.conditions,
        TYPE_PROGRESSING,
        ConditionStatus::True,
        REASON_SUCCEEDED,
        MESSAGE_UNAVAILABLE_MODE,
        Some(generation),
        Timestamp::now(),
    );
    set_condition(
        &mut status.conditions,
        TYPE_SERVING,
        ConditionStatus::False,
        REASON_USER_SPECIFIED_UNAVAILABLE,
        MESSAGE_UNAVAILABLE_MODE,
        Some(generation),
        Timestamp::now(),
    );
    write_status(api, context, &name, &old_status, &status).await?;
    if has_finalizer {
        remove_finalizer(api, catalog).await?;
    }
    Ok(Action::await_change())
}

/// Pulls, stores and serves the catalog's content (the finalizer is in place).
async fn serve(
    api: &Api<ClusterCatalog>,
    catalog: &ClusterCatalog,
    context: &Context,
) -> Result<Action, Error> {
    let name = catalog.name_any();
    let generation = catalog.metadata.generation.unwrap_or_default();
    let old_status = catalog.status.clone().unwrap_or_default();
    // Upstream's mutating webhook labels every catalog with its own name, which
    // ClusterExtension selectors rely on; with no webhook, the reconciler does it.
    if catalog.labels().get(LABEL_CATALOG_NAME) != Some(&name) {
        label_with_name(api, catalog).await?;
        return Ok(Action::await_change());
    }

    let now = SystemTime::now();
    let poll_interval = poll_interval(catalog, context.settings.poll_unit);
    // The stored files are checked in full on every reconcile: damaged content is dropped and
    // the catalog pulled and stored again.
    let intact = {
        let (store, name) = (context.store.clone(), name.clone());
        tokio::task::spawn_blocking(move || store.verify(&name))
            .await
            .unwrap_or(false)
    };
    let stored = context.stored_state(&name).filter(|_| intact);
    let base_url = catalog_base_url(&context.settings.base_url, &name);
    if let Some(state) = &stored {
        let mut expected = old_status.clone();
        set_serving(&mut expected, state, &base_url);
        set_progressing(&mut expected, state.observed_generation, None);
        let up_to_date = expected == old_status && state.observed_generation == generation;
        let poll_due = poll_interval.is_some_and(|interval| state.last_successful_poll + interval <= now);
        if up_to_date && !poll_due {
            return Ok(next_poll(state.last_successful_poll, poll_interval, now));
        }
    }

    let outcome = unpack_and_store(catalog, context, stored.as_ref()).await;
    let mut status = old_status.clone();
    status
        .conditions
        .retain(|c| c.type_ == TYPE_SERVING || c.type_ == TYPE_PROGRESSING);
    match outcome {
        Ok(state) => {
            set_progressing(&mut status, generation, None);
            set_serving(&mut status, &state, &base_url);
            let next = next_poll(state.last_successful_poll, poll_interval, now);
            context
                .stored
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(name.clone(), state);
            context
                .failures
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&name);
            write_status(api, context, &name, &old_status, &status).await?;
            Ok(next)
        }
        Err(error) => {
            status_after_failure(&mut status, stored.as_ref(), &base_url, generation, &error);
            write_status(api, context, &name, &old_status, &status).await?;
            Err(error)
        }
    }
}

/// A failed pull or store: Progressing says why, and the last good content is still served.
/// Serving comes from what this process serves (`stored`), not from the status read with the
/// catalog: that copy can predate the last store (a reconcile right after one, e.g. on a
/// credentials change, may read the catalog from a cache its status write has not reached yet),
/// and writing it back would take Serving away from content still served (a CI run saw it: two
/// pull secret changes 0.5 s apart left a served catalog "not being served" for good).
fn status_after_failure(
    status: &mut ClusterCatalogStatus,
    stored: Option<&StoredState>,
    base_url: &str,
    generation: i64,
    error: &Error,
) {
    if let Some(state) = stored {
        set_serving(status, state, base_url);
    }
    set_progressing(status, generation, Some(error));
}

/// Pulls the image (skipped when a tag still resolves to the stored digest), and stores its FBC.
async fn unpack_and_store(
    catalog: &ClusterCatalog,
    context: &Context,
    stored: Option<&StoredState>,
) -> Result<StoredState, Error> {
    let name = catalog.name_any();
    let generation = catalog.metadata.generation.unwrap_or_default();
    let source = &catalog.spec.source;
    let image_source = match (source.source_type, source.image.as_ref()) {
        (CatalogSourceType::Image, Some(image)) => image,
        (CatalogSourceType::Image, None) => {
            return Err(Error::Source {
                message: format!("error parsing ClusterCatalog {name:?}, image source is nil"),
                terminal: true,
            });
        }
    };
    let reference = ImageReference::parse(&image_source.reference).map_err(|e| source_error(&e, true))?;
    let pinned = reference.digest.is_some();
    let now = SystemTime::now();

    // A tag that still points at the stored digest needs no unpack: only the poll time moves.
    if let Some(state) = stored {
        let digest = match &reference.digest {
            Some(digest) => digest.clone(),
            None => image::resolve_digest(&context.registry, &reference)
                .await
                .map_err(|e| source_error(&e, false))?,
        };
        if reference.with_digest(&digest) == state.digest_ref {
            return Ok(StoredState {
                last_successful_poll: now,
                observed_generation: generation,
                ..state.clone()
            });
        }
    }

    let cache_dir = &context.settings.image_cache_dir;
    let pulled = image::pull_with_client(
        &context.registry,
        &reference,
        cache_dir,
        &context.settings.unpack_limits,
    )
    .await
    .map_err(|e| source_error(&e, pinned))?;
    let result = store_pulled(&name, &pulled, context, pinned).await;
    // The content now lives in the catalog store; the unpacked image is not needed any more.
    let _ = image::cache::remove(&pulled);
    result?;
    Ok(StoredState {
        digest_ref: pulled.digest_ref,
        unpacked_at: pulled.unpacked_at,
        last_successful_poll: now,
        observed_generation: generation,
    })
}

async fn store_pulled(
    name: &str,
    pulled: &image::PulledImage,
    context: &Context,
    pinned: bool,
) -> Result<(), Error> {
    let configs = crate::catalog::source::configs_dir(pulled).map_err(|message| Error::Source {
        message,
        terminal: pinned,
    })?;
    let (store, catalog_name) = (context.store.clone(), name.to_string());
    let max_file_bytes = context.settings.unpack_limits.max_file_bytes;
    tokio::task::spawn_blocking(move || store.store_from_dir(&catalog_name, &configs, max_file_bytes))
        .await
        .map_err(|e| Error::Store(e.to_string()))?
        .map_err(|e| Error::Store(e.to_string()))?;
    Ok(())
}

fn source_error(error: &ImageError, pinned: bool) -> Error {
    // A digest names immutable content: a hostile or malformed image stays so.
    let content_problem = matches!(error, ImageError::Unpack { .. } | ImageError::InvalidImage { .. });
    Error::Source {
        message: error.to_string(),
        terminal: error.is_terminal() || (pinned && content_problem),
    }
}

/// `<base>/catalogs/<name>`.
pub fn catalog_base_url(base_url: &str, name: &str) -> String {
    format!("{}/catalogs/{name}", base_url.trim_end_matches('/'))
}

fn poll_interval(catalog: &ClusterCatalog, unit: Duration) -> Option<Duration> {
    let image = catalog.spec.source.image.as_ref()?;
    if image.reference.contains('@') {
        return None;
    }
    let minutes = u32::try_from(image.poll_interval_minutes?)
        .ok()
        .filter(|m| *m > 0)?;
    Some(unit * minutes)
}

/// Requeue at the next poll (with up to 1% jitter), or wait for a change when not polling.
fn next_poll(last_successful_poll: SystemTime, interval: Option<Duration>, now: SystemTime) -> Action {
    match interval {
        None => Action::await_change(),
        Some(interval) => {
            let jittered = interval + interval.mul_f64(rand::random::<f64>() * POLL_JITTER_FACTOR);
            let due = last_successful_poll + jittered;
            Action::requeue(due.duration_since(now).unwrap_or(Duration::from_millis(100)))
        }
    }
}

fn set_serving(status: &mut ClusterCatalogStatus, state: &StoredState, base_url: &str) {
    status.resolved_source = Some(ResolvedCatalogSource {
        source_type: CatalogSourceType::Image,
        image: ResolvedImageSource {
            reference: state.digest_ref.clone(),
        },
    });
    status.urls = Some(ClusterCatalogUrls {
        base: base_url.to_string(),
    });
    status.last_unpacked = Some(time_truncated(state.unpacked_at));
    set_condition(
        &mut status.conditions,
        TYPE_SERVING,
        ConditionStatus::True,
        REASON_AVAILABLE,
        MESSAGE_SERVING,
        Some(state.observed_generation),
        Timestamp::now(),
    );
}

fn set_not_serving(status: &mut ClusterCatalogStatus, generation: i64) {
    status.resolved_source = None;
    status.urls = None;
    status.last_unpacked = None;
    set_condition(
        &mut status.conditions,
        TYPE_SERVING,
        ConditionStatus::False,
        REASON_UNAVAILABLE,
        "",
        Some(generation),
        Timestamp::now(),
    );
}

fn set_progressing(status: &mut ClusterCatalogStatus, generation: i64, error: Option<&Error>) {
    match error {
        None => set_condition(
            &mut status.conditions,
            TYPE_PROGRESSING,
            ConditionStatus::True,
            REASON_SUCCEEDED,
            MESSAGE_SUCCEEDED,
            Some(generation),
            Timestamp::now(),
        ),
        Some(e) if e.is_terminal() => set_condition(
            &mut status.conditions,
            TYPE_PROGRESSING,
            ConditionStatus::False,
            REASON_BLOCKED,
            &e.to_string(),
            Some(generation),
            Timestamp::now(),
        ),
        Some(e) => set_condition(
            &mut status.conditions,
            TYPE_PROGRESSING,
            ConditionStatus::True,
            REASON_RETRYING,
            &e.to_string(),
            Some(generation),
            Timestamp::now(),
        ),
    }
}

fn time_truncated(t: SystemTime) -> Time {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    Time(
        jiff::Timestamp::from_second(i64::try_from(secs).unwrap_or(0)).unwrap_or(jiff::Timestamp::UNIX_EPOCH),
    )
}

async fn write_status(
    api: &Api<ClusterCatalog>,
    context: &Context,
    name: &str,
    old: &ClusterCatalogStatus,
    new: &ClusterCatalogStatus,
) -> Result<(), Error> {
    if let Some(conditions) = &context.conditions {
        conditions.set(name, &new.conditions);
    }
    if old == new {
        return Ok(());
    }
    // Explicit nulls: a merge patch must delete what is no longer set.
    let patch = json!({
        "status": {
            "conditions": new.conditions,
            "resolvedSource": new.resolved_source,
            "urls": new.urls,
            "lastUnpacked": new.last_unpacked,
        }
    });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|source| Error::Kube {
            name: name.to_string(),
            source,
        })
}

async fn label_with_name(api: &Api<ClusterCatalog>, catalog: &ClusterCatalog) -> Result<(), Error> {
    let name = catalog.name_any();
    let patch = json!({ "metadata": { "labels": { LABEL_CATALOG_NAME: name } } });
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|source| Error::Kube { name, source })
}

/// Drops the server-cache finalizer from a catalog made Unavailable (the one case
/// `kube::runtime::finalizer` does not cover: a live object that must not keep it).
async fn remove_finalizer(api: &Api<ClusterCatalog>, catalog: &ClusterCatalog) -> Result<(), Error> {
    crate::controller::finalizer::remove(api, catalog, FINALIZER_DELETE_SERVER_CACHE)
        .await
        .map_err(|e| Error::Finalizer {
            name: catalog.name_any(),
            message: format!("failed to remove finalizer: {e}"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_keeps_serving_what_is_stored_even_from_a_status_read_before_the_store() {
        let state = StoredState {
            digest_ref: "registry.example/c@sha256:00".into(),
            unpacked_at: SystemTime::now(),
            last_successful_poll: SystemTime::now(),
            observed_generation: 1,
        };
        let error = Error::Source {
            message: "the registry refused the credentials (HTTP 401)".into(),
            terminal: false,
        };
        // The status as read before the store's own write: nothing served yet.
        let mut status = ClusterCatalogStatus::default();
        status_after_failure(
            &mut status,
            Some(&state),
            "https://catalogd/catalogs/c",
            1,
            &error,
        );
        let serving = status
            .conditions
            .iter()
            .find(|c| c.type_ == TYPE_SERVING)
            .unwrap();
        assert_eq!(serving.status, "True");
        assert_eq!(
            status
                .resolved_source
                .as_ref()
                .map(|r| r.image.reference.as_str()),
            Some("registry.example/c@sha256:00")
        );
        let progressing = status
            .conditions
            .iter()
            .find(|c| c.type_ == TYPE_PROGRESSING)
            .unwrap();
        assert!(
            progressing.message.contains("HTTP 401"),
            "{}",
            progressing.message
        );
        // Nothing stored: nothing is claimed served.
        let mut status = ClusterCatalogStatus::default();
        status_after_failure(&mut status, None, "https://catalogd/catalogs/c", 1, &error);
        assert!(status.conditions.iter().all(|c| c.type_ != TYPE_SERVING));
        assert!(status.resolved_source.is_none());
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        assert_eq!(ERROR_BACKOFF.delay(1), Duration::from_secs(1));
        assert_eq!(ERROR_BACKOFF.delay(3), Duration::from_secs(4));
        assert_eq!(ERROR_BACKOFF.delay(50), Duration::from_secs(300));
    }

    #[test]
    fn configs_label_is_required_and_confined() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("configs")).unwrap();
        let mut pulled = image::PulledImage {
            digest_ref: "quay.io/a/b@sha256:00".into(),
            digest: "sha256:00".into(),
            dir: dir.path().to_path_buf(),
            labels: Default::default(),
            unpacked_at: SystemTime::now(),
        };
        let err = crate::catalog::source::configs_dir(&pulled).unwrap_err();
        assert_eq!(
            err,
            format!("catalog image is missing the required label {CONFIGS_LABEL:?}")
        );
        pulled.labels.insert(CONFIGS_LABEL.into(), "/configs".into());
        assert_eq!(
            crate::catalog::source::configs_dir(&pulled).unwrap(),
            dir.path().join("configs")
        );
        pulled.labels.insert(CONFIGS_LABEL.into(), "/../etc".into());
        assert!(crate::catalog::source::configs_dir(&pulled).is_err());
        pulled.labels.insert(CONFIGS_LABEL.into(), "/missing".into());
        assert!(
            crate::catalog::source::configs_dir(&pulled)
                .unwrap_err()
                .contains("not a directory")
        );
    }

    #[test]
    fn base_urls_and_poll_intervals() {
        assert_eq!(catalog_base_url("https://h/", "c"), "https://h/catalogs/c");
        let catalog: ClusterCatalog = serde_json::from_value(json!({
            "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
            "metadata": {"name": "c"},
            "spec": {"source": {"type": "Image", "image": {"ref": "quay.io/a/b:t", "pollIntervalMinutes": 2}}}
        }))
        .unwrap();
        assert_eq!(
            poll_interval(&catalog, Duration::from_secs(60)),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            poll_interval(&catalog, Duration::from_secs(1)),
            Some(Duration::from_secs(2))
        );
    }
}
