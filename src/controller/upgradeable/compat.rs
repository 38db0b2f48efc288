//! Pure logic of cluster upgrade gating: parsing `olm.maxOpenShiftVersion` values and cluster
//! versions, the cluster's next minor version, compatibility, and the `Upgradeable` condition.
//!
//! Semantics follow OLM v1 on OpenShift (cluster-olm-operator) with OLM classic's tolerance for
//! `"<major>.<minor>.0"`: see `reference/upstream-maxocpversion-and-semver.md` Part A.

use std::fmt;

use olmv1_api::v1::conditions::ConditionStatus;

use crate::go_format::go_quote;

/// The bundle property that declares the newest OpenShift minor version a bundle supports.
pub const MAX_OPENSHIFT_VERSION_PROPERTY: &str = "olm.maxOpenShiftVersion";
/// The ClusterOperator condition the cluster-version operator reads.
pub const CONDITION_UPGRADEABLE: &str = "Upgradeable";
/// The condition cluster-olm-operator writes on the `OLM` operator object (upstream's constant);
/// library-go merges every `*Upgradeable` condition there into the `olm` ClusterOperator.
pub const CONDITION_INSTALLED_OLM_OPERATORS_UPGRADEABLE: &str = "InstalledOLMOperatorsUpgradeable";
/// Reason when at least one installed extension blocks the next minor version.
pub const REASON_INCOMPATIBLE_OPERATORS_INSTALLED: &str = "IncompatibleOperatorsInstalled";
/// Reason when no extension blocks but some extension's metadata could not be read.
pub const REASON_FAILURE_GETTING_EXTENSION_METADATA: &str = "FailureGettingExtensionMetadata";
/// Reason when nothing blocks (what library-go writes on a ClusterOperator whose sources all agree).
pub const REASON_AS_EXPECTED: &str = "AsExpected";
/// Message when nothing blocks (library-go's wording).
pub const MESSAGE_ALL_IS_WELL: &str = "All is well";

/// An OpenShift `<major>.<minor>` version; patch, prerelease and build never matter here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MajorMinor {
    /// The major version.
    pub major: u64,
    /// The minor version.
    pub minor: u64,
}

impl MajorMinor {
    /// A version from its two numbers.
    pub const fn new(major: u64, minor: u64) -> Self {
        Self { major, minor }
    }
}

impl fmt::Display for MajorMinor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Why a version could not be read. Messages are one clause; callers add what the value belongs to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    /// The property value is not JSON at all.
    #[error("value is not valid JSON: {0}")]
    InvalidJson(String),
    /// A JSON number that is not written `<major>.<minor>` (e.g. `4.19e1`, `5.00`, `4`).
    #[error("invalid semver format {0:?}: expected <major>.<minor>")]
    InvalidNumber(String),
    /// A JSON value that is neither a number nor a string.
    #[error("invalid type {kind} for olm.maxOpenShiftVersion: {raw}")]
    InvalidType {
        /// The JSON type found.
        kind: &'static str,
        /// The raw JSON value.
        raw: String,
    },
    /// The empty string.
    #[error("value cannot be \"\" (an empty string)")]
    Empty,
    /// A `v` prefix, which OLM v1 rejects.
    #[error("invalid version format {0:?}: a \"v\" prefix is not allowed")]
    VPrefix(String),
    /// Not a version at all.
    #[error("failed to parse {0:?} as semver: expected <major>.<minor>")]
    NotSemver(String),
    /// A version with a non-zero patch, a prerelease, or a short form with metadata.
    #[error(
        "property olm.maxOpenShiftVersion must specify only <major>.<minor> version, got invalid value {0}"
    )]
    NotMajorMinor(String),
    /// An empty cluster version.
    #[error("cluster version is empty")]
    EmptyClusterVersion,
    /// A cluster version that is not `<major>.<minor>[.<patch>][-<prerelease>][+<build>]`.
    #[error(
        "cluster version {0:?} is not a version of the form <major>.<minor>[.<patch>][-<prerelease>][+<build>]"
    )]
    InvalidClusterVersion(String),
}

/// Parses an `olm.maxOpenShiftVersion` property value given as raw JSON text.
///
/// A JSON number must be written exactly `<major>.<minor>` (so `4.10` keeps minor 10 when the
/// raw text is available); a JSON string may be `<major>.<minor>` or `<major>.<minor>.0`
/// (optionally with `+build`, as OLM classic accepts), surrounding blanks ignored. Anything else
/// (`4.18.1`, `v4.18`, `4.18-rc`, `""`, `abcd`, other JSON types) is an error.
pub fn parse_max_openshift_version(raw_json: &str) -> Result<MajorMinor, VersionError> {
    let value: serde_json::Value =
        serde_json::from_str(raw_json).map_err(|e| VersionError::InvalidJson(e.to_string()))?;
    match value {
        serde_json::Value::Number(_) => parse_number_text(raw_json.trim()),
        serde_json::Value::String(text) => parse_version_text(&text),
        other => Err(VersionError::InvalidType {
            kind: json_kind(&other),
            raw: raw_json.trim().to_owned(),
        }),
    }
}

/// [`parse_max_openshift_version`] for an already decoded JSON value.
///
/// A number decoded without its raw text has lost trailing zeros (`4.10` reads as `4.1`): prefer
/// the raw form whenever the source still has it.
pub fn parse_max_openshift_version_value(value: &serde_json::Value) -> Result<MajorMinor, VersionError> {
    parse_max_openshift_version(&value.to_string())
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "bool",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

/// A JSON number must read `<major>.<minor>` literally: no exponent, no leading zeros, no
/// trailing zeros beyond a single `0` minor (upstream matches the raw bytes the same way).
fn parse_number_text(text: &str) -> Result<MajorMinor, VersionError> {
    let invalid = || VersionError::InvalidNumber(text.to_owned());
    let (major, minor) = text.split_once('.').ok_or_else(invalid)?;
    let canonical = |part: &str| {
        !part.is_empty()
            && part.bytes().all(|b| b.is_ascii_digit())
            && (part == "0" || !part.starts_with('0'))
    };
    if !canonical(major) || !canonical(minor) || major == "0" {
        return Err(invalid());
    }
    Ok(MajorMinor::new(
        major.parse().map_err(|_| invalid())?,
        minor.parse().map_err(|_| invalid())?,
    ))
}

/// The parts of a dotted version: numeric core, prerelease and build (both possibly empty).
struct VersionParts<'a> {
    core: Vec<&'a str>,
    prerelease: &'a str,
    build: &'a str,
}

fn split_version(text: &str) -> VersionParts<'_> {
    let (rest, build) = text.split_once('+').unwrap_or((text, ""));
    let (core, prerelease) = rest.split_once('-').unwrap_or((rest, ""));
    VersionParts {
        core: core.split('.').collect(),
        prerelease,
        build,
    }
}

fn numeric(part: &str) -> Option<u64> {
    if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    part.parse().ok()
}

/// A string value: `<major>.<minor>`, or `<major>.<minor>.0` (build metadata tolerated).
fn parse_version_text(text: &str) -> Result<MajorMinor, VersionError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(VersionError::Empty);
    }
    if trimmed.starts_with(['v', 'V']) {
        return Err(VersionError::VPrefix(text.to_owned()));
    }
    let parts = split_version(trimmed);
    let numbers: Option<Vec<u64>> = parts.core.iter().map(|p| numeric(p)).collect();
    let Some(numbers) = numbers.filter(|n| n.len() == 2 || n.len() == 3) else {
        return Err(VersionError::NotSemver(text.to_owned()));
    };
    let short_with_metadata = numbers.len() == 2 && (!parts.prerelease.is_empty() || !parts.build.is_empty());
    let not_truncated = numbers.len() == 3 && (numbers[2] != 0 || !parts.prerelease.is_empty());
    if short_with_metadata || not_truncated {
        return Err(VersionError::NotMajorMinor(trimmed.to_owned()));
    }
    Ok(MajorMinor::new(numbers[0], numbers[1]))
}

/// Reads a cluster version (ClusterVersion `status.desired.version` or `--cluster-version`) as
/// `<major>.<minor>`: a `v` prefix, the patch, the prerelease and build metadata are ignored
/// (`4.18.0-rc1` -> `4.18`).
pub fn parse_cluster_version(text: &str) -> Result<MajorMinor, VersionError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(VersionError::EmptyClusterVersion);
    }
    let unprefixed = trimmed.strip_prefix(['v', 'V']).unwrap_or(trimmed);
    let parts = split_version(unprefixed);
    let numbers: Option<Vec<u64>> = parts.core.iter().map(|p| numeric(p)).collect();
    match numbers.as_deref() {
        Some([major, minor]) | Some([major, minor, _]) => Ok(MajorMinor::new(*major, *minor)),
        _ => Err(VersionError::InvalidClusterVersion(text.to_owned())),
    }
}

/// The minor version a cluster upgrade from `current` leads to: `minor + 1`, except that 4.23 is
/// the same release as 5.0, so a 4.23 cluster's next minor is 5.1.
pub fn next_minor(current: MajorMinor) -> MajorMinor {
    if current == MajorMinor::new(4, 23) {
        return MajorMinor::new(5, 1);
    }
    MajorMinor::new(current.major, current.minor.saturating_add(1))
}

/// Whether an extension whose bundle declares `max` lets a cluster at `current` move to its
/// next minor version (it blocks when `max < next_minor(current)`).
pub fn is_compatible(max: MajorMinor, current: MajorMinor) -> bool {
    max >= next_minor(current)
}

/// What the reconciler knows about one installed ClusterExtension.
#[derive(Clone, Debug, PartialEq)]
pub struct InstalledExtension {
    /// The ClusterExtension's name.
    pub extension: String,
    /// The installed bundle's name.
    pub bundle: String,
    /// The installed bundle's properties as `(type, raw JSON value)`, or why they could not be read.
    pub properties: Result<Vec<(String, String)>, String>,
}

/// An installed extension that blocks the cluster's next minor version.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct BlockingExtension {
    /// The ClusterExtension's name.
    pub extension: String,
    /// The installed bundle's name.
    pub bundle: String,
    /// The newest OpenShift minor version the bundle declares.
    pub max_openshift_version: MajorMinor,
}

/// The verdict over every installed extension for one cluster version.
#[derive(Clone, Debug, PartialEq)]
pub struct Assessment {
    /// The cluster's current `<major>.<minor>`.
    pub current: MajorMinor,
    /// The version a cluster upgrade leads to.
    pub next: MajorMinor,
    /// Extensions that block it, sorted by extension then bundle.
    pub blocking: Vec<BlockingExtension>,
    /// One sentence per extension whose metadata could not be read, sorted by extension.
    pub errors: Vec<String>,
}

/// The `olm.maxOpenShiftVersion` of one installed bundle: `None` when it declares none.
/// The error names the extension, the bundle and the value.
///
/// The revision record merges several sources (the CSV's `olm.properties`, `properties.yaml`,
/// the catalog entry), so the same value may appear more than once: equal values count as one;
/// two different values are an error, as upstream's "more than one" rule intends.
pub fn max_openshift_version_of(installed: &InstalledExtension) -> Result<Option<MajorMinor>, String> {
    let InstalledExtension {
        extension,
        bundle,
        properties,
    } = installed;
    let properties = properties.as_ref().map_err(|cause| {
        format!("error with cluster extension {extension}: error in bundle {bundle}: {cause}")
    })?;
    let wrap = |cause: String| {
        format!("error(s) with cluster extension {extension}: error in bundle {bundle}: {cause}")
    };
    let mut found: Option<(MajorMinor, &str)> = None;
    for (_, raw) in properties
        .iter()
        .filter(|(type_, _)| type_ == MAX_OPENSHIFT_VERSION_PROPERTY)
    {
        let raw = raw.trim();
        let version = parse_max_openshift_version(raw)
            .map_err(|e| wrap(format!("error converting to semver for version {raw}: {e}")))?;
        match found {
            Some((first, first_raw)) if first != version => {
                return Err(wrap(format!(
                    "more than one {MAX_OPENSHIFT_VERSION_PROPERTY} found in bundle: {first_raw}, {raw}"
                )));
            }
            Some(_) => {}
            None => found = Some((version, raw)),
        }
    }
    Ok(found.map(|(version, _)| version))
}

/// Judges every installed extension against the cluster's current version.
pub fn assess(current: MajorMinor, installed: &[InstalledExtension]) -> Assessment {
    let mut sorted: Vec<&InstalledExtension> = installed.iter().collect();
    sorted.sort_by(|a, b| (&a.extension, &a.bundle).cmp(&(&b.extension, &b.bundle)));
    let mut blocking = Vec::new();
    let mut errors = Vec::new();
    for ext in sorted {
        match max_openshift_version_of(ext) {
            Ok(Some(max)) if !is_compatible(max, current) => blocking.push(BlockingExtension {
                extension: ext.extension.clone(),
                bundle: ext.bundle.clone(),
                max_openshift_version: max,
            }),
            Ok(_) => {}
            Err(error) => errors.push(error),
        }
    }
    Assessment {
        current,
        next: next_minor(current),
        blocking,
        errors,
    }
}

/// A condition to write: the verdict, or one of an owned ClusterOperator's other conditions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpgradeableCondition {
    /// True or False.
    pub status: ConditionStatus,
    /// CamelCase reason; empty for none.
    pub reason: &'static str,
    /// Human-readable message; empty for none.
    pub message: String,
}

impl Assessment {
    /// The condition for this verdict, with upstream's reasons and message format.
    pub fn condition(&self) -> UpgradeableCondition {
        let errors = self.errors.join("\n");
        if !self.blocking.is_empty() {
            let mut entries: Vec<String> = self
                .blocking
                .iter()
                .map(|b| {
                    format!(
                        "bundle {} for ClusterExtension {}",
                        go_quote(&b.bundle),
                        go_quote(&b.extension)
                    )
                })
                .collect();
            entries.sort();
            let mut message = format!(
                "Found ClusterExtensions that require upgrades prior to upgrading cluster to version {}: {}.",
                self.next,
                entries.join(",")
            );
            if !errors.is_empty() {
                message.push_str(&format!(
                    "\n Additionally the following errors were encountered while getting extension metadata: {errors}"
                ));
            }
            return UpgradeableCondition {
                status: ConditionStatus::False,
                reason: REASON_INCOMPATIBLE_OPERATORS_INSTALLED,
                message,
            };
        }
        if !errors.is_empty() {
            return UpgradeableCondition {
                status: ConditionStatus::False,
                reason: REASON_FAILURE_GETTING_EXTENSION_METADATA,
                message: errors,
            };
        }
        UpgradeableCondition {
            status: ConditionStatus::True,
            reason: REASON_AS_EXPECTED,
            message: MESSAGE_ALL_IS_WELL.to_owned(),
        }
    }

    /// The `InstalledOLMOperatorsUpgradeable` condition cluster-olm-operator writes on the `OLM`
    /// object for this verdict: the same when False; True with neither reason nor message.
    pub fn olm_operator_condition(&self) -> UpgradeableCondition {
        let condition = self.condition();
        match condition.status {
            ConditionStatus::True => UpgradeableCondition {
                status: ConditionStatus::True,
                reason: "",
                message: String::new(),
            },
            ConditionStatus::False | ConditionStatus::Unknown => condition,
        }
    }
}

/// The new `status.conditions` with `desired` as the condition of type `condition_type`, every
/// other condition kept as it is (unknown fields included); `None` when the condition already
/// says exactly that. `lastTransitionTime` moves only when the status changes; an empty reason or
/// message is left out.
pub fn merge_condition(
    existing: &[serde_json::Value],
    condition_type: &str,
    desired: &UpgradeableCondition,
    now_rfc3339: &str,
) -> Option<Vec<serde_json::Value>> {
    let is_upgradeable =
        |c: &serde_json::Value| c.get("type").and_then(|t| t.as_str()) == Some(condition_type);
    let field = |c: &serde_json::Value, name: &str| c.get(name).and_then(|v| v.as_str()).map(str::to_owned);
    let current = existing.iter().find(|c| is_upgradeable(c));
    let same_status = current.is_some_and(|c| field(c, "status").as_deref() == Some(desired.status.as_str()));
    if let Some(c) = current
        && same_status
        && field(c, "reason").unwrap_or_default() == desired.reason
        && field(c, "message").unwrap_or_default() == desired.message
        && existing.iter().filter(|c| is_upgradeable(c)).count() == 1
    {
        return None;
    }
    let transition = match current.and_then(|c| field(c, "lastTransitionTime")) {
        Some(time) if same_status => time,
        _ => now_rfc3339.to_owned(),
    };
    let mut condition = serde_json::json!({
        "type": condition_type,
        "status": desired.status.as_str(),
        "lastTransitionTime": transition,
    });
    if !desired.reason.is_empty() {
        condition["reason"] = desired.reason.into();
    }
    if !desired.message.is_empty() {
        condition["message"] = desired.message.clone().into();
    }
    let mut merged = Vec::with_capacity(existing.len() + 1);
    let mut placed = false;
    for c in existing {
        if is_upgradeable(c) {
            // Replace in place, once; a duplicate Upgradeable entry is dropped.
            if !placed {
                merged.push(condition.clone());
                placed = true;
            }
        } else {
            merged.push(c.clone());
        }
    }
    if !placed {
        merged.push(condition);
    }
    Some(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mm(major: u64, minor: u64) -> MajorMinor {
        MajorMinor::new(major, minor)
    }

    fn ext(name: &str, bundle: &str, props: &[(&str, &str)]) -> InstalledExtension {
        InstalledExtension {
            extension: name.to_owned(),
            bundle: bundle.to_owned(),
            properties: Ok(props
                .iter()
                .map(|(t, v)| (t.to_string(), v.to_string()))
                .collect()),
        }
    }

    fn max_ext(name: &str, bundle: &str, raw: &str) -> InstalledExtension {
        ext(name, bundle, &[(MAX_OPENSHIFT_VERSION_PROPERTY, raw)])
    }

    // cluster-olm-operator TestToAllowedSemver, except `"4.18.0"` which this project accepts
    // (the issue adopts OLM classic's tolerance for a zero patch).
    #[test]
    fn parses_the_olm_v1_to_allowed_semver_table() {
        let ok = [
            ("4.18", mm(4, 18)),
            ("4.19", mm(4, 19)),
            ("\"4.18\"", mm(4, 18)),
            ("5.0", mm(5, 0)),
            ("\"5.0\"", mm(5, 0)),
            ("\"5.1\"", mm(5, 1)),
            ("\"4.18.0\"", mm(4, 18)),
        ];
        for (raw, want) in ok {
            assert_eq!(parse_max_openshift_version(raw), Ok(want), "{raw}");
        }
        for raw in ["4.19e1", "4.18.0", "\"v4.18\"", "\"v4.18.0\"", "5.00"] {
            assert!(
                parse_max_openshift_version(raw).is_err(),
                "{raw} must be rejected"
            );
        }
    }

    #[test]
    fn a_number_keeps_a_two_digit_minor_from_its_raw_text() {
        assert_eq!(parse_max_openshift_version("4.10"), Ok(mm(4, 10)));
        assert_eq!(parse_max_openshift_version(" 4.1 "), Ok(mm(4, 1)));
    }

    #[test]
    fn rejects_the_values_the_issue_lists_with_a_clear_cause() {
        let cases = [
            (
                "\"4.18.1\"",
                "must specify only <major>.<minor> version, got invalid value 4.18.1",
            ),
            ("\"v4.18\"", "\"v\" prefix is not allowed"),
            ("\"4.18-rc\"", "got invalid value 4.18-rc"),
            ("\"\"", "value cannot be \"\" (an empty string)"),
            ("\"abcd\"", "failed to parse \"abcd\" as semver"),
            (
                "4.19e1",
                "invalid semver format \"4.19e1\": expected <major>.<minor>",
            ),
            ("4", "invalid semver format \"4\""),
            ("true", "invalid type bool for olm.maxOpenShiftVersion: true"),
            ("{\"a\":1}", "invalid type object"),
            ("4.18.1", "value is not valid JSON"),
            ("\"4.18.0-rc.1\"", "got invalid value 4.18.0-rc.1"),
            ("\"4\"", "failed to parse \"4\" as semver"),
            ("\"4.18.0.0\"", "failed to parse"),
        ];
        for (raw, want) in cases {
            let err = parse_max_openshift_version(raw).expect_err(raw).to_string();
            assert!(err.contains(want), "{raw}: {err:?} should contain {want:?}");
        }
    }

    // OLM classic TestMaxOpenShiftVersion (single values) and the tolerant string forms.
    #[test]
    fn parses_the_olm_classic_max_openshift_version_table() {
        assert_eq!(parse_max_openshift_version("\"1.0.0\""), Ok(mm(1, 0)));
        assert_eq!(parse_max_openshift_version("4.8"), Ok(mm(4, 8)));
        assert_eq!(parse_max_openshift_version("\"1.1.0+build\""), Ok(mm(1, 1)));
        assert_eq!(parse_max_openshift_version("\" 4.18 \""), Ok(mm(4, 18)));
        assert!(parse_max_openshift_version("\"\"").is_err());
        assert!(parse_max_openshift_version("\"bad_version\"").is_err());
        assert!(parse_max_openshift_version("\"1.1.0-pre\"").is_err());
        assert!(parse_max_openshift_version("\"1.1.0-pre+build\"").is_err());
    }

    #[test]
    fn a_decoded_value_parses_like_its_text() {
        assert_eq!(
            parse_max_openshift_version_value(&serde_json::json!("4.18")),
            Ok(mm(4, 18))
        );
        assert_eq!(
            parse_max_openshift_version_value(&serde_json::json!(4.18)),
            Ok(mm(4, 18))
        );
        assert!(parse_max_openshift_version_value(&serde_json::json!(null)).is_err());
    }

    #[test]
    fn cluster_versions_keep_only_major_and_minor() {
        let cases = [
            ("4.18.3", mm(4, 18)),
            ("4.18.0-rc1", mm(4, 18)),
            ("4.18.0-rc.1", mm(4, 18)),
            ("4.18.0-0.nightly-2024-10-10-123456", mm(4, 18)),
            ("4.18", mm(4, 18)),
            ("v4.19.2", mm(4, 19)),
            ("4.17.0+build.5", mm(4, 17)),
            ("1.0.1", mm(1, 0)),
            ("1.1.0-pre", mm(1, 1)),
        ];
        for (text, want) in cases {
            assert_eq!(parse_cluster_version(text), Ok(want), "{text}");
        }
        assert_eq!(parse_cluster_version(""), Err(VersionError::EmptyClusterVersion));
        for bad in ["4", "four.eighteen", "4.18.3.1", "4..1"] {
            assert!(
                matches!(
                    parse_cluster_version(bad),
                    Err(VersionError::InvalidClusterVersion(_))
                ),
                "{bad}"
            );
        }
    }

    // cluster-olm-operator TestNextOCPMinorVersion and OLM classic TestOCPVersionNextY.
    #[test]
    fn next_minor_follows_the_4_23_is_5_0_rule() {
        assert_eq!(next_minor(mm(4, 22)), mm(4, 23));
        assert_eq!(next_minor(mm(4, 23)), mm(5, 1));
        assert_eq!(next_minor(mm(5, 0)), mm(5, 1));
        assert_eq!(next_minor(mm(5, 1)), mm(5, 2));
        assert_eq!(next_minor(mm(4, 16)), mm(4, 17));
        assert_eq!(
            next_minor(parse_cluster_version("4.16.0-rc1").unwrap()),
            mm(4, 17)
        );
        assert_eq!(next_minor(mm(4, u64::MAX)), mm(4, u64::MAX));
    }

    // cluster-olm-operator TestIsOperatorMaxOCPVersionCompatibleWithCluster.
    #[test]
    fn compatibility_matches_the_olm_v1_table() {
        let table = [
            ((4, 18), (4, 17), true),
            ((4, 18), (4, 18), false),
            ((4, 18), (4, 19), false),
            ((4, 23), (4, 22), true),
            ((4, 23), (4, 23), false),
            ((5, 0), (4, 23), false),
            ((5, 1), (4, 23), true),
            ((4, 23), (5, 0), false),
            ((5, 0), (5, 0), false),
            ((5, 1), (5, 0), true),
            ((4, 23), (5, 1), false),
            ((5, 0), (5, 1), false),
            ((5, 1), (5, 1), false),
        ];
        for ((max_major, max_minor), (major, minor), want) in table {
            let (max, cluster) = (mm(max_major, max_minor), mm(major, minor));
            assert_eq!(
                is_compatible(max, cluster),
                want,
                "max {max} on cluster {cluster}"
            );
        }
    }

    fn blocked(cluster: &str, raw_max: &str) -> bool {
        let current = parse_cluster_version(cluster).unwrap();
        let assessment = assess(current, &[max_ext("ce", "b", raw_max)]);
        assert!(
            assessment.errors.is_empty(),
            "{cluster} {raw_max}: {:?}",
            assessment.errors
        );
        !assessment.blocking.is_empty()
    }

    // OLM classic TestIncompatibleOperators (values quoted as its harness does), plus the
    // cases the issue names.
    #[test]
    fn compatibility_matches_the_olm_classic_incompatible_operators_table() {
        for max in ["\"1.1.0\"", "\"1.1.0+build\"", "\"2.0.0\""] {
            assert!(!blocked("1.0.0", max), "{max} on 1.0.0");
        }
        for max in ["\"1.0.0\"", "\"1.0.0+build\"", "\"0.1.0\"", "\"1.0\""] {
            assert!(blocked("1.0.0", max), "{max} on 1.0.0");
        }
        assert!(!blocked("1.0.1", "\"1.1\""), "next Y-stream of 1.0.1 is 1.1");
        assert!(
            blocked("1.1.0-pre", "\"1.1.0\""),
            "next Y-stream of 1.1.0-pre is 1.2"
        );
        for max in ["\"4.23\"", "\"5.0\"", "\"5.1\""] {
            assert!(!blocked("4.22.0", max), "{max} on 4.22");
        }
        for (cluster, max, want) in [
            ("4.23.0", "\"4.23\"", true),
            ("4.23.0", "\"5.0\"", true),
            ("4.23.0", "\"5.1\"", false),
            ("5.0.0", "\"4.23\"", true),
            ("5.0.0", "\"5.0\"", true),
            ("5.0.0", "\"5.1\"", false),
            ("5.1.0", "\"4.23\"", true),
            ("5.1.0", "\"5.0\"", true),
            ("5.1.0", "\"5.1\"", true),
            ("4.17.0", "4.18", false),
            ("4.18.3", "4.18", true),
            ("4.18.0-rc1", "4.18", true),
            ("4.17.0", "\"4.17\"", true),
        ] {
            assert_eq!(blocked(cluster, max), want, "{max} on {cluster}");
        }
        let errors = assess(mm(1, 0), &[max_ext("ce", "b", "\"1.1.0-pre\"")]).errors;
        assert!(
            errors[0].contains(
                "property olm.maxOpenShiftVersion must specify only <major>.<minor> version, got invalid value 1.1.0-pre"
            ),
            "{errors:?}"
        );
        let errors = assess(mm(1, 0), &[max_ext("ce", "b", "\"bad_version\"")]).errors;
        assert!(
            errors[0].contains("failed to parse \"bad_version\" as semver"),
            "{errors:?}"
        );
    }

    #[test]
    fn no_property_never_blocks() {
        let a = assess(
            mm(4, 18),
            &[ext("ce", "b", &[("olm.package", "{\"packageName\":\"p\"}")])],
        );
        assert!(a.blocking.is_empty() && a.errors.is_empty());
        assert_eq!(a.condition().status, ConditionStatus::True);
        let a = assess(mm(4, 18), &[]);
        assert_eq!(
            a.condition(),
            UpgradeableCondition {
                status: ConditionStatus::True,
                reason: REASON_AS_EXPECTED,
                message: MESSAGE_ALL_IS_WELL.to_owned()
            }
        );
    }

    #[test]
    fn more_than_one_property_is_an_error_not_a_block() {
        let a = assess(
            mm(4, 18),
            &[ext(
                "ce",
                "b.v1",
                &[
                    (MAX_OPENSHIFT_VERSION_PROPERTY, "\"4.17\""),
                    (MAX_OPENSHIFT_VERSION_PROPERTY, "\"4.20\""),
                ],
            )],
        );
        assert!(a.blocking.is_empty());
        assert_eq!(
            a.errors,
            [
                "error(s) with cluster extension ce: error in bundle b.v1: more than one olm.maxOpenShiftVersion found in bundle: \"4.17\", \"4.20\""
            ]
        );
        let c = a.condition();
        assert_eq!(
            (c.status, c.reason),
            (ConditionStatus::False, REASON_FAILURE_GETTING_EXTENSION_METADATA)
        );
        assert_eq!(c.message, a.errors[0]);
    }

    // OLM classic TestMaxOpenShiftVersion "Multiple": two different values.
    #[test]
    fn two_different_values_are_an_error() {
        let two = ext(
            "ce",
            "b",
            &[
                (MAX_OPENSHIFT_VERSION_PROPERTY, "\"1.0.0\""),
                (MAX_OPENSHIFT_VERSION_PROPERTY, "\"2.0.0\""),
            ],
        );
        let err = max_openshift_version_of(&two).expect_err("two values");
        assert!(
            err.contains("more than one olm.maxOpenShiftVersion found in bundle"),
            "{err}"
        );
    }

    #[test]
    fn the_same_value_from_several_sources_counts_once() {
        // e.g. the catalog's property and the CSV's olm.properties annotation, merged in the record.
        let merged = ext(
            "ce",
            "b",
            &[
                (MAX_OPENSHIFT_VERSION_PROPERTY, "\"4.19\""),
                ("olm.package", "{}"),
                (MAX_OPENSHIFT_VERSION_PROPERTY, "4.19"),
                (MAX_OPENSHIFT_VERSION_PROPERTY, "\"4.19.0\""),
            ],
        );
        assert_eq!(max_openshift_version_of(&merged), Ok(Some(mm(4, 19))));
        let with_garbage = ext(
            "ce",
            "b",
            &[
                (MAX_OPENSHIFT_VERSION_PROPERTY, "\"4.19\""),
                (MAX_OPENSHIFT_VERSION_PROPERTY, "\"x\""),
            ],
        );
        let err = max_openshift_version_of(&with_garbage).expect_err("garbage");
        assert!(
            err.contains("error converting to semver for version \"x\""),
            "{err}"
        );
    }

    #[test]
    fn a_parse_error_names_the_extension_the_bundle_and_the_value() {
        let a = assess(mm(4, 17), &[max_ext("garbage", "garbage.v1.0.0", "\"abcd\"")]);
        assert_eq!(
            a.errors,
            [
                "error(s) with cluster extension garbage: error in bundle garbage.v1.0.0: error converting to semver for version \"abcd\": failed to parse \"abcd\" as semver: expected <major>.<minor>"
            ]
        );
    }

    #[test]
    fn an_unreadable_record_is_an_error_for_that_extension() {
        let broken = InstalledExtension {
            extension: "ce".to_owned(),
            bundle: "b".to_owned(),
            properties: Err("could not convert olm.properties: expected value at line 1 column 1".to_owned()),
        };
        let a = assess(mm(4, 17), &[broken]);
        assert_eq!(
            a.errors,
            [
                "error with cluster extension ce: error in bundle b: could not convert olm.properties: expected value at line 1 column 1"
            ]
        );
    }

    #[test]
    fn the_blocking_message_is_sorted_and_names_the_next_version() {
        let a = assess(
            mm(4, 18),
            &[
                max_ext("zeta", "zeta.v2", "4.18"),
                max_ext("alpha", "alpha.v1", "\"4.17\""),
                max_ext("ok", "ok.v1", "\"4.19\""),
                ext("none", "none.v1", &[]),
            ],
        );
        let c = a.condition();
        assert_eq!(c.status, ConditionStatus::False);
        assert_eq!(c.reason, REASON_INCOMPATIBLE_OPERATORS_INSTALLED);
        assert_eq!(
            c.message,
            "Found ClusterExtensions that require upgrades prior to upgrading cluster to version 4.19: \
             bundle \"alpha.v1\" for ClusterExtension \"alpha\",bundle \"zeta.v2\" for ClusterExtension \"zeta\"."
        );
        assert_eq!(
            a.blocking
                .iter()
                .map(|b| b.max_openshift_version)
                .collect::<Vec<_>>(),
            [mm(4, 17), mm(4, 18)]
        );
    }

    #[test]
    fn errors_are_appended_to_the_blocking_message() {
        let a = assess(
            mm(4, 18),
            &[
                max_ext("bad", "bad.v1", "\"x\""),
                max_ext("old", "old.v1", "4.18"),
            ],
        );
        let c = a.condition();
        assert_eq!(c.reason, REASON_INCOMPATIBLE_OPERATORS_INSTALLED);
        assert_eq!(
            c.message,
            format!(
                "Found ClusterExtensions that require upgrades prior to upgrading cluster to version 4.19: \
                 bundle \"old.v1\" for ClusterExtension \"old\".\n Additionally the following errors were \
                 encountered while getting extension metadata: {}",
                a.errors[0]
            )
        );
    }

    // cluster-olm-operator message tests: (cluster, max) -> the message names this version.
    #[test]
    fn the_message_names_5_1_after_4_23_and_5_0() {
        for (cluster, max, want) in [
            (mm(5, 0), "5.0", "5.1"),
            (mm(4, 23), "5.0", "5.1"),
            (mm(5, 1), "5.1", "5.2"),
        ] {
            let message = assess(cluster, &[max_ext("ce", "b", max)]).condition().message;
            assert!(message.contains(&format!("to version {want}: ")), "{message}");
        }
    }

    // cluster-olm-operator controller tests on a 4.17 cluster.
    #[test]
    fn controller_table_on_a_4_17_cluster() {
        let current = mm(4, 17);
        assert_eq!(
            assess(current, &[max_ext("ce", "b", "\"4.18\"")])
                .condition()
                .status,
            ConditionStatus::True
        );
        let c = assess(current, &[max_ext("ce", "bundle-x", "\"4.17\"")]).condition();
        assert_eq!(
            (c.status, c.reason),
            (ConditionStatus::False, REASON_INCOMPATIBLE_OPERATORS_INSTALLED)
        );
        assert!(c.message.contains("bundle-x"));
        for garbage in ["\"\"", "\"abcd\""] {
            let c = assess(current, &[max_ext("ce", "b", garbage)]).condition();
            assert_eq!(
                (c.status, c.reason),
                (ConditionStatus::False, REASON_FAILURE_GETTING_EXTENSION_METADATA)
            );
        }
    }

    fn upgradeable(status: ConditionStatus, reason: &'static str, message: &str) -> UpgradeableCondition {
        UpgradeableCondition {
            status,
            reason,
            message: message.to_owned(),
        }
    }

    #[test]
    fn merging_keeps_other_conditions_and_their_fields() {
        let existing = vec![
            serde_json::json!({"type": "Available", "status": "True", "lastTransitionTime": "t0", "reason": "AsExpected", "extra": 1}),
            serde_json::json!({"type": "Upgradeable", "status": "True", "lastTransitionTime": "t0", "reason": "AsExpected", "message": "All is well"}),
            serde_json::json!({"type": "Degraded", "status": "False", "lastTransitionTime": "t0"}),
        ];
        let desired = upgradeable(
            ConditionStatus::False,
            REASON_INCOMPATIBLE_OPERATORS_INSTALLED,
            "m",
        );
        let merged = merge_condition(&existing, CONDITION_UPGRADEABLE, &desired, "t1").expect("a change");
        assert_eq!(merged[0], existing[0]);
        assert_eq!(merged[2], existing[2]);
        assert_eq!(
            merged[1],
            serde_json::json!({"type": "Upgradeable", "status": "False", "lastTransitionTime": "t1", "reason": "IncompatibleOperatorsInstalled", "message": "m"})
        );
        assert_eq!(
            merge_condition(&merged, CONDITION_UPGRADEABLE, &desired, "t2"),
            None,
            "no change, no write"
        );
        let reworded = upgradeable(
            ConditionStatus::False,
            REASON_INCOMPATIBLE_OPERATORS_INSTALLED,
            "m2",
        );
        let merged = merge_condition(&merged, CONDITION_UPGRADEABLE, &reworded, "t3").expect("a change");
        assert_eq!(
            merged[1]["lastTransitionTime"], "t1",
            "same status keeps its transition time"
        );
        assert_eq!(merged[1]["message"], "m2");
    }

    #[test]
    fn merging_adds_a_missing_condition_and_drops_duplicates() {
        let desired = upgradeable(ConditionStatus::True, REASON_AS_EXPECTED, MESSAGE_ALL_IS_WELL);
        let merged = merge_condition(&[], CONDITION_UPGRADEABLE, &desired, "t1").expect("added");
        assert_eq!(merged.len(), 1);
        assert_eq!(merged[0]["lastTransitionTime"], "t1");
        let twice = vec![merged[0].clone(), merged[0].clone()];
        assert_eq!(
            merge_condition(&twice, CONDITION_UPGRADEABLE, &desired, "t2")
                .expect("deduplicated")
                .len(),
            1
        );
    }

    #[test]
    fn the_olm_operator_condition_is_upstreams_true_without_reason_or_message() {
        let blocked = UpgradeableCondition {
            status: ConditionStatus::False,
            reason: REASON_INCOMPATIBLE_OPERATORS_INSTALLED,
            message: "m".to_owned(),
        };
        let existing = vec![
            serde_json::json!({"type": "CatalogdDeploymentAvailable", "status": "True", "lastTransitionTime": "t0"}),
        ];
        let merged = merge_condition(
            &existing,
            CONDITION_INSTALLED_OLM_OPERATORS_UPGRADEABLE,
            &blocked,
            "t1",
        )
        .expect("added");
        assert_eq!(merged[0], existing[0]);
        assert_eq!(
            merged[1],
            serde_json::json!({"type": "InstalledOLMOperatorsUpgradeable", "status": "False",
                "lastTransitionTime": "t1", "reason": "IncompatibleOperatorsInstalled", "message": "m"})
        );
        let fine = Assessment {
            current: MajorMinor::new(4, 18),
            next: MajorMinor::new(4, 19),
            blocking: Vec::new(),
            errors: Vec::new(),
        }
        .olm_operator_condition();
        let merged = merge_condition(
            &merged,
            CONDITION_INSTALLED_OLM_OPERATORS_UPGRADEABLE,
            &fine,
            "t2",
        )
        .expect("changed");
        assert_eq!(
            merged[1],
            serde_json::json!({"type": "InstalledOLMOperatorsUpgradeable", "status": "True", "lastTransitionTime": "t2"})
        );
        assert_eq!(
            merge_condition(
                &merged,
                CONDITION_INSTALLED_OLM_OPERATORS_UPGRADEABLE,
                &fine,
                "t3"
            ),
            None
        );
    }

    /// Real data: the certified-operators v4.20 catalog's fusion-access bundles (needs ../shared/catalogs).
    #[test]
    fn real_catalog_fusion_access_bundles_declare_parsable_max_versions() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../shared/catalogs/certified-operators-v4.20/openshift-fusion-access-operator/catalog.yaml"
        );
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("real catalog {path} must exist: {e}"));
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).expect("catalog YAML parses");
        let mut found = Vec::new();
        for doc in docs.iter().filter(|d| d["schema"] == "olm.bundle") {
            let name = doc["name"].as_str().expect("bundle name").to_owned();
            let props = doc["properties"].as_array().expect("bundle properties");
            let as_pairs: Vec<(String, String)> = props
                .iter()
                .map(|p| {
                    (
                        p["type"].as_str().unwrap_or_default().to_owned(),
                        p["value"].to_string(),
                    )
                })
                .collect();
            let installed = InstalledExtension {
                extension: "fusion-access".to_owned(),
                bundle: name.clone(),
                properties: Ok(as_pairs),
            };
            let from_property = max_openshift_version_of(&installed).expect("valid property");
            // The CSV's olm.properties annotation must agree with the catalog property.
            let annotation = props
                .iter()
                .find(|p| p["type"] == "olm.csv.metadata")
                .and_then(|p| p["value"]["annotations"]["olm.properties"].as_str());
            let annotation_pairs: Vec<(String, String)> = annotation
                .map(|a| {
                    let parsed: Vec<serde_json::Value> =
                        serde_json::from_str(a).expect("olm.properties is JSON");
                    parsed
                        .iter()
                        .map(|p| {
                            (
                                p["type"].as_str().unwrap_or_default().to_owned(),
                                p["value"].to_string(),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            let from_annotation = max_openshift_version_of(&InstalledExtension {
                properties: Ok(annotation_pairs.clone()),
                ..installed.clone()
            })
            .expect("annotation value parses");
            assert_eq!(from_property, from_annotation, "{name}");
            // Merged as the revision record holds them, the two sources still give one value.
            let mut merged = installed.properties.clone().expect("pairs");
            merged.extend(annotation_pairs);
            let from_record = max_openshift_version_of(&InstalledExtension {
                properties: Ok(merged),
                ..installed.clone()
            });
            assert_eq!(from_record, Ok(from_property), "{name}");
            found.push((name, from_property.map(|v| v.to_string())));
        }
        let want = [
            ("openshift-fusion-access-operator.v0.9.3", None),
            ("openshift-fusion-access-operator.v1.0.0", None),
            ("openshift-fusion-access-operator.v1.0.1", Some("4.19")),
            ("openshift-fusion-access-operator.v1.1.0-1", Some("4.20")),
            ("openshift-fusion-access-operator.v1.1.1-1", Some("4.20")),
            ("openshift-fusion-access-operator.v1.2.0-3", Some("4.21")),
        ];
        let want: Vec<(String, Option<String>)> = want
            .iter()
            .map(|(n, v)| (n.to_string(), v.map(str::to_owned)))
            .collect();
        assert_eq!(found, want);
        // On a 4.20 cluster (next 4.21) only the 4.21 bundle lets the cluster upgrade.
        let blocking: Vec<bool> = found
            .iter()
            .filter_map(|(_, v)| v.as_deref())
            .map(|v| {
                !is_compatible(
                    parse_max_openshift_version(&format!("\"{v}\"")).unwrap(),
                    MajorMinor::new(4, 20),
                )
            })
            .collect();
        assert_eq!(blocking, [true, true, true, false]);
    }
}
