//! ClusterExtension status from a reconcile's outcome, with upstream's reasons and messages.
//! Pure: the clock is passed in.

use k8s_openapi::jiff::Timestamp;
use olmv1_api::v1::{
    BundleMetadata, ClusterExtension, ClusterExtensionInstallStatus, ClusterExtensionStatus,
    conditions::{
        ConditionStatus, REASON_ABSENT, REASON_FAILED, REASON_OPERATOR_CONDITION_NOT_UPGRADEABLE,
        REASON_PROGRESS_DEADLINE_EXCEEDED, REASON_RETRYING, REASON_ROLLING_OUT, REASON_SUCCEEDED,
        TYPE_INSTALLED, TYPE_PROGRESSING,
    },
};

use super::{
    StepError,
    operator_conditions::HeldUpgrade,
    steps::{Outcome, Progress},
};
use crate::{
    apply::revision::InstalledRevision,
    controller::status::{sanitize_network_error, set_condition},
};

/// The Progressing message while the installed revision cannot be read, as upstream's.
const RETRYING_TO_GET_INSTALLED: &str = "retrying to get installed bundle";
/// The Installed message when nothing is installed, as upstream's.
const NO_BUNDLE_INSTALLED: &str = "No bundle installed";

/// The status after a reconcile, at `now`. Conditions that do not change keep their transition
/// times.
pub fn compute(ext: &ClusterExtension, outcome: &Outcome, now: Timestamp) -> ClusterExtensionStatus {
    let generation = ext.metadata.generation;
    let mut status = ext.status.clone().unwrap_or_default();
    set_installed(&mut status, outcome, generation, now);
    set_progressing(
        &mut status,
        &outcome.result,
        outcome.held.as_ref(),
        generation,
        now,
    );
    for condition in &outcome.deprecation {
        set_condition(
            &mut status.conditions,
            condition.type_,
            condition.status,
            condition.reason,
            &condition.message,
            generation,
            now,
        );
    }
    status
}

/// Installed, as upstream's `setInstalledStatusFromRevisionStates`: the record's bundle once it is
/// rolled out; while a newer revision rolls out or a step fails, what was installed stays
/// installed (it keeps running). With nothing installed: `Absent` while a first install rolls out
/// healthily, `Failed` when nothing is rolling out or the latest attempt failed.
fn set_installed(
    status: &mut ClusterExtensionStatus,
    outcome: &Outcome,
    generation: Option<i64>,
    now: Timestamp,
) {
    let previously_installed = status.install.is_some()
        && status
            .conditions
            .iter()
            .any(|c| c.type_ == TYPE_INSTALLED && c.status == ConditionStatus::True.as_str());
    let (condition, reason, message) = match (&outcome.result, &outcome.record) {
        (Err(StepError::ReadInstalled(e)), _) => {
            status.install = None;
            (ConditionStatus::Unknown, REASON_FAILED, e.to_string())
        }
        (Ok(Progress::Done), Some(record)) => {
            status.install = Some(install_status(record));
            let message = format!("Installed bundle {} successfully", record.image);
            (ConditionStatus::True, REASON_SUCCEEDED, message)
        }
        _ if previously_installed => {
            // Keep the condition, refreshing only its observedGeneration.
            if let Some(installed) = status.conditions.iter_mut().find(|c| c.type_ == TYPE_INSTALLED) {
                installed.observed_generation = generation;
            }
            return;
        }
        (result, _) => {
            status.install = None;
            let reason = match result {
                Ok(Progress::RollingOut(_) | Progress::DeadlineExceeded { .. }) => REASON_ABSENT,
                _ => REASON_FAILED,
            };
            (ConditionStatus::False, reason, NO_BUNDLE_INSTALLED.to_string())
        }
    };
    set_condition(
        &mut status.conditions,
        TYPE_INSTALLED,
        condition,
        reason,
        &message,
        generation,
        now,
    );
}

/// Progressing, as upstream's `setStatusProgressing`: Succeeded, RollingOut, Retrying with the
/// error, or False with a terminal error's reason; olmv1's `OperatorConditionNotUpgradeable`
/// (True: it goes once the OperatorCondition allows it) when the installed bundle is in place and
/// an upgrade is held.
fn set_progressing(
    status: &mut ClusterExtensionStatus,
    result: &Result<Progress, StepError>,
    held: Option<&HeldUpgrade>,
    generation: Option<i64>,
    now: Timestamp,
) {
    let (condition, reason, message) = match result {
        Ok(Progress::Done) if let Some(held) = held => (
            ConditionStatus::True,
            REASON_OPERATOR_CONDITION_NOT_UPGRADEABLE,
            held.to_string(),
        ),
        Ok(Progress::Done) => (
            ConditionStatus::True,
            REASON_SUCCEEDED,
            "Desired state reached".to_string(),
        ),
        Ok(Progress::RollingOut(waiting)) => (ConditionStatus::True, REASON_ROLLING_OUT, waiting.clone()),
        Ok(Progress::DeadlineExceeded { minutes, waiting }) => (
            ConditionStatus::False,
            REASON_PROGRESS_DEADLINE_EXCEEDED,
            deadline_exceeded_message(*minutes, waiting),
        ),
        Err(StepError::ReadInstalled(_)) => (
            ConditionStatus::True,
            REASON_RETRYING,
            RETRYING_TO_GET_INSTALLED.to_string(),
        ),
        Err(error) => (
            ConditionStatus::from_bool(!error.is_terminal()),
            error.reason(),
            sanitize_network_error(&error.to_string()),
        ),
    };
    set_condition(
        &mut status.conditions,
        TYPE_PROGRESSING,
        condition,
        reason,
        &message,
        generation,
        now,
    );
}

/// Upstream's message for a revision past its deadline, with what the rollout waits for as the
/// last status.
fn deadline_exceeded_message(minutes: i32, waiting: &str) -> String {
    format!("Revision has not rolled out for {minutes} minute(s). Last status: {waiting}")
}

/// The Progressing message of a stuck rollout (for its Event).
pub fn progressing_message(result: &Result<Progress, StepError>) -> Option<String> {
    match result {
        Ok(Progress::DeadlineExceeded { minutes, waiting }) => {
            Some(deadline_exceeded_message(*minutes, waiting))
        }
        _ => None,
    }
}

fn install_status(record: &InstalledRevision) -> ClusterExtensionInstallStatus {
    ClusterExtensionInstallStatus {
        bundle: BundleMetadata {
            name: record.bundle_name.clone(),
            version: record.bundle_version.clone(),
            release: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use olmv1_api::v1::conditions::{
        CLUSTER_EXTENSION_CONDITION_TYPES, MAX_CONDITION_MESSAGE_LEN, REASON_BLOCKED,
        REASON_INVALID_CONFIGURATION, TRUNCATED_MESSAGE_SUFFIX,
    };

    use super::*;
    use crate::{
        apply::revision::RecordError,
        bundle::render::RenderError,
        controller::cluster_extension::error::BundleError,
        resolve::{self, ResolveError},
    };

    const IMAGE: &str = "registry.local/bundle@sha256:aaaa";

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).expect("a valid timestamp")
    }

    fn extension(generation: i64) -> ClusterExtension {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "olm.operatorframework.io/v1",
            "kind": "ClusterExtension",
            "metadata": {"name": "ext", "generation": generation},
            "spec": {
                "namespace": "ns",
                "serviceAccount": {"name": "installer"},
                "source": {"sourceType": "Catalog", "catalog": {"packageName": "p"}},
            },
        }))
        .expect("a valid ClusterExtension")
    }

    fn record(version: &str) -> InstalledRevision {
        InstalledRevision {
            revision: 1,
            package: "p".into(),
            bundle_name: format!("p.v{version}"),
            bundle_version: version.into(),
            image: IMAGE.into(),
            catalog: Some("c".into()),
            properties: vec![],
            objects: vec![],
            generation: Some(1),
            ready: None,
            rollout: None,
        }
    }

    fn outcome(record: Option<InstalledRevision>, result: Result<Progress, StepError>) -> Outcome {
        let installed = record.as_ref().map(|r| r.bundle_name.clone());
        Outcome {
            record,
            deprecation: resolve::deprecation_conditions(None, true, &[], installed.as_deref()),
            result,
            held: None,
        }
    }

    fn retryable() -> StepError {
        StepError::Resolve(ResolveError::UpgradeEdges(
            "read tcp 10.0.0.1:5->10.0.0.2:6: reset".into(),
        ))
    }

    fn condition<'a>(status: &'a ClusterExtensionStatus, type_: &str) -> &'a Condition {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
            .unwrap_or_else(|| panic!("condition {type_} is set"))
    }

    fn summary(status: &ClusterExtensionStatus, type_: &str) -> (String, String, String) {
        let c = condition(status, type_);
        (c.status.clone(), c.reason.clone(), c.message.clone())
    }

    fn triple(status: &str, reason: &str, message: &str) -> (String, String, String) {
        (status.into(), reason.into(), message.into())
    }

    /// An extension whose status says `version` is installed.
    fn installed_extension(version: &str, generation: i64) -> ClusterExtension {
        let mut ext = extension(generation);
        ext.status = Some(compute(
            &ext,
            &outcome(Some(record(version)), Ok(Progress::Done)),
            at(1),
        ));
        ext
    }

    #[test]
    fn an_extension_naming_no_service_account_is_blocked_and_what_was_installed_stays() {
        let no_account = || {
            StepError::Identity(crate::apply::identity::IdentityError::NoServiceAccount {
                extension: "ext".into(),
            })
        };
        let status = compute(&extension(1), &outcome(None, Err(no_account())), at(1));
        let (progressing, reason, message) = summary(&status, TYPE_PROGRESSING);
        assert_eq!((progressing.as_str(), reason.as_str()), ("False", REASON_BLOCKED));
        assert!(
            message.starts_with(
                "ClusterExtension \"ext\" is not installed because it sets no spec.serviceAccount: "
            ) && message.contains("olmv1 rbac ext")
                && message.contains("--install-identity controller")
                && !message.contains('\n'),
            "{message}"
        );
        assert_eq!(
            summary(&status, TYPE_INSTALLED),
            triple("False", REASON_FAILED, NO_BUNDLE_INSTALLED)
        );
        // Cleared after an install: the installed bundle stays installed (and running).
        let mut ext = installed_extension("1.0.0", 2);
        ext.metadata.generation = Some(3);
        let status = compute(&ext, &outcome(Some(record("1.0.0")), Err(no_account())), at(2));
        assert_eq!(condition(&status, TYPE_INSTALLED).status, "True");
        assert_eq!(condition(&status, TYPE_PROGRESSING).reason, REASON_BLOCKED);
        assert!(status.install.is_some());
    }

    /// A held upgrade: the installed bundle stays Installed, Progressing=True says what holds
    /// it in the operator's own words; a rollout or an error of the installed bundle is said
    /// first; released, Succeeded again.
    #[test]
    fn a_held_upgrade_is_progressing_with_the_operators_message_and_the_installed_bundle_stays() {
        let held = HeldUpgrade {
            bundle: "p.v2.0.0".into(),
            version: "2.0.0".into(),
            condition: "ns/p.v1.0.0".into(),
            hold: olmv1_api::operator_condition::Hold::Operator {
                reason: "Migrating".into(),
                message: "3 of 7 shards moved".into(),
            },
        };
        let ext = installed_extension("1.0.0", 2);
        let mut held_outcome = outcome(Some(record("1.0.0")), Ok(Progress::Done));
        held_outcome.held = Some(held.clone());
        let status = compute(&ext, &held_outcome, at(2));
        assert_eq!(
            summary(&status, TYPE_PROGRESSING),
            triple(
                "True",
                REASON_OPERATOR_CONDITION_NOT_UPGRADEABLE,
                "upgrade to p.v2.0.0 2.0.0 held: OperatorCondition ns/p.v1.0.0: the operator says \
                 Upgradeable=False (Migrating): 3 of 7 shards moved"
            )
        );
        assert_eq!(condition(&status, TYPE_INSTALLED).status, "True");
        assert_eq!(status.install.as_ref().unwrap().bundle.version, "1.0.0");
        let mut rolling = super::super::steps::Outcome {
            result: Ok(Progress::RollingOut("Deployment ns/d".into())),
            ..held_outcome
        };
        rolling.held = Some(held);
        let status = compute(&ext, &rolling, at(3));
        assert_eq!(condition(&status, TYPE_PROGRESSING).reason, REASON_ROLLING_OUT);
        let released = compute(&ext, &outcome(Some(record("1.0.0")), Ok(Progress::Done)), at(4));
        assert_eq!(condition(&released, TYPE_PROGRESSING).reason, REASON_SUCCEEDED);
    }

    #[test]
    fn a_rolled_out_revision_is_installed_and_progressing_succeeded() {
        let status = compute(
            &extension(3),
            &outcome(Some(record("1.0.0")), Ok(Progress::Done)),
            at(1),
        );
        assert_eq!(
            summary(&status, TYPE_INSTALLED),
            triple(
                "True",
                REASON_SUCCEEDED,
                &format!("Installed bundle {IMAGE} successfully")
            )
        );
        let bundle = &status.install.as_ref().expect("install is set").bundle;
        assert_eq!(
            (bundle.name.as_str(), bundle.version.as_str()),
            ("p.v1.0.0", "1.0.0")
        );
        assert_eq!(
            summary(&status, TYPE_PROGRESSING),
            triple("True", REASON_SUCCEEDED, "Desired state reached")
        );
    }

    #[test]
    fn a_first_install_rolling_out_is_absent_not_failed() {
        let rolling = Ok(Progress::RollingOut("waiting for Deployment ns/op".into()));
        let status = compute(&extension(1), &outcome(Some(record("1.0.0")), rolling), at(1));
        assert_eq!(
            summary(&status, TYPE_INSTALLED),
            triple("False", REASON_ABSENT, NO_BUNDLE_INSTALLED)
        );
        assert_eq!(status.install, None);
        assert_eq!(
            summary(&status, TYPE_PROGRESSING),
            triple("True", REASON_ROLLING_OUT, "waiting for Deployment ns/op")
        );
    }

    #[test]
    fn a_rollout_past_its_deadline_is_not_progressing_and_keeps_what_is_installed() {
        let stuck = || {
            Ok(Progress::DeadlineExceeded {
                minutes: 10,
                waiting: "Deployment ns/op: 0 of 1 updated replicas available".into(),
            })
        };
        let expected = triple(
            "False",
            REASON_PROGRESS_DEADLINE_EXCEEDED,
            "Revision has not rolled out for 10 minute(s). Last status: Deployment ns/op: 0 of 1 updated replicas available",
        );
        // A first install: nothing installed yet, and not failed either.
        let status = compute(&extension(1), &outcome(Some(record("1.0.0")), stuck()), at(1));
        assert_eq!(summary(&status, TYPE_PROGRESSING), expected);
        assert_eq!(
            summary(&status, TYPE_INSTALLED),
            triple("False", REASON_ABSENT, NO_BUNDLE_INSTALLED)
        );
        // An upgrade: the installed bundle stays installed.
        let mut upgraded = installed_extension("1.0.0", 1);
        upgraded.metadata.generation = Some(2);
        let status = compute(&upgraded, &outcome(Some(record("1.1.0")), stuck()), at(5));
        assert_eq!(summary(&status, TYPE_PROGRESSING), expected);
        assert_eq!(condition(&status, TYPE_INSTALLED).status, "True");
        assert_eq!(status.install.as_ref().unwrap().bundle.version, "1.0.0");
        // Ready later: cleared.
        upgraded.status = Some(status);
        let status = compute(
            &upgraded,
            &outcome(Some(record("1.1.0")), Ok(Progress::Done)),
            at(9),
        );
        assert_eq!(
            summary(&status, TYPE_PROGRESSING),
            triple("True", REASON_SUCCEEDED, "Desired state reached")
        );
        assert_eq!(status.install.as_ref().unwrap().bundle.version, "1.1.0");
    }

    #[test]
    fn a_failure_with_nothing_installed_is_failed() {
        // Nothing rolled out at all.
        let status = compute(&extension(1), &outcome(None, Err(retryable())), at(1));
        assert_eq!(
            summary(&status, TYPE_INSTALLED),
            triple("False", REASON_FAILED, NO_BUNDLE_INSTALLED)
        );
        // A first rollout began, then its latest attempt failed.
        let mut ext = extension(1);
        let rolling = Ok(Progress::RollingOut("waiting".into()));
        ext.status = Some(compute(&ext, &outcome(Some(record("1.0.0")), rolling), at(1)));
        let status = compute(&ext, &outcome(Some(record("1.0.0")), Err(retryable())), at(2));
        assert_eq!(
            summary(&status, TYPE_INSTALLED),
            triple("False", REASON_FAILED, NO_BUNDLE_INSTALLED)
        );
        assert_eq!(status.install, None);
    }

    #[test]
    fn the_installed_bundle_stays_installed_while_an_upgrade_rolls_out_or_fails() {
        let ext = installed_extension("1.0.0", 1);
        let before = condition(ext.status.as_ref().unwrap(), TYPE_INSTALLED).clone();
        let mut upgraded = ext.clone();
        upgraded.metadata.generation = Some(2);
        for result in [Ok(Progress::RollingOut("waiting".into())), Err(retryable())] {
            let status = compute(&upgraded, &outcome(Some(record("1.1.0")), result), at(5));
            let installed = condition(&status, TYPE_INSTALLED);
            assert_eq!(
                (
                    &installed.status,
                    &installed.message,
                    &installed.last_transition_time
                ),
                (&before.status, &before.message, &before.last_transition_time)
            );
            assert_eq!(installed.observed_generation, Some(2));
            assert_eq!(status.install.as_ref().unwrap().bundle.version, "1.0.0");
        }
        // Once the upgrade is rolled out, the new bundle is installed.
        let status = compute(
            &upgraded,
            &outcome(Some(record("1.1.0")), Ok(Progress::Done)),
            at(6),
        );
        assert_eq!(status.install.as_ref().unwrap().bundle.version, "1.1.0");
    }

    #[test]
    fn an_unreadable_record_makes_installed_unknown_and_retries() {
        let error = RecordError::Corrupt {
            extension: "ext".into(),
            reason: "not JSON".into(),
        };
        let message = error.to_string();
        let ext = installed_extension("1.0.0", 1);
        let status = compute(&ext, &outcome(None, Err(StepError::ReadInstalled(error))), at(2));
        assert_eq!(
            summary(&status, TYPE_INSTALLED),
            triple("Unknown", REASON_FAILED, &message)
        );
        assert_eq!(status.install, None);
        assert_eq!(
            summary(&status, TYPE_PROGRESSING),
            triple("True", REASON_RETRYING, RETRYING_TO_GET_INSTALLED)
        );
    }

    #[test]
    fn a_retryable_error_is_retrying_with_network_noise_stripped() {
        let status = compute(&extension(1), &outcome(None, Err(retryable())), at(1));
        assert_eq!(
            summary(&status, TYPE_PROGRESSING),
            triple(
                "True",
                REASON_RETRYING,
                "error walking catalogs: error finding upgrade edges: reset"
            )
        );
    }

    #[test]
    fn a_terminal_error_is_blocked_or_carries_its_own_reason() {
        let invalid_range = StepError::Resolve(ResolveError::InvalidVersionRange {
            range: "foobar".into(),
            message: "improper constraint: \"foobar\"".into(),
        });
        let status = compute(&extension(1), &outcome(None, Err(invalid_range)), at(1));
        assert_eq!(
            summary(&status, TYPE_PROGRESSING),
            triple(
                "False",
                REASON_BLOCKED,
                "desired version range \"foobar\" is invalid: improper constraint: \"foobar\""
            )
        );
        let bad_config = StepError::Bundle {
            bundle: "p.v1.0.0".into(),
            version: "1.0.0".into(),
            source: Box::new(BundleError::Render(RenderError::InvalidConfiguration(
                "watchNamespace is required".into(),
            ))),
        };
        let status = compute(&extension(1), &outcome(None, Err(bad_config)), at(1));
        assert_eq!(
            summary(&status, TYPE_PROGRESSING),
            triple(
                "False",
                REASON_INVALID_CONFIGURATION,
                "error for resolved bundle \"p.v1.0.0\" with version \"1.0.0\": invalid ClusterExtension configuration: invalid configuration: watchNamespace is required"
            )
        );
    }

    #[test]
    fn every_condition_is_set_with_the_generation_and_the_deprecations_of_the_outcome() {
        let done = outcome(Some(record("1.0.0")), Ok(Progress::Done));
        let status = compute(&extension(7), &done, at(1));
        for type_ in CLUSTER_EXTENSION_CONDITION_TYPES {
            assert_eq!(condition(&status, type_).observed_generation, Some(7), "{type_}");
        }
        assert_eq!(status.conditions.len(), CLUSTER_EXTENSION_CONDITION_TYPES.len());
        for expected in &done.deprecation {
            assert_eq!(
                summary(&status, expected.type_),
                triple(expected.status.as_str(), expected.reason, &expected.message)
            );
        }
    }

    #[test]
    fn transition_times_come_from_the_clock_and_stay_while_a_status_holds() {
        let ext = installed_extension("1.0.0", 1);
        let first = ext.status.as_ref().unwrap();
        assert_eq!(condition(first, TYPE_INSTALLED).last_transition_time, Time(at(1)));
        // Same outcome later: nothing moves, so the status is equal and is not written again.
        let again = compute(&ext, &outcome(Some(record("1.0.0")), Ok(Progress::Done)), at(9));
        assert_eq!(&again, first);
        // Progressing changes status (True -> False): only its time moves.
        let blocked = StepError::Resolve(ResolveError::NoCatalogSource);
        let status = compute(&ext, &outcome(Some(record("1.0.0")), Err(blocked)), at(9));
        assert_eq!(
            condition(&status, TYPE_PROGRESSING).last_transition_time,
            Time(at(9))
        );
        assert_eq!(
            condition(&status, TYPE_INSTALLED).last_transition_time,
            Time(at(1))
        );
    }

    #[test]
    fn long_messages_are_cut_as_upstream_cuts_them() {
        let long = StepError::Resolve(ResolveError::UpgradeEdges(
            "x".repeat(2 * MAX_CONDITION_MESSAGE_LEN),
        ));
        let status = compute(&extension(1), &outcome(None, Err(long)), at(1));
        let message = &condition(&status, TYPE_PROGRESSING).message;
        assert_eq!(message.len(), MAX_CONDITION_MESSAGE_LEN);
        assert!(message.ends_with(TRUNCATED_MESSAGE_SUFFIX));
    }
}
