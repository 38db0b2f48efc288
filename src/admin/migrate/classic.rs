//! OLM classic's objects (`operators.coreos.com`), reduced to the fields a migration reads. Every
//! field is optional and unknown fields are ignored, so any object classic's CRDs accept is read.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, GroupVersionKind};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// classic's API group.
pub const GROUP: &str = "operators.coreos.com";

/// The ApiResource of a classic kind, read at the version classic stores it.
pub fn api_resource(kind: Kind) -> ApiResource {
    let (version, name, plural) = match kind {
        Kind::Subscription => ("v1alpha1", "Subscription", "subscriptions"),
        Kind::Csv => ("v1alpha1", "ClusterServiceVersion", "clusterserviceversions"),
        Kind::InstallPlan => ("v1alpha1", "InstallPlan", "installplans"),
        Kind::CatalogSource => ("v1alpha1", "CatalogSource", "catalogsources"),
        Kind::OperatorGroup => ("v1", "OperatorGroup", "operatorgroups"),
        Kind::OperatorCondition => ("v2", "OperatorCondition", "operatorconditions"),
    };
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, version, name), plural)
}

/// The classic kinds a migration reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `Subscription`.
    Subscription,
    /// `ClusterServiceVersion`.
    Csv,
    /// `InstallPlan`.
    InstallPlan,
    /// `CatalogSource`.
    CatalogSource,
    /// `OperatorGroup`.
    OperatorGroup,
    /// `OperatorCondition`.
    OperatorCondition,
}

/// A classic object as a migration reads it (see `read::list_classic`).
pub trait ClassicObject: serde::de::DeserializeOwned + Clone {
    /// Its metadata.
    fn metadata_mut(&mut self) -> &mut ObjectMeta;
}

macro_rules! classic_object {
    ($($t:ty),*) => {
        $(impl ClassicObject for $t {
            fn metadata_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        })*
    };
}

classic_object!(
    Subscription,
    Csv,
    InstallPlan,
    OperatorGroup,
    CatalogSource,
    OperatorCondition
);

/// `metadata.namespace`, `metadata.name` of an object.
pub fn key(meta: &ObjectMeta) -> (String, String) {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

/// A Subscription.
#[derive(Deserialize, Serialize, Clone, Debug, Default)]
#[serde(default)]
pub struct Subscription {
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Spec.
    pub spec: SubscriptionSpec,
    /// Status.
    pub status: SubscriptionStatus,
}

/// `Subscription.spec`.
#[derive(Deserialize, Serialize, Clone, Debug, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct SubscriptionSpec {
    /// The CatalogSource's name.
    pub source: String,
    /// The CatalogSource's namespace.
    pub source_namespace: String,
    /// The package.
    pub name: String,
    /// The channel (the package's default when empty).
    pub channel: Option<String>,
    /// `Automatic` or `Manual`.
    pub install_plan_approval: Option<String>,
    /// The CSV to start from.
    #[serde(rename = "startingCSV")]
    pub starting_csv: Option<String>,
    /// Deployment overrides (`SubscriptionConfig`), kept as JSON.
    pub config: Option<BTreeMap<String, Value>>,
}

/// `Subscription.status`.
#[derive(Deserialize, Serialize, Clone, Debug, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct SubscriptionStatus {
    /// The CSV the Subscription wants.
    #[serde(rename = "currentCSV")]
    pub current_csv: Option<String>,
    /// The CSV classic installed.
    #[serde(rename = "installedCSV")]
    pub installed_csv: Option<String>,
    /// `AtLatestKnown`, `UpgradePending`, `UpgradeAvailable`, `UpgradeFailed` or empty.
    pub state: Option<String>,
    /// The latest InstallPlan.
    pub install_plan_ref: Option<ObjectReference>,
}

/// A reference by name and namespace.
#[derive(Deserialize, Serialize, Clone, Debug, Default)]
#[serde(default)]
pub struct ObjectReference {
    /// Name.
    pub name: String,
    /// Namespace.
    pub namespace: Option<String>,
}

/// A ClusterServiceVersion as installed.
#[derive(Deserialize, Serialize, Clone, Debug, Default)]
#[serde(default)]
pub struct Csv {
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Spec.
    pub spec: CsvSpec,
    /// Status.
    pub status: CsvStatus,
}

/// `ClusterServiceVersion.spec`, the parts a migration reads.
#[derive(Deserialize, Serialize, Clone, Debug, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct CsvSpec {
    /// The version.
    pub version: Option<String>,
    /// Owned APIs.
    pub customresourcedefinitions: OwnedApis,
    /// Owned APIServices.
    pub apiservicedefinitions: OwnedApis,
}

/// `spec.customresourcedefinitions` / `spec.apiservicedefinitions`.
#[derive(Deserialize, Serialize, Clone, Debug, Default)]
#[serde(default)]
pub struct OwnedApis {
    /// What the CSV owns.
    pub owned: Vec<ApiDescription>,
}

/// One owned API.
#[derive(Deserialize, Serialize, Clone, Debug, Default)]
#[serde(default)]
pub struct ApiDescription {
    /// `<plural>.<group>` for a CRD.
    pub name: String,
    /// The group (APIServices).
    pub group: Option<String>,
    /// Version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// The Deployment serving it (APIServices).
    #[serde(rename = "deploymentName")]
    pub deployment_name: String,
}

/// `ClusterServiceVersion.status`.
#[derive(Deserialize, Serialize, Clone, Debug, Default)]
#[serde(default)]
pub struct CsvStatus {
    /// `Succeeded`, `Failed`, `Installing`, ...
    pub phase: Option<String>,
    /// The phase's reason.
    pub reason: Option<String>,
    /// The phase's message.
    pub message: Option<String>,
}

/// An InstallPlan.
#[derive(Deserialize, Serialize, Clone, Debug, Default)]
#[serde(default)]
pub struct InstallPlan {
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Spec.
    pub spec: InstallPlanSpec,
    /// Status.
    pub status: InstallPlanStatus,
}

/// `InstallPlan.spec`.
#[derive(Deserialize, Serialize, Clone, Debug, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct InstallPlanSpec {
    /// The CSVs it installs.
    #[serde(rename = "clusterServiceVersionNames")]
    pub csv_names: Vec<String>,
    /// Whether it was approved.
    pub approved: bool,
}

/// `InstallPlan.status`.
#[derive(Deserialize, Serialize, Clone, Debug, Default)]
#[serde(default)]
pub struct InstallPlanStatus {
    /// `RequiresApproval`, `Installing`, `Complete`, `Failed`, ...
    pub phase: Option<String>,
}

/// An OperatorGroup.
#[derive(Deserialize, Serialize, Clone, Debug, Default)]
#[serde(default)]
pub struct OperatorGroup {
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Spec.
    pub spec: OperatorGroupSpec,
    /// Status.
    pub status: OperatorGroupStatus,
}

/// `OperatorGroup.spec`.
#[derive(Deserialize, Serialize, Clone, Debug, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct OperatorGroupSpec {
    /// Target namespaces.
    pub target_namespaces: Vec<String>,
    /// A namespace selector (instead of target namespaces).
    pub selector: Option<Value>,
    /// The ServiceAccount classic installs as.
    pub service_account_name: Option<String>,
}

/// `OperatorGroup.status`.
#[derive(Deserialize, Serialize, Clone, Debug, Default)]
#[serde(default)]
pub struct OperatorGroupStatus {
    /// The namespaces it targets now (`[""]`: all).
    pub namespaces: Vec<String>,
}

/// A CatalogSource.
#[derive(Deserialize, Serialize, Clone, Debug, Default)]
#[serde(default)]
pub struct CatalogSource {
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Spec.
    pub spec: CatalogSourceSpec,
}

/// `CatalogSource.spec`.
#[derive(Deserialize, Serialize, Clone, Debug, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct CatalogSourceSpec {
    /// `grpc`, `internal` or `configmap`.
    pub source_type: Option<String>,
    /// The catalog image (grpc).
    pub image: Option<String>,
    /// A grpc address instead of an image.
    pub address: Option<String>,
    /// A ConfigMap holding the catalog (`internal`, `configmap`).
    pub config_map: Option<String>,
    /// Priority; higher wins. Go's `int`: 64 bits.
    pub priority: i64,
    /// How the image is polled.
    pub update_strategy: Option<UpdateStrategy>,
}

/// `CatalogSource.spec.updateStrategy`.
#[derive(Deserialize, Serialize, Clone, Debug, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct UpdateStrategy {
    /// Registry polling.
    pub registry_poll: Option<RegistryPoll>,
}

/// `updateStrategy.registryPoll`.
#[derive(Deserialize, Serialize, Clone, Debug, Default)]
#[serde(default)]
pub struct RegistryPoll {
    /// A Go duration, e.g. `10m`, `1h30m`.
    pub interval: Option<String>,
}

/// An OperatorCondition (v2).
#[derive(Deserialize, Serialize, Clone, Debug, Default)]
#[serde(default)]
pub struct OperatorCondition {
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Spec: the conditions the operator set.
    pub spec: ConditionList,
    /// Status: the conditions classic mirrored.
    pub status: ConditionList,
}

/// A list of conditions.
#[derive(Deserialize, Serialize, Clone, Debug, Default)]
#[serde(default)]
pub struct ConditionList {
    /// The conditions.
    pub conditions: Vec<OperatorConditionEntry>,
}

/// One condition.
#[derive(Deserialize, Serialize, Clone, Debug, Default)]
#[serde(default)]
pub struct OperatorConditionEntry {
    /// Type, e.g. `Upgradeable`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False`, `Unknown`.
    pub status: String,
    /// Reason.
    pub reason: String,
    /// Message.
    pub message: String,
}
