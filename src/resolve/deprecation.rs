//! The four deprecation conditions of a ClusterExtension (`Deprecated`, `PackageDeprecated`,
//! `ChannelDeprecated`, `BundleDeprecated`), computed as upstream's `SetDeprecationStatus` does.

use olmv1_api::v1::conditions::{
    REASON_ABSENT, REASON_DEPRECATED, REASON_DEPRECATION_STATUS_UNKNOWN, REASON_NOT_DEPRECATED,
    TYPE_BUNDLE_DEPRECATED, TYPE_CHANNEL_DEPRECATED, TYPE_DEPRECATED, TYPE_PACKAGE_DEPRECATED,
};

use crate::catalog::{Deprecation, SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_PACKAGE};

/// A condition as plain data; the controller turns it into a `metav1.Condition`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionData {
    /// Condition type, e.g. `PackageDeprecated`.
    pub type_: &'static str,
    /// `"True"`, `"False"` or `"Unknown"`.
    pub status: &'static str,
    /// Condition reason.
    pub reason: &'static str,
    /// Condition message.
    pub message: String,
}

const UNKNOWN_MESSAGE: &str = "deprecation status unknown: catalog data unavailable";
const NO_BUNDLE_MESSAGE: &str = "no bundle installed yet";

fn condition(
    type_: &'static str,
    status: &'static str,
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
        "Unknown",
        REASON_ABSENT,
        NO_BUNDLE_MESSAGE,
    );
    if !has_catalog_data {
        let unknown = |t| condition(t, "Unknown", REASON_DEPRECATION_STATUS_UNKNOWN, UNKNOWN_MESSAGE);
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
    let (mut package, mut channel, mut bundle) =
        ((false, Vec::new()), (false, Vec::new()), (false, Vec::new()));
    for e in entries {
        let (hit, slot) = match e.reference.schema.as_str() {
            SCHEMA_PACKAGE => (true, &mut package),
            SCHEMA_CHANNEL => (
                channels.is_empty() || channels.contains(&e.reference.name),
                &mut channel,
            ),
            SCHEMA_BUNDLE => (installed_bundle == Some(e.reference.name.as_str()), &mut bundle),
            _ => (false, &mut package),
        };
        if hit {
            slot.0 = true;
            if !e.message.is_empty() {
                slot.1.push(e.message.as_str());
            }
        }
    }
    let one = |t, (deprecated, messages): &(bool, Vec<&str>), not: &str| {
        if *deprecated {
            condition(t, "True", REASON_DEPRECATED, &messages.join("\n"))
        } else {
            condition(t, "False", REASON_NOT_DEPRECATED, not)
        }
    };
    let package_c = one(TYPE_PACKAGE_DEPRECATED, &package, "package not deprecated");
    let channel_c = one(TYPE_CHANNEL_DEPRECATED, &channel, "channel not deprecated");
    let bundle_c = if installed_bundle.is_some() {
        one(TYPE_BUNDLE_DEPRECATED, &bundle, "bundle not deprecated")
    } else {
        absent
    };
    let any = package.0 || channel.0 || (installed_bundle.is_some() && bundle.0);
    let all_messages: Vec<&str> = package
        .1
        .iter()
        .chain(&channel.1)
        .chain(&bundle.1)
        .copied()
        .collect();
    let rollup = if any {
        condition(
            TYPE_DEPRECATED,
            "True",
            REASON_DEPRECATED,
            &all_messages.join("\n"),
        )
    } else {
        condition(TYPE_DEPRECATED, "False", REASON_NOT_DEPRECATED, "not deprecated")
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
        assert_eq!(c[0].status, "Unknown");
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
            ("True", "False", "False")
        );
        assert_eq!(c[2].message, "channel not deprecated");
        assert_eq!(c[0].message, "package p is deprecated");
        let c = deprecation_conditions(Some(&dep), true, &[], Some("p.v1"));
        assert_eq!(
            c[0].message,
            "package p is deprecated\nalpha is deprecated\np.v1 is deprecated"
        );
        let c = deprecation_conditions(None, true, &[], None);
        assert_eq!((c[0].status, c[0].message.as_str()), ("False", "not deprecated"));
        assert_eq!(c[3].reason, REASON_ABSENT);
    }
}
