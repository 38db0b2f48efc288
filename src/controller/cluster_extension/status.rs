//! ClusterExtension status from a reconcile's outcome, with upstream's reasons and messages.

use olmv1_api::v1::{
    BundleMetadata, ClusterExtension, ClusterExtensionInstallStatus, ClusterExtensionStatus,
    conditions::{REASON_FAILED, REASON_ROLLING_OUT, REASON_SUCCEEDED, TYPE_INSTALLED, TYPE_PROGRESSING},
};

use super::steps::{Outcome, Progress};
use crate::apply::revision::InstalledRevision;
use crate::controller::status::{ConditionStatus, sanitize_network_error, set_condition};

/// The status after a reconcile. Conditions that do not change keep their transition times.
pub fn compute(ext: &ClusterExtension, outcome: &Outcome) -> ClusterExtensionStatus {
    let generation = ext.metadata.generation;
    let previous = ext.status.clone().unwrap_or_default();
    let mut status = previous.clone();
    // Installed: the record's bundle once it is rolled out; while a new revision rolls out or a
    // step fails, what was installed stays installed (the old bundle keeps running).
    let previously_installed = previous.install.is_some()
        && previous
            .conditions
            .iter()
            .any(|c| c.type_ == TYPE_INSTALLED && c.status == "True");
    match (&outcome.result, &outcome.record) {
        (Ok(Progress::Done), Some(record)) => set_installed(&mut status, record, generation),
        _ if previously_installed => {
            // Keep the condition, refreshing only its observedGeneration.
            if let Some(installed) = status.conditions.iter_mut().find(|c| c.type_ == TYPE_INSTALLED) {
                installed.observed_generation = generation;
            }
        }
        // A record without a status (status was lost): the record's bundle was applied.
        (Err(_), Some(record)) => set_installed(&mut status, record, generation),
        _ => {
            status.install = None;
            set_condition(
                &mut status.conditions,
                TYPE_INSTALLED,
                ConditionStatus::False,
                REASON_FAILED,
                "No bundle installed",
                generation,
            );
        }
    }

    let conditions = &mut status.conditions;
    match &outcome.result {
        Ok(Progress::Done) => set_condition(
            conditions,
            TYPE_PROGRESSING,
            ConditionStatus::True,
            REASON_SUCCEEDED,
            "Desired state reached",
            generation,
        ),
        Ok(Progress::RollingOut(waiting)) => set_condition(
            conditions,
            TYPE_PROGRESSING,
            ConditionStatus::True,
            REASON_ROLLING_OUT,
            waiting,
            generation,
        ),
        Err(error) => {
            let message = sanitize_network_error(&error.to_string());
            let status = ConditionStatus::from_bool(!error.is_terminal());
            set_condition(
                conditions,
                TYPE_PROGRESSING,
                status,
                error.reason(),
                &message,
                generation,
            );
        }
    }

    for condition in &outcome.deprecation {
        let status = match condition.status {
            "True" => ConditionStatus::True,
            "False" => ConditionStatus::False,
            _ => ConditionStatus::Unknown,
        };
        set_condition(
            conditions,
            condition.type_,
            status,
            condition.reason,
            &condition.message,
            generation,
        );
    }
    status
}

/// Installed=True for the record's bundle, as upstream words it.
fn set_installed(status: &mut ClusterExtensionStatus, record: &InstalledRevision, generation: Option<i64>) {
    status.install = Some(ClusterExtensionInstallStatus {
        bundle: BundleMetadata {
            name: record.bundle_name.clone(),
            version: record.bundle_version.clone(),
            release: None,
        },
    });
    let message = format!("Installed bundle {} successfully", record.image);
    set_condition(
        &mut status.conditions,
        TYPE_INSTALLED,
        ConditionStatus::True,
        REASON_SUCCEEDED,
        &message,
        generation,
    );
}
