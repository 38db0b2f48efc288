//! How olmv1 marks what it writes for a ClusterExtension: the owner labels on every applied
//! object and on the revision record, the selector that finds them, and the field manager of
//! its server-side applies. Below `objects` (which applies) and `revision` (which records).

use std::collections::BTreeMap;

use olmv1_api::v1::conditions::{LABEL_OWNER_KIND, LABEL_OWNER_NAME};

/// The field manager of every server-side apply olmv1 makes to bundle content.
pub const FIELD_MANAGER: &str = "olmv1";

/// The label selector of everything the controller labels as a ClusterExtension's.
pub fn owner_kind_selector() -> String {
    format!("{LABEL_OWNER_KIND}=ClusterExtension")
}

/// The owner labels of ClusterExtension `extension`: on every object applied for it and on its
/// revision record.
pub fn owner_labels(extension: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_OWNER_KIND.to_string(), "ClusterExtension".to_string()),
        (LABEL_OWNER_NAME.to_string(), extension.to_string()),
    ])
}

/// The ClusterExtension named in an object's owner labels.
pub fn owner_of<K: kube::Resource>(object: &K) -> Option<&str> {
    let labels = object.meta().labels.as_ref()?;
    if labels.get(LABEL_OWNER_KIND)? != "ClusterExtension" {
        return None;
    }
    labels.get(LABEL_OWNER_NAME).map(String::as_str)
}

/// Whether `labels` are the owner labels of ClusterExtension `extension`.
pub fn is_owned_by(labels: Option<&BTreeMap<String, String>>, extension: &str) -> bool {
    let label = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str);
    label(LABEL_OWNER_KIND) == Some("ClusterExtension") && label(LABEL_OWNER_NAME) == Some(extension)
}
