//! The four deprecation conditions of a ClusterExtension (`Deprecated`, `PackageDeprecated`,
//! `ChannelDeprecated`, `BundleDeprecated`), computed as upstream's `SetDeprecationStatus` does.

use olmv1_api::v1::conditions::{
    ConditionStatus, REASON_ABSENT, REASON_DEPRECATED, REASON_DEPRECATION_STATUS_UNKNOWN,
    REASON_NOT_DEPRECATED, TYPE_BUNDLE_DEPRECATED, TYPE_CHANNEL_DEPRECATED, TYPE_DEPRECATED,
    TYPE_PACKAGE_DEPRECATED,
};

use crate::catalog::{Deprecation, SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_PACKAGE};

/// A condition as plain data; the controller turns it into a `metav1.Condition`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionData {
    /// Condition type, e.g. `PackageDeprecated`.
    pub type_: &'static str,
    /// True (deprecated), False (not) or Unknown (no catalog data, or no bundle installed).
    pub status: ConditionStatus,
    /// Condition reason.
    pub reason: &'static str,
    /// Condition message.
    pub message: String,
}

const UNKNOWN_MESSAGE: &str = "deprecation status unknown: catalog data unavailable";
const NO_BUNDLE_MESSAGE: &str = "no bundle installed yet";

fn condition(
    type_: &'static str,
    status: ConditionStatus,
    reason: &'static str,
    message: &str,
) -> ConditionData {
    ConditionData {
        type_,
        status,
        reason,
        message: message.to_string(),
    }
}

/// Computes `[Deprecated, PackageDeprecated, ChannelDeprecated, BundleDeprecated]`.
///
/// `has_catalog_data` is false when resolution failed without catalog data (the conditions are
/// then Unknown); `channels` are the requested channels (empty = all count); `installed_bundle`
/// is the name of the installed bundle, if any (only its deprecation counts).
pub fn deprecation_conditions(
    deprecation: Option<&Deprecation>,
    has_catalog_data: bool,
    channels: &[String],
    installed_bundle: Option<&str>,
) -> [ConditionData; 4] {
    let absent = condition(
        TYPE_BUNDLE_DEPRECATED,
        ConditionStatus::Unknown,
        REASON_ABSENT,
        NO_BUNDLE_MESSAGE,
    );
    if !has_catalog_data {
        let unknown = |t| {
            condition(
                t,
                ConditionStatus::Unknown,
                REASON_DEPRECATION_STATUS_UNKNOWN,
                UNKNOWN_MESSAGE,
            )
        };
        let bundle = if installed_bundle.is_some() {
            unknown(TYPE_BUNDLE_DEPRECATED)
        } else {
            absent
        };
        return [
            unknown(TYPE_DEPRECATED),
            unknown(TYPE_PACKAGE_DEPRECATED),
            unknown(TYPE_CHANNEL_DEPRECATED),
            bundle,
        ];
    }
    let entries = deprecation.map(|d| d.entries.as_slice()).unwrap_or_default();
    // Upstream counts messages, not entries: an entry with an empty message deprecates nothing.
    let (mut package, mut channel, mut bundle) = (Vec::new(), Vec::new(), Vec::new());
    for e in entries.iter().filter(|e| !e.message.is_empty()) {
        let (hit, messages) = match e.reference.schema.as_str() {
            SCHEMA_PACKAGE => (true, &mut package),
            SCHEMA_CHANNEL => (
                channels.is_empty() || channels.contains(&e.reference.name),
                &mut channel,
            ),
            SCHEMA_BUNDLE => (installed_bundle == Some(e.reference.name.as_str()), &mut bundle),
            _ => (false, &mut package),
        };
        if hit {
            messages.push(e.message.as_str());
        }
    }
    let one = |t, messages: &Vec<&str>, not: &str| {
        if messages.is_empty() {
            condition(t, ConditionStatus::False, REASON_NOT_DEPRECATED, not)
        } else {
            condition(t, ConditionStatus::True, REASON_DEPRECATED, &messages.join("\n"))
        }
    };
    let package_c = one(TYPE_PACKAGE_DEPRECATED, &package, "package not deprecated");
    let channel_c = one(TYPE_CHANNEL_DEPRECATED, &channel, "channel not deprecated");
    let bundle_c = if installed_bundle.is_some() {
        one(TYPE_BUNDLE_DEPRECATED, &bundle, "bundle not deprecated")
    } else {
        absent
    };
    let all_messages: Vec<&str> = package.iter().chain(&channel).chain(&bundle).copied().collect();
    let rollup = if all_messages.is_empty() {
        condition(
            TYPE_DEPRECATED,
            ConditionStatus::False,
            REASON_NOT_DEPRECATED,
            "not deprecated",
        )
    } else {
        condition(
            TYPE_DEPRECATED,
            ConditionStatus::True,
            REASON_DEPRECATED,
            &all_messages.join("\n"),
        )
    };
    [rollup, package_c, channel_c, bundle_c]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{DeprecationEntry, PackageScopedReference};

    fn entry(schema: &str, name: &str, message: &str) -> DeprecationEntry {
        DeprecationEntry {
            reference: PackageScopedReference {
                schema: schema.into(),
                name: name.into(),
            },
            message: message.into(),
        }
    }

    #[test]
    fn unknown_without_catalog_data() {
        let c = deprecation_conditions(None, false, &[], None);
        assert_eq!(c[0].status, ConditionStatus::Unknown);
        assert_eq!(c[0].message, UNKNOWN_MESSAGE);
        assert_eq!(
            (c[3].reason, c[3].message.as_str()),
            (REASON_ABSENT, NO_BUNDLE_MESSAGE)
        );
        let c = deprecation_conditions(None, false, &[], Some("b"));
        assert_eq!(c[3].reason, REASON_DEPRECATION_STATUS_UNKNOWN);
    }

    #[test]
    fn channel_and_bundle_entries_count_only_when_requested_or_installed() {
        let dep = Deprecation {
            schema: "olm.deprecations".into(),
            package: "p".into(),
            entries: vec![
                entry("olm.package", "", "package p is deprecated"),
                entry("olm.channel", "alpha", "alpha is deprecated"),
                entry("olm.bundle", "p.v1", "p.v1 is deprecated"),
            ],
        };
        let c = deprecation_conditions(Some(&dep), true, &["beta".to_string()], Some("p.v2"));
        assert_eq!(
            (c[1].status, c[2].status, c[3].status),
            (
                ConditionStatus::True,
                ConditionStatus::False,
                ConditionStatus::False
            )
        );
        assert_eq!(c[2].message, "channel not deprecated");
        assert_eq!(c[0].message, "package p is deprecated");
        let c = deprecation_conditions(Some(&dep), true, &[], Some("p.v1"));
        assert_eq!(
            c[0].message,
            "package p is deprecated\nalpha is deprecated\np.v1 is deprecated"
        );
        let c = deprecation_conditions(None, true, &[], None);
        assert_eq!(
            (c[0].status, c[0].message.as_str()),
            (ConditionStatus::False, "not deprecated")
        );
        assert_eq!(c[3].reason, REASON_ABSENT);
    }

    #[test]
    fn an_entry_with_an_empty_message_deprecates_nothing() {
        let dep = Deprecation {
            schema: "olm.deprecations".into(),
            package: "p".into(),
            entries: vec![
                entry("olm.package", "", ""),
                entry("olm.channel", "stable", ""),
                entry("olm.bundle", "p.v1", ""),
            ],
        };
        let c = deprecation_conditions(Some(&dep), true, &[], Some("p.v1"));
        for (condition, not) in c.iter().zip([
            "not deprecated",
            "package not deprecated",
            "channel not deprecated",
            "bundle not deprecated",
        ]) {
            assert_eq!(
                (condition.status, condition.reason, condition.message.as_str()),
                (ConditionStatus::False, REASON_NOT_DEPRECATED, not),
                "{}",
                condition.type_
            );
        }
        // One non-empty message among empty ones: only its level and the roll-up are True.
        let mut dep = dep;
        dep.entries
            .push(entry("olm.channel", "stable", "stable is deprecated"));
        let c = deprecation_conditions(Some(&dep), true, &[], Some("p.v1"));
        let statuses = c.iter().map(|c| c.status).collect::<Vec<_>>();
        assert_eq!(
            statuses,
            [
                ConditionStatus::True,
                ConditionStatus::False,
                ConditionStatus::True,
                ConditionStatus::False
            ]
        );
        assert_eq!(c[0].message, "stable is deprecated");
    }
}
