//! `ClusterExtension`: what an admin asks to have installed, and what is installed.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::validation::{
    BUNDLE_RELEASE_RULE, BUNDLE_VERSION_RULE, DNS1123_LABEL_RULE, DNS1123_SUBDOMAIN_RULE,
    PACKAGE_NAME_MESSAGE, VERSION_RANGE_RULE,
};

/// The desired state of a ClusterExtension: which package to install from which catalogs, into
/// which namespace, with which service account.
// NB: kube's printcolumn(...) arguments repeat `type_ = ...`, which clippy takes for duplicated
// attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "olm.operatorframework.io",
    version = "v1",
    kind = "ClusterExtension",
    status = "ClusterExtensionStatus",
    derive = "PartialEq",
    doc = "ClusterExtension is the Schema for the clusterextensions API",
    printcolumn(
        name = "Installed Bundle",
        type_ = "string",
        json_path = ".status.install.bundle.name"
    ),
    printcolumn(
        name = "Version",
        type_ = "string",
        json_path = ".status.install.bundle.version"
    ),
    printcolumn(
        name = "Installed",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Installed')].status"
    ),
    printcolumn(
        name = "Progressing",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Progressing')].status"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterExtensionSpec {
    /// namespace is the namespace namespace-scoped objects of the extension are applied to. It
    /// must exist, is immutable, and is a DNS-1123 label of at most 63 characters.
    #[schemars(length(max = 63))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("namespace is immutable"))]
    #[x_kube(validation = Rule::new(DNS1123_LABEL_RULE).message("namespace must be a valid DNS1123 label"))]
    pub namespace: String,

    /// serviceAccount is the identity every object of the extension is read and written with,
    /// in spec.namespace. Optional, as upstream's (which ignores it since v1.11); olmv1 honours
    /// it. Without it the controller installs nothing unless it runs with
    /// `--install-identity controller` (upstream's model: its own identity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ServiceAccountReference>,

    /// source selects where the content of the extension comes from.
    pub source: SourceConfig,

    /// install configures installation options such as the pre-flight checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("has(self.preflight)").message("at least one of [preflight] are required when install is specified"))]
    pub install: Option<ClusterExtensionInstallConfig>,

    /// config holds bundle configuration, such as the watch namespace of a registry+v1 bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("has(self.configType) && self.configType == 'Inline' ?has(self.inline) : !has(self.inline)").message("inline is required when configType is Inline, and forbidden otherwise"))]
    pub config: Option<ClusterExtensionConfig>,

    /// progressDeadlineMinutes is how long a rollout may take before the extension reports
    /// `Progressing=False` with reason `ProgressDeadlineExceeded` and needs the admin's attention
    /// (the installed version keeps running; a rollout that becomes ready later clears it).
    /// Unset: no deadline. From 10 minutes to 720 minutes (12 hours). Upstream's experimental field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 10, max = 720))]
    pub progress_deadline_minutes: Option<i32>,
}

/// The service account a ClusterExtension's content is applied with. As upstream's: when
/// present it holds a name (minProperties), which cannot change, though serviceAccount itself
/// may be removed.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct ServiceAccountReference {
    /// name of the ServiceAccount in spec.namespace; immutable once set.
    // Optional in the schema as upstream's (omitempty: no default is generated); minProperties
    // makes it present whenever serviceAccount is.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = 253))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("name is immutable once set but may be cleared"))]
    #[x_kube(validation = Rule::new(DNS1123_SUBDOMAIN_RULE).message("name must be a valid DNS1123 subdomain. It must contain only lowercase alphanumeric characters, hyphens (-) or periods (.), start and end with an alphanumeric character, and be no longer than 253 characters"))]
    pub name: String,
}

impl ClusterExtensionSpec {
    /// The name in spec.serviceAccount, when the extension names one.
    pub fn service_account_name(&self) -> Option<&str> {
        self.service_account
            .as_ref()
            .map(|account| account.name.as_str())
            .filter(|name| !name.is_empty())
    }
}

/// Where a ClusterExtension's content comes from; a union keyed by sourceType.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.sourceType) && self.sourceType == 'Catalog' ? has(self.catalog) : !has(self.catalog)").message("catalog is required when sourceType is Catalog, and forbidden otherwise"))]
pub struct SourceConfig {
    /// sourceType is the kind of source; "Catalog" is the one kind.
    pub source_type: SourceType,
    /// catalog configures how content is picked from ClusterCatalogs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog: Option<CatalogFilter>,
}

/// The kinds of source a ClusterExtension can install from.
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SourceType {
    /// Content resolved from the cluster's ClusterCatalogs.
    #[default]
    Catalog,
}

/// How a bundle is picked from the catalogs.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct CatalogFilter {
    /// packageName is the package to install; required and immutable.
    #[schemars(length(max = 253))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("packageName is immutable"))]
    #[x_kube(validation = Rule::new(DNS1123_SUBDOMAIN_RULE).message(PACKAGE_NAME_MESSAGE))]
    pub package_name: String,

    /// version is a semver constraint (an exact version or a range, Masterminds syntax, e.g.
    /// ">=1.11, <1.13", "1.11.x", "~1.12"). Unset: the latest version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new(VERSION_RANGE_RULE).message("invalid version expression"))]
    pub version: Option<String>,

    /// channels restricts the bundles and the upgrade edges to these channels of the package.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256), inner(length(max = 253)))]
    #[schemars(extend("items" = {"type": "string", "maxLength": 253, "x-kubernetes-validations": [{"message": "channels entries must be valid DNS1123 subdomains", "rule": DNS1123_SUBDOMAIN_RULE}]}))]
    pub channels: Vec<String>,

    /// selector filters the ClusterCatalogs consulted; unset means all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,

    /// upgradeConstraintPolicy: "CatalogProvided" follows the catalog's upgrade edges;
    /// "SelfCertified" allows any version in range (forced upgrades and rollbacks).
    #[serde(default)]
    pub upgrade_constraint_policy: UpgradeConstraintPolicy,
}

/// Whether upgrades must follow the edges the catalog provides.
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum UpgradeConstraintPolicy {
    /// Upgrade only along the catalog's replaces/skips/skipRange edges.
    #[default]
    CatalogProvided,
    /// Ignore the catalog's edges: any version in range, up or down.
    SelfCertified,
}

/// Installation options.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ClusterExtensionInstallConfig {
    /// preflight configures the checks run before an install or upgrade.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("has(self.crdUpgradeSafety)").message("at least one of [crdUpgradeSafety] are required when preflight is specified"))]
    pub preflight: Option<PreflightConfig>,
}

/// Pre-flight checks.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PreflightConfig {
    /// crdUpgradeSafety configures the CRD upgrade safety check.
    pub crd_upgrade_safety: CrdUpgradeSafetyPreflightConfig,
}

/// The CRD upgrade safety pre-flight check.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CrdUpgradeSafetyPreflightConfig {
    /// enforcement: "Strict" (the default behaviour) runs the check; "None" skips it.
    pub enforcement: CrdUpgradeSafetyEnforcement,
}

/// Whether the CRD upgrade safety check runs.
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrdUpgradeSafetyEnforcement {
    /// Skip the check.
    None,
    /// Run the check and refuse unsafe CRD changes.
    Strict,
}

/// Bundle configuration; a union keyed by configType.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterExtensionConfig {
    /// configType is the kind of configuration; "Inline" is the one kind.
    pub config_type: ClusterExtensionConfigType,
    /// inline is a JSON object validated against the bundle's configuration schema (for
    /// registry+v1 bundles: `watchNamespace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "inline_config_schema")]
    pub inline: Option<serde_json::Map<String, serde_json::Value>>,
}

/// The kinds of bundle configuration.
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterExtensionConfigType {
    /// Configuration given inline in the ClusterExtension.
    Inline,
}

fn inline_config_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "inline is a JSON object of bundle configuration.",
        "type": "object",
        "minProperties": 1,
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// The observed state of a ClusterExtension.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ClusterExtensionStatus {
    /// conditions: Installed, Progressing, Deprecated, PackageDeprecated, ChannelDeprecated,
    /// BundleDeprecated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,

    /// install describes the installed bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install: Option<ClusterExtensionInstallStatus>,
}

/// The installed bundle.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ClusterExtensionInstallStatus {
    /// bundle is the name and version of the installed bundle.
    pub bundle: BundleMetadata,
}

/// A bundle's name and version.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct BundleMetadata {
    /// name of the bundle, e.g. "etcdoperator.v0.9.4".
    #[x_kube(validation = Rule::new(DNS1123_SUBDOMAIN_RULE).message(PACKAGE_NAME_MESSAGE))]
    pub name: String,
    /// version of the bundle (semver; a registry+v1 release shows as build metadata).
    #[x_kube(validation = Rule::new(BUNDLE_VERSION_RULE).message("version must be well-formed semver"))]
    pub version: String,
    /// release of the bundle, when the catalog gives one explicitly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 20))]
    #[x_kube(validation = Rule::new(BUNDLE_RELEASE_RULE).message("release must be empty or consist of dot-separated identifiers (numeric without leading zeros, or alphanumeric)"))]
    pub release: Option<String>,
}
