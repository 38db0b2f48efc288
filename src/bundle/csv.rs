//! The parts of a ClusterServiceVersion (`operators.coreos.com/v1alpha1`) that rendering reads.
//!
//! Field names follow operator-framework/api `clusterserviceversion_types.go`. Unknown fields are
//! ignored, and `null` is read as "absent" wherever Go's decoder would leave a zero value, so every
//! CSV upstream accepts is accepted here.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::RuleWithOperations;
use k8s_openapi::api::apps::v1::DeploymentSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::{Deserialize, Deserializer, Serialize};

/// Install mode types, as spelled in `spec.installModes[].type`.
pub const INSTALL_MODE_OWN_NAMESPACE: &str = "OwnNamespace";
/// See [`INSTALL_MODE_OWN_NAMESPACE`].
pub const INSTALL_MODE_SINGLE_NAMESPACE: &str = "SingleNamespace";
/// See [`INSTALL_MODE_OWN_NAMESPACE`].
pub const INSTALL_MODE_MULTI_NAMESPACE: &str = "MultiNamespace";
/// See [`INSTALL_MODE_OWN_NAMESPACE`].
pub const INSTALL_MODE_ALL_NAMESPACES: &str = "AllNamespaces";

/// Webhook types, as spelled in `spec.webhookdefinitions[].type`.
pub const WEBHOOK_VALIDATING: &str = "ValidatingAdmissionWebhook";
/// See [`WEBHOOK_VALIDATING`].
pub const WEBHOOK_MUTATING: &str = "MutatingAdmissionWebhook";
/// See [`WEBHOOK_VALIDATING`].
pub const WEBHOOK_CONVERSION: &str = "ConversionWebhook";

/// A ClusterServiceVersion, reduced to what rendering needs.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterServiceVersion {
    /// `operators.coreos.com/v1alpha1`.
    #[serde(default)]
    pub api_version: Option<String>,
    /// `ClusterServiceVersion`.
    #[serde(default)]
    pub kind: Option<String>,
    /// Name (the bundle name, e.g. `etcdoperator.v0.9.4`), annotations (copied to pod templates).
    #[serde(default, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta,
    /// The spec.
    #[serde(default, deserialize_with = "null_as_default")]
    pub spec: CsvSpec,
}

impl ClusterServiceVersion {
    /// The CSV's name, empty when it has none.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// The CSV's annotations (empty map when none).
    pub fn annotations(&self) -> BTreeMap<String, String> {
        self.metadata.annotations.clone().unwrap_or_default()
    }

    /// Whether the CSV declares `mode` as supported.
    pub fn supports(&self, mode: &str) -> bool {
        self.spec
            .install_modes
            .iter()
            .any(|m| m.supported && m.type_ == mode)
    }
}

/// `spec` of a ClusterServiceVersion.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CsvSpec {
    /// The CSV version (semver).
    #[serde(default)]
    pub version: Option<String>,
    /// `install`: the deployment install strategy.
    #[serde(default, deserialize_with = "null_as_default")]
    pub install: InstallStrategy,
    /// Supported install modes.
    #[serde(default, deserialize_with = "null_as_default")]
    pub install_modes: Vec<InstallMode>,
    /// Owned and required CRDs.
    #[serde(default, deserialize_with = "null_as_default")]
    pub customresourcedefinitions: CustomResourceDefinitions,
    /// Owned and required APIServices.
    #[serde(default, deserialize_with = "null_as_default")]
    pub apiservicedefinitions: ApiServiceDefinitions,
    /// Admission and conversion webhooks.
    #[serde(default, deserialize_with = "null_as_default")]
    pub webhookdefinitions: Vec<WebhookDescription>,
}

/// `spec.install`.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InstallStrategy {
    /// Always `deployment` for registry+v1.
    #[serde(default, deserialize_with = "null_as_default")]
    pub strategy: String,
    /// Deployments and permissions.
    #[serde(default, deserialize_with = "null_as_default")]
    pub spec: StrategySpec,
}

/// `spec.install.spec`.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StrategySpec {
    /// Deployments to create.
    #[serde(default, deserialize_with = "null_as_default")]
    pub deployments: Vec<StrategyDeployment>,
    /// Namespaced permissions (Roles in each target namespace).
    #[serde(default, deserialize_with = "null_as_default")]
    pub permissions: Vec<StrategyPermissions>,
    /// Cluster-wide permissions (ClusterRoles).
    #[serde(default, deserialize_with = "null_as_default")]
    pub cluster_permissions: Vec<StrategyPermissions>,
}

/// One deployment of the install strategy.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
pub struct StrategyDeployment {
    /// Deployment name.
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    /// Deployment spec.
    #[serde(default, deserialize_with = "null_as_default")]
    pub spec: DeploymentSpec,
    /// Labels of the Deployment object.
    #[serde(default)]
    pub label: Option<BTreeMap<String, String>>,
}

/// A service account and its rules (`StrategyDeploymentPermissions`).
///
/// Kept apart from k8s-openapi's `PolicyRule` because the object-name hash is computed over Go's
/// JSON encoding of this struct, which tells `verbs: null` from `verbs: []`.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StrategyPermissions {
    /// The service account; empty means `default`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub service_account_name: String,
    /// The rules; `None` when absent or null.
    #[serde(default)]
    pub rules: Option<Vec<PermissionRule>>,
}

/// An RBAC policy rule as written in a CSV.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PermissionRule {
    /// Verbs; `None` when absent or null (Go encodes that as `null`).
    #[serde(default)]
    pub verbs: Option<Vec<String>>,
    /// API groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_groups: Option<Vec<String>>,
    /// Resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<String>>,
    /// Resource names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_names: Option<Vec<String>>,
    /// Non-resource URLs.
    #[serde(default, rename = "nonResourceURLs", skip_serializing_if = "Option::is_none")]
    pub non_resource_urls: Option<Vec<String>>,
}

/// One entry of `spec.installModes`.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct InstallMode {
    /// `OwnNamespace`, `SingleNamespace`, `MultiNamespace` or `AllNamespaces`.
    #[serde(rename = "type", default, deserialize_with = "null_as_default")]
    pub type_: String,
    /// Whether the mode is supported.
    #[serde(default, deserialize_with = "null_as_default")]
    pub supported: bool,
}

/// `spec.customresourcedefinitions`.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
pub struct CustomResourceDefinitions {
    /// CRDs the bundle owns (and must ship).
    #[serde(default, deserialize_with = "null_as_default")]
    pub owned: Vec<CrdDescription>,
    /// CRDs the bundle needs from elsewhere.
    #[serde(default, deserialize_with = "null_as_default")]
    pub required: Vec<CrdDescription>,
}

/// A CRD reference in a CSV.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
pub struct CrdDescription {
    /// `<plural>.<group>`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    /// Version.
    #[serde(default, deserialize_with = "null_as_default")]
    pub version: String,
    /// Kind.
    #[serde(default, deserialize_with = "null_as_default")]
    pub kind: String,
}

/// `spec.apiservicedefinitions`.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
pub struct ApiServiceDefinitions {
    /// APIServices the bundle's Deployments serve (aggregated API servers).
    #[serde(default, deserialize_with = "null_as_default")]
    pub owned: Vec<ApiServiceDescription>,
    /// APIServices the bundle needs from elsewhere (only counted).
    #[serde(default, deserialize_with = "null_as_default")]
    pub required: Vec<serde_json::Value>,
}

/// One entry of `spec.apiservicedefinitions.owned` (`APIServiceDescription`), reduced to what
/// rendering reads.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ApiServiceDescription {
    /// The resource's plural name (e.g. `metrics`).
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    /// The API group served.
    #[serde(default, deserialize_with = "null_as_default")]
    pub group: String,
    /// The API version served.
    #[serde(default, deserialize_with = "null_as_default")]
    pub version: String,
    /// The resource's kind.
    #[serde(default, deserialize_with = "null_as_default")]
    pub kind: String,
    /// The Deployment of the install strategy that serves the API.
    #[serde(default, deserialize_with = "null_as_default")]
    pub deployment_name: String,
    /// The port the Deployment serves it on (443 when 0), also the Service's port.
    #[serde(default, deserialize_with = "null_as_default")]
    pub container_port: i32,
}

impl ApiServiceDescription {
    /// The APIService's name, `<version>.<group>` (`APIServiceDescription.GetName`).
    pub fn api_service_name(&self) -> String {
        format!("{}.{}", self.version, self.group)
    }

    /// The port the API is served on: `containerPort`, or 443 when unset.
    pub fn port(&self) -> i32 {
        if self.container_port > 0 {
            self.container_port
        } else {
            443
        }
    }
}

/// One entry of `spec.webhookdefinitions` (`WebhookDescription`).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WebhookDescription {
    /// Name of the webhook (and of its configuration object, minus a trailing `-`).
    #[serde(default, deserialize_with = "null_as_default")]
    pub generate_name: String,
    /// `ValidatingAdmissionWebhook`, `MutatingAdmissionWebhook` or `ConversionWebhook`.
    #[serde(rename = "type", default, deserialize_with = "null_as_default")]
    pub type_: String,
    /// The deployment serving the webhook.
    #[serde(default, deserialize_with = "null_as_default")]
    pub deployment_name: String,
    /// Service port (443 when 0).
    #[serde(default, deserialize_with = "null_as_default")]
    pub container_port: i32,
    /// Container port behind the service port (the service port when absent).
    #[serde(default)]
    pub target_port: Option<IntOrString>,
    /// Admission rules.
    #[serde(default)]
    pub rules: Option<Vec<RuleWithOperations>>,
    /// `Fail` or `Ignore`.
    #[serde(default)]
    pub failure_policy: Option<String>,
    /// `Exact` or `Equivalent`.
    #[serde(default)]
    pub match_policy: Option<String>,
    /// Object selector.
    #[serde(default)]
    pub object_selector: Option<LabelSelector>,
    /// Side effects class.
    #[serde(default)]
    pub side_effects: Option<String>,
    /// Timeout.
    #[serde(default)]
    pub timeout_seconds: Option<i32>,
    /// Admission review versions (also the conversion review versions).
    #[serde(default)]
    pub admission_review_versions: Option<Vec<String>>,
    /// Mutating webhooks only.
    #[serde(default)]
    pub reinvocation_policy: Option<String>,
    /// URL path of the webhook.
    #[serde(default)]
    pub webhook_path: Option<String>,
    /// CRDs converted by a conversion webhook.
    #[serde(default, rename = "conversionCRDs", deserialize_with = "null_as_default")]
    pub conversion_crds: Vec<String>,
}

/// Reads `null` as the type's default, like Go's decoder leaving a zero value.
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nulls_and_missing_fields_read_as_empty() {
        let csv: ClusterServiceVersion = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": "x.v1"},
            "spec": {
                "apiservicedefinitions": {},
                "customresourcedefinitions": null,
                "webhookdefinitions": null,
                "install": {"strategy": "deployment", "spec": {"permissions": null,
                    "clusterPermissions": [{"serviceAccountName": null, "rules": [{"verbs": null}]}]}},
                "installModes": [{"type": "AllNamespaces", "supported": true}]
            }
        }))
        .expect("CSV parses");
        assert_eq!(csv.name(), "x.v1");
        assert!(csv.supports(INSTALL_MODE_ALL_NAMESPACES));
        assert!(!csv.supports(INSTALL_MODE_OWN_NAMESPACE));
        let perm = &csv.spec.install.spec.cluster_permissions[0];
        assert_eq!(perm.service_account_name, "");
        assert_eq!(perm.rules.as_ref().map(|r| r[0].verbs.is_none()), Some(true));
    }
}
