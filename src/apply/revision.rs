//! The revision record: what a ClusterExtension has installed, kept outside its status so that an
//! upgrade can prune what the new bundle dropped and a restarted controller knows what is installed.
//!
//! One Secret per ClusterExtension in the controller's system namespace, named
//! `<ClusterExtension name>-revision` (type [`RECORD_SECRET_TYPE`]), labelled with the owner
//! labels, holding the JSON of [`InstalledRevision`] under the key [`RECORD_KEY`].

use serde::{Deserialize, Serialize};

/// The Secret type of revision records.
pub const RECORD_SECRET_TYPE: &str = "olm.operatorframework.io/revision";
/// The data key holding the JSON record.
pub const RECORD_KEY: &str = "revision.json";

/// The installed revision of one ClusterExtension.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct InstalledRevision {
    /// Revision number, 1 for the first install, +1 for each upgrade.
    pub revision: u64,
    /// The package the bundle belongs to.
    pub package: String,
    /// The bundle's name, e.g. `etcdoperator.v0.9.4`.
    pub bundle_name: String,
    /// The bundle's version as reported in status (release folded in as build metadata).
    pub bundle_version: String,
    /// The bundle image, digest form when known.
    pub image: String,
    /// The catalog the bundle was resolved from, when it came from a catalog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog: Option<String>,
    /// The bundle's properties: the CSV's `olm.properties` annotation merged with
    /// `metadata/properties.yaml` and the catalog entry's properties (e.g. `olm.maxOpenShiftVersion`).
    #[serde(default)]
    pub properties: Vec<BundleProperty>,
    /// Every object applied for this revision.
    #[serde(default)]
    pub objects: Vec<ObjectRef>,
}

/// A bundle property: a type and an arbitrary JSON value.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct BundleProperty {
    /// The property type, e.g. `olm.maxOpenShiftVersion`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The property value.
    pub value: serde_json::Value,
}

/// A reference to one applied object.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    /// `group/version` or `version` for the core group.
    pub api_version: String,
    /// The kind.
    pub kind: String,
    /// The namespace; absent for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The name.
    pub name: String,
}
