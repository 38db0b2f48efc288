//! Prometheus metrics of cluster upgrade gating.

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{family::Family, gauge::Gauge},
    registry::Registry,
};

use olmv1_api::v1::conditions::ConditionStatus;

use super::compat::Assessment;

/// Labels of one blocking extension.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BlockingLabels {
    cluster_extension: String,
    bundle: String,
    max_openshift_version: String,
}

/// Gauges describing the last assessment. Cheap to clone (all clones share the same values).
#[derive(Clone, Debug, Default)]
pub struct UpgradeableMetrics {
    blocking_extensions: Gauge,
    blocking: Family<BlockingLabels, Gauge>,
    metadata_errors: Gauge,
    upgradeable: Gauge,
}

impl UpgradeableMetrics {
    /// Registers the gauges in `registry` (pass the root registry: the names carry their own
    /// `olmv1_upgradeable_` prefix) and returns the handle [`super::run`] updates.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "olmv1_upgradeable_blocking_extensions",
            "Number of installed ClusterExtensions whose olm.maxOpenShiftVersion blocks the next cluster minor version",
            metrics.blocking_extensions.clone(),
        );
        registry.register(
            "olmv1_upgradeable_blocking_extension",
            "1 for each installed ClusterExtension that blocks the next cluster minor version",
            metrics.blocking.clone(),
        );
        registry.register(
            "olmv1_upgradeable_metadata_errors",
            "Number of installed ClusterExtensions whose olm.maxOpenShiftVersion could not be read",
            metrics.metadata_errors.clone(),
        );
        registry.register(
            "olmv1_upgradeable",
            "1 when the Upgradeable condition written to the ClusterOperator is True, 0 when False",
            metrics.upgradeable.clone(),
        );
        metrics
    }

    /// Publishes one assessment.
    pub fn observe(&self, assessment: &Assessment, status: ConditionStatus) {
        self.blocking.clear();
        for b in &assessment.blocking {
            self.blocking
                .get_or_create(&BlockingLabels {
                    cluster_extension: b.extension.clone(),
                    bundle: b.bundle.clone(),
                    max_openshift_version: b.max_openshift_version.to_string(),
                })
                .set(1);
        }
        self.blocking_extensions
            .set(saturating_i64(assessment.blocking.len()));
        self.metadata_errors.set(saturating_i64(assessment.errors.len()));
        self.upgradeable.set(i64::from(status == ConditionStatus::True));
    }
}

fn saturating_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::upgradeable::compat::{InstalledExtension, MajorMinor, assess};

    #[test]
    fn exposes_the_blocking_set() {
        let mut registry = Registry::default();
        let metrics = UpgradeableMetrics::register(&mut registry);
        let installed = InstalledExtension {
            extension: "ce".to_owned(),
            bundle: "b.v1".to_owned(),
            properties: Ok(vec![(
                "olm.maxOpenShiftVersion".to_owned(),
                "\"4.18\"".to_owned(),
            )]),
        };
        let assessment = assess(MajorMinor::new(4, 18), &[installed]);
        metrics.observe(&assessment, assessment.condition().status);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        assert!(text.contains("olmv1_upgradeable_blocking_extensions 1"), "{text}");
        assert!(
            text.contains(
                "olmv1_upgradeable_blocking_extension{cluster_extension=\"ce\",bundle=\"b.v1\",max_openshift_version=\"4.18\"} 1"
            ),
            "{text}"
        );
        assert!(text.contains("olmv1_upgradeable 0"), "{text}");

        let assessment = assess(MajorMinor::new(4, 17), &[]);
        metrics.observe(&assessment, assessment.condition().status);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        assert!(text.contains("olmv1_upgradeable_blocking_extensions 0"), "{text}");
        assert!(!text.contains("cluster_extension=\"ce\""), "cleared: {text}");
        assert!(text.contains("olmv1_upgradeable 1"), "{text}");
    }
}
