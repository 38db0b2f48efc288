//! The revision record: what a ClusterExtension has installed, kept outside its status so that an
//! upgrade can prune what the new bundle dropped and a restarted controller knows what is installed.
//!
//! One Secret per ClusterExtension in the controller's system namespace, named
//! `<ClusterExtension name>-revision` (type [`RECORD_SECRET_TYPE`]), labelled with the owner
//! labels, holding the JSON of [`InstalledRevision`] under the key [`RECORD_KEY`].

use serde::{Deserialize, Serialize};

use crate::catalog::Property;

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
    pub properties: Vec<Property>,
    /// Every object applied for this revision.
    #[serde(default)]
    pub objects: Vec<ObjectRef>,
    /// The ClusterExtension's `metadata.generation` this revision was applied for: with the same
    /// image and generation, the preflights that passed then need not run again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// The last full apply that ended with everything ready, if it was of this revision's
    /// content: what a restarted controller checks, with reads only, instead of applying again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<ReadyMark>,
    /// Content applied and never yet ready: since when. The progress deadline counts from it;
    /// content that was ready once has none (a later unready spell is not a stuck rollout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutStart>,
}

/// The first apply of content that has not been ready yet.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStart {
    /// The fingerprint of the full apply (as [`ReadyMark::fingerprint`]).
    pub fingerprint: String,
    /// When that content was first applied.
    pub started_at: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
}

/// A full apply that ended with every CRD Established and every Deployment rolled out.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ReadyMark {
    /// SHA-256 (hex) of what the apply depended on: the extension's uid, generation, namespace
    /// and service account, the image digest and the rendered manifests.
    pub fingerprint: String,
    /// The CRDs and Deployments as the readiness check saw them.
    pub watched: Vec<WatchedObject>,
    /// Every other object as that apply left it: what the drift check compares the cluster with
    /// (the controller watches no other kind). Empty in records written before it was kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applied: Vec<AppliedObject>,
}

/// An object as a server-side apply left it. Another write since (by anyone) moves its
/// `resourceVersion`; a delete and re-create changes its uid too.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AppliedObject {
    /// Which object.
    #[serde(flatten)]
    pub object: ObjectRef,
    /// Its `metadata.uid`.
    pub uid: String,
    /// Its `metadata.resourceVersion` after the apply.
    pub resource_version: String,
}

/// A CRD or Deployment as a readiness check saw it. The same uid and generation later mean the
/// same object with its spec unchanged (status and metadata changes do not move the generation).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct WatchedObject {
    /// Which object.
    #[serde(flatten)]
    pub object: ObjectRef,
    /// Its `metadata.uid`.
    pub uid: String,
    /// Its `metadata.generation`.
    pub generation: i64,
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

mod store {
    use std::{collections::BTreeMap, sync::Arc};

    use futures::Stream;
    use k8s_openapi::{ByteString, api::core::v1::Secret, apimachinery::pkg::apis::meta::v1::OwnerReference};
    use kube::{
        Api, Client,
        api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams},
        runtime::watcher,
    };

    use super::{InstalledRevision, RECORD_KEY, RECORD_SECRET_TYPE};
    use crate::apply::ownership::{FIELD_MANAGER, is_owned_by, owner_kind_selector, owner_labels};

    /// Errors reading or writing revision records.
    #[derive(Debug, thiserror::Error)]
    pub enum RecordError {
        /// The API server refused or failed.
        #[error("failed to {action} the revision record of ClusterExtension {extension:?}: {source}")]
        Api {
            action: &'static str,
            extension: String,
            #[source]
            source: kube::Error,
        },
        /// The record exists but cannot be read.
        #[error("the revision record of ClusterExtension {extension:?} is corrupt: {reason}")]
        Corrupt { extension: String, reason: String },
    }

    /// The name of a ClusterExtension's record Secret.
    pub fn record_name(extension: &str) -> String {
        // Secret names allow 253 characters; ClusterExtension names too, so trim the stem.
        let stem: String = extension.chars().take(253 - "-revision".len()).collect();
        format!("{stem}-revision")
    }

    /// The record a Secret holds: the one place that decodes record Secrets.
    fn decode(extension: &str, secret: &Secret) -> Result<InstalledRevision, RecordError> {
        let raw = secret
            .data
            .as_ref()
            .and_then(|data| data.get(RECORD_KEY))
            .ok_or_else(|| RecordError::Corrupt {
                extension: extension.into(),
                reason: format!("key {RECORD_KEY:?} is missing"),
            })?;
        serde_json::from_slice(&raw.0).map_err(|e| RecordError::Corrupt {
            extension: extension.into(),
            reason: e.to_string(),
        })
    }

    /// Reads revision records from the controller's system namespace, with the controller's
    /// own identity (they are the controller's bookkeeping, not bundle content).
    #[derive(Clone)]
    pub struct RevisionStore {
        secrets: Api<Secret>,
    }

    impl RevisionStore {
        /// A store in `system_namespace`.
        pub fn new(client: Client, system_namespace: &str) -> Self {
            Self {
                secrets: Api::namespaced(client, system_namespace),
            }
        }

        /// The installed revision of a ClusterExtension, if any.
        pub async fn load(&self, extension: &str) -> Result<Option<InstalledRevision>, RecordError> {
            let secret = self
                .secrets
                .get_opt(&record_name(extension))
                .await
                .map_err(|source| RecordError::Api {
                    action: "read",
                    extension: extension.into(),
                    source,
                })?;
            secret.map(|secret| decode(extension, &secret)).transpose()
        }

        /// Every record Secret of the namespace, as a watch (for a reflector whose cached
        /// Secrets [`RevisionStore::find`] reads).
        pub fn watch(
            &self,
        ) -> impl Stream<Item = Result<watcher::Event<Secret>, watcher::Error>> + Send + 'static {
            watcher(
                self.secrets.clone(),
                crate::watch::config().labels(&owner_kind_selector()),
            )
        }

        /// The installed revision of a ClusterExtension among cached record Secrets (from
        /// [`RevisionStore::watch`]): `None` when none is its record (by name, type and owner).
        pub fn find(
            extension: &str,
            secrets: &[Arc<Secret>],
        ) -> Result<Option<InstalledRevision>, RecordError> {
            let name = record_name(extension);
            secrets
                .iter()
                .find(|s| {
                    s.metadata.name.as_deref() == Some(name.as_str())
                        && s.type_.as_deref() == Some(RECORD_SECRET_TYPE)
                        // Not the record of another extension whose name was cut to the same stem.
                        && is_owned_by(s.metadata.labels.as_ref(), extension)
                })
                .map(|secret| decode(extension, secret))
                .transpose()
        }

        /// The bundle images of every revision record (what the bundle image cache keeps).
        /// A record that cannot be read fails the whole answer: its image is unknown.
        pub async fn installed_images(&self) -> Result<Vec<String>, RecordError> {
            Ok(self
                .installed()
                .await?
                .into_iter()
                .map(|(_, record)| record.image)
                .collect())
        }

        /// Every revision record with the name of the ClusterExtension it belongs to (one list
        /// request). A record that cannot be read fails the whole answer.
        pub async fn installed(&self) -> Result<Vec<(String, InstalledRevision)>, RecordError> {
            let params = ListParams::default().labels(&owner_kind_selector());
            let secrets = self
                .secrets
                .list(&params)
                .await
                .map_err(|source| RecordError::Api {
                    action: "list",
                    extension: "*".into(),
                    source,
                })?;
            secrets
                .items
                .iter()
                .filter(|s| s.type_.as_deref() == Some(RECORD_SECRET_TYPE))
                .map(|s| {
                    let owner = s
                        .metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(olmv1_api::v1::conditions::LABEL_OWNER_NAME))
                        .cloned()
                        .unwrap_or_default();
                    decode(&owner, s).map(|record| (owner, record))
                })
                .collect()
        }

        /// Writes the record, owned by the ClusterExtension (so it goes with it).
        pub async fn store(
            &self,
            extension: &str,
            extension_uid: &str,
            revision: &InstalledRevision,
        ) -> Result<(), RecordError> {
            let json = serde_json::to_vec(revision).expect("a revision record always serializes");
            let secret = Secret {
                metadata: ObjectMeta {
                    name: Some(record_name(extension)),
                    labels: Some(owner_labels(extension)),
                    owner_references: Some(vec![OwnerReference {
                        api_version: "olm.operatorframework.io/v1".into(),
                        kind: "ClusterExtension".into(),
                        name: extension.into(),
                        uid: extension_uid.into(),
                        controller: Some(true),
                        block_owner_deletion: Some(false),
                    }]),
                    ..Default::default()
                },
                type_: Some(RECORD_SECRET_TYPE.into()),
                data: Some(BTreeMap::from([(RECORD_KEY.to_string(), ByteString(json))])),
                ..Default::default()
            };
            let params = PatchParams::apply(FIELD_MANAGER).force();
            self.secrets
                .patch(&record_name(extension), &params, &Patch::Apply(&secret))
                .await
                .map_err(|source| RecordError::Api {
                    action: "write",
                    extension: extension.into(),
                    source,
                })?;
            Ok(())
        }

        /// Removes the record (after an uninstall).
        pub async fn delete(&self, extension: &str) -> Result<(), RecordError> {
            match self
                .secrets
                .delete(&record_name(extension), &DeleteParams::default())
                .await
            {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
                Err(source) => Err(RecordError::Api {
                    action: "delete",
                    extension: extension.into(),
                    source,
                }),
            }
        }
    }
}

pub use store::{RecordError, RevisionStore, record_name};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn property_values_keep_their_json_text() {
        // Upstream reads the raw bytes: 4.20 is minor 20, not 4.2.
        let properties: Vec<Property> = serde_json::from_str(
            r#"[{"type":"olm.maxOpenShiftVersion","value":4.20},{"type":"x","value":{"a":1}}]"#,
        )
        .unwrap();
        assert_eq!(properties[0].value.raw(), "4.20");
        let record = InstalledRevision {
            properties,
            ..InstalledRevision::default()
        };
        let json = serde_json::to_string(&record).unwrap();
        assert!(json.contains(r#""value":4.20"#), "{json}");
        let back: InstalledRevision = serde_json::from_str(&json).unwrap();
        assert_eq!(back, record);
        assert_eq!(back.properties[1].value.to_value(), serde_json::json!({"a": 1}));
    }
}
