//! Prometheus metrics of the ClusterExtension and ClusterCatalog reconcilers (the operations
//! module serves them).

use std::{sync::Mutex, time::Instant};

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    error: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InstalledLabels {
    extension: String,
    bundle: String,
}

/// Reconcile counts, durations and failures by category, for any reconciler.
pub struct ReconcileMetrics {
    runs: Counter,
    failures: Family<ErrorLabels, Counter>,
    duration: Histogram,
}

impl ReconcileMetrics {
    /// Registers `<prefix>_reconcile_total`, `<prefix>_reconcile_failures_total{error}` and
    /// `<prefix>_reconcile_duration_seconds`.
    pub fn register(registry: &mut Registry, prefix: &str) -> Self {
        let metrics = Self {
            runs: Counter::default(),
            failures: Family::default(),
            duration: Histogram::new([0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0]),
        };
        let sub = registry.sub_registry_with_prefix(prefix);
        sub.register("reconcile", "Reconciles", metrics.runs.clone());
        sub.register(
            "reconcile_failures",
            "Failed reconciles by error category",
            metrics.failures.clone(),
        );
        sub.register(
            "reconcile_duration_seconds",
            "Reconcile duration",
            metrics.duration.clone(),
        );
        metrics
    }

    /// Counts a reconcile and records its duration when the guard drops.
    pub fn reconcile_timer(&self) -> ReconcileTimer<'_> {
        self.runs.inc();
        ReconcileTimer {
            metrics: self,
            start: Instant::now(),
        }
    }

    /// Counts a failure by category.
    pub fn reconcile_failed(&self, category: &str) {
        self.failures
            .get_or_create(&ErrorLabels {
                error: category.to_string(),
            })
            .inc();
    }
}

/// The API requests counted so far for each reconcile in flight, by its tracing span. The span,
/// not a task-local, carries the count: kube's client sends requests from a worker task, which
/// enters the caller's span.
static API_REQUESTS: std::sync::LazyLock<Mutex<std::collections::HashMap<tracing::span::Id, u32>>> =
    std::sync::LazyLock::new(Mutex::default);

/// Runs `work` in a `reconcile{extension}` span and counts the Kubernetes API requests it makes
/// through the controller's clients (those built by
/// [`crate::leader::Leadership::client`] note each request).
pub async fn count_api_requests<F: std::future::Future>(extension: &str, work: F) -> (F::Output, u32) {
    use tracing::Instrument;
    // ERROR level: the span (and so the count) exists under any log filter.
    let span = tracing::error_span!("reconcile", extension);
    let Some(id) = span.id() else {
        return (work.await, 0);
    };
    lock(&API_REQUESTS).insert(id.clone(), 0);
    let output = work.instrument(span).await;
    let count = lock(&API_REQUESTS).remove(&id).unwrap_or_default();
    (output, count)
}

/// Notes one API request for the reconcile whose span is current, if any.
pub fn note_api_request() {
    if let Some(id) = tracing::Span::current().id()
        && let Some(count) = lock(&API_REQUESTS).get_mut(&id)
    {
        *count += 1;
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// The ClusterExtension controller's metrics: reconciles, and the installed bundles.
pub struct Metrics {
    reconciles: ReconcileMetrics,
    api_requests: Histogram,
    installed: Family<InstalledLabels, Gauge>,
    installed_now: Mutex<std::collections::HashMap<String, String>>,
}

impl Metrics {
    /// Registers the controller's metrics under `olmv1_clusterextension_*`.
    pub fn register(registry: &mut Registry) -> Self {
        let reconciles = ReconcileMetrics::register(registry, "olmv1_clusterextension");
        let installed = Family::default();
        registry
            .sub_registry_with_prefix("olmv1_clusterextension")
            .register(
                "installed_bundle",
                "1 for each ClusterExtension's installed bundle",
                installed.clone(),
            );
        let api_requests = Histogram::new([0.0, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0]);
        registry
            .sub_registry_with_prefix("olmv1_clusterextension")
            .register(
                "reconcile_api_requests",
                "Kubernetes API requests per reconcile",
                api_requests.clone(),
            );
        Self {
            reconciles,
            api_requests,
            installed,
            installed_now: Mutex::default(),
        }
    }

    /// Records how many API requests a reconcile made.
    pub fn reconcile_api_requests(&self, requests: u32) {
        self.api_requests.observe(f64::from(requests));
    }

    /// Counts a reconcile and records its duration when the guard drops.
    pub fn reconcile_timer(&self) -> ReconcileTimer<'_> {
        self.reconciles.reconcile_timer()
    }

    /// Counts a failure by category.
    pub fn reconcile_failed(&self, category: &str) {
        self.reconciles.reconcile_failed(category);
    }

    /// Records which bundle an extension has installed (`None`: nothing).
    pub fn set_installed(&self, extension: &str, bundle: Option<&str>) {
        let mut now = self.installed_now.lock().expect("metrics lock poisoned");
        if let Some(old) = now.remove(extension) {
            self.installed.remove(&InstalledLabels {
                extension: extension.into(),
                bundle: old,
            });
        }
        if let Some(bundle) = bundle {
            self.installed
                .get_or_create(&InstalledLabels {
                    extension: extension.into(),
                    bundle: bundle.into(),
                })
                .set(1);
            now.insert(extension.into(), bundle.into());
        }
    }
}

/// Observes a reconcile's duration on drop.
pub struct ReconcileTimer<'a> {
    metrics: &'a ReconcileMetrics,
    start: Instant,
}

impl Drop for ReconcileTimer<'_> {
    fn drop(&mut self) {
        self.metrics.duration.observe(self.start.elapsed().as_secs_f64());
    }
}
