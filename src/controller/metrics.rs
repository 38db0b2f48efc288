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
struct ConditionLabels {
    name: String,
    r#type: String,
    status: String,
    reason: String,
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

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Conditions of `TYPES` on an object, as they are now: `<prefix>_condition{name, type,
/// status, reason} 1`, one series per object and condition type (the previous one goes when the
/// status or reason changes), so that alerts can ask how long an object has been in a state. A
/// type the object does not report yet (a catalog never served has no Serving, as upstream's)
/// is `status="Unknown", reason=""`, so that "not True" alerts see it too.
/// Cardinality: objects x condition types; status and reason come from closed vocabularies.
pub struct ConditionMetrics {
    family: Family<ConditionLabels, Gauge>,
    types: &'static [&'static str],
    current: Mutex<std::collections::HashMap<String, Vec<ConditionLabels>>>,
}

impl ConditionMetrics {
    /// Registers `<prefix>_condition` for the condition types `types`.
    pub fn register(registry: &mut Registry, prefix: &str, types: &'static [&'static str]) -> Self {
        let family = Family::default();
        registry.sub_registry_with_prefix(prefix).register(
            "condition",
            "1 for each condition of each object, labelled with its current status and reason",
            family.clone(),
        );
        Self {
            family,
            types,
            current: Mutex::default(),
        }
    }

    /// Records object `name`'s conditions as they are now.
    pub fn set(&self, name: &str, conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition]) {
        let now: Vec<ConditionLabels> = self
            .types
            .iter()
            .map(|type_| {
                let (status, reason) = conditions
                    .iter()
                    .find(|c| c.type_ == *type_)
                    .map_or(("Unknown", ""), |c| (c.status.as_str(), c.reason.as_str()));
                ConditionLabels {
                    name: name.to_string(),
                    r#type: (*type_).to_string(),
                    status: status.to_string(),
                    reason: reason.to_string(),
                }
            })
            .collect();
        let mut current = lock(&self.current);
        for gone in current
            .get(name)
            .into_iter()
            .flatten()
            .filter(|l| !now.contains(l))
        {
            self.family.remove(gone);
        }
        for labels in &now {
            self.family.get_or_create(labels).set(1);
        }
        current.insert(name.to_string(), now);
    }

    /// Drops object `name`'s series: it is gone.
    pub fn forget(&self, name: &str) {
        for gone in lock(&self.current).remove(name).into_iter().flatten() {
            self.family.remove(&gone);
        }
    }
}

/// `olmv1_leader{component}`: 1 while this replica leads (holds its Lease, or runs without
/// election), 0 while it waits; read at each scrape.
#[derive(Debug)]
struct LeaderCollector {
    component: &'static str,
    leadership: crate::leader::Leadership,
}

impl prometheus_client::collector::Collector for LeaderCollector {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::{encoding::EncodeMetric, metrics::gauge::ConstGauge};
        let gauge = ConstGauge::new(i64::from(self.leadership.holds()));
        let mut metric = encoder.encode_descriptor(
            "olmv1_leader",
            "1 while this replica leads (holds its Lease), 0 otherwise",
            None,
            gauge.metric_type(),
        )?;
        gauge.encode(metric.encode_family(&[("component", self.component)])?)
    }
}

/// Registers `olmv1_leader{component}` for this replica of `component`.
pub fn register_leader(
    registry: &mut Registry,
    component: &'static str,
    leadership: crate::leader::Leadership,
) {
    registry.register_collector(Box::new(LeaderCollector {
        component,
        leadership,
    }));
}

/// The ClusterExtension controller's metrics: reconciles, and the installed bundles.
pub struct Metrics {
    reconciles: ReconcileMetrics,
    api_requests: Histogram,
    installed: Family<InstalledLabels, Gauge>,
    installed_now: Mutex<std::collections::HashMap<String, String>>,
    drift_checks: Counter,
    drifted: Counter,
    /// `olmv1_clusterextension_condition` of Installed and Progressing.
    pub conditions: ConditionMetrics,
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
        let (drift_checks, drifted) = (Counter::default(), Counter::default());
        let sub = registry.sub_registry_with_prefix("olmv1_clusterextension");
        sub.register(
            "drift_checks",
            "Drift checks of the objects of kinds the controller does not watch",
            drift_checks.clone(),
        );
        sub.register(
            "drifted",
            "Extensions a drift check found changed (applied again)",
            drifted.clone(),
        );
        let conditions = ConditionMetrics::register(
            registry,
            "olmv1_clusterextension",
            &[
                olmv1_api::v1::conditions::TYPE_INSTALLED,
                olmv1_api::v1::conditions::TYPE_PROGRESSING,
            ],
        );
        Self {
            reconciles,
            api_requests,
            installed,
            installed_now: Mutex::default(),
            drift_checks,
            drifted,
            conditions,
        }
    }

    /// Counts a drift check.
    pub fn drift_check(&self) {
        self.drift_checks.inc();
    }

    /// Counts the extensions a drift check found changed.
    pub fn drift_found(&self, extensions: usize) {
        self.drifted.inc_by(extensions as u64);
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

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

    use super::*;

    fn condition(type_: &str, status: &str, reason: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ),
        }
    }

    fn exposition(registry: &Registry) -> Vec<String> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        let mut lines: Vec<String> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_string)
            .collect();
        lines.sort();
        lines
    }

    #[test]
    fn condition_series_follow_the_current_status_and_go_with_the_object() {
        let mut registry = Registry::default();
        let metrics = ConditionMetrics::register(&mut registry, "x", &["Installed", "Progressing"]);
        metrics.set(
            "a",
            &[
                condition("Installed", "False", "Absent"),
                condition("Progressing", "True", "RollingOut"),
                condition("Deprecated", "False", "NotDeprecated"),
            ],
        );
        metrics.set(
            "a",
            &[
                condition("Installed", "False", "Absent"),
                condition("Progressing", "False", "ProgressDeadlineExceeded"),
            ],
        );
        assert_eq!(
            exposition(&registry),
            [
                r#"x_condition{name="a",type="Installed",status="False",reason="Absent"} 1"#,
                r#"x_condition{name="a",type="Progressing",status="False",reason="ProgressDeadlineExceeded"} 1"#,
            ],
            "one series per condition type listed, the previous status gone"
        );
        metrics.set("b", &[condition("Progressing", "True", "Retrying")]);
        assert!(
            exposition(&registry).contains(
                &r#"x_condition{name="b",type="Installed",status="Unknown",reason=""} 1"#.to_string()
            ),
            "a type not reported yet is Unknown: {:?}",
            exposition(&registry)
        );
        metrics.forget("a");
        metrics.forget("b");
        assert!(exposition(&registry).is_empty());
    }

    #[test]
    fn the_leader_gauge_reads_the_leadership_at_each_scrape() {
        let mut registry = Registry::default();
        let leadership = crate::leader::Leadership::elected();
        register_leader(&mut registry, "controller", leadership);
        assert_eq!(
            exposition(&registry),
            [r#"olmv1_leader{component="controller"} 0"#]
        );
        let mut registry = Registry::default();
        register_leader(&mut registry, "catalogd", crate::leader::Leadership::unelected());
        assert_eq!(exposition(&registry), [r#"olmv1_leader{component="catalogd"} 1"#]);
    }
}
