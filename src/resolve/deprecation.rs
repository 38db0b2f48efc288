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
    if !has_catalog_data {
        return unknown_conditions(installed_bundle);
    }
    let [package, channel, bundle] = messages_by_level(deprecation, channels, installed_bundle);
    let level = |t, messages: &[&str], not: &str| {
        if messages.is_empty() {
            condition(t, ConditionStatus::False, REASON_NOT_DEPRECATED, not)
        } else {
            condition(t, ConditionStatus::True, REASON_DEPRECATED, &messages.join("\n"))
        }
    };
    let bundle_condition = match installed_bundle {
        Some(_) => level(TYPE_BUNDLE_DEPRECATED, &bundle, "bundle not deprecated"),
        None => absent_bundle(),
    };
    let all: Vec<&str> = [package.as_slice(), &channel, &bundle].concat();
    [
        level(TYPE_DEPRECATED, &all, "not deprecated"),
        level(TYPE_PACKAGE_DEPRECATED, &package, "package not deprecated"),
        level(TYPE_CHANNEL_DEPRECATED, &channel, "channel not deprecated"),
        bundle_condition,
    ]
}

/// The messages that count at each level: package, channel, bundle. Upstream counts messages,
/// not entries: an entry with an empty message deprecates nothing.
fn messages_by_level<'a>(
    deprecation: Option<&'a Deprecation>,
    channels: &[String],
    installed_bundle: Option<&str>,
) -> [Vec<&'a str>; 3] {
    let mut levels = [Vec::new(), Vec::new(), Vec::new()];
    let entries = deprecation.map(|d| d.entries.as_slice()).unwrap_or_default();
    for e in entries.iter().filter(|e| !e.message.is_empty()) {
        let name = e.reference.name.as_str();
        let level = match e.reference.schema.as_str() {
            SCHEMA_PACKAGE => 0,
            SCHEMA_CHANNEL if channels.is_empty() || channels.iter().any(|c| c == name) => 1,
            SCHEMA_BUNDLE if installed_bundle == Some(name) => 2,
            _ => continue,
        };
        levels[level].push(e.message.as_str());
    }
    levels
}

/// Without catalog data everything is Unknown (BundleDeprecated Absent when nothing is installed).
fn unknown_conditions(installed_bundle: Option<&str>) -> [ConditionData; 4] {
    let unknown = |t| {
        condition(
            t,
            ConditionStatus::Unknown,
            REASON_DEPRECATION_STATUS_UNKNOWN,
            UNKNOWN_MESSAGE,
        )
    };
    [
        unknown(TYPE_DEPRECATED),
        unknown(TYPE_PACKAGE_DEPRECATED),
        unknown(TYPE_CHANNEL_DEPRECATED),
        match installed_bundle {
            Some(_) => unknown(TYPE_BUNDLE_DEPRECATED),
            None => absent_bundle(),
        },
    ]
}

fn absent_bundle() -> ConditionData {
    condition(
        TYPE_BUNDLE_DEPRECATED,
        ConditionStatus::Unknown,
        REASON_ABSENT,
        NO_BUNDLE_MESSAGE,
    )
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
