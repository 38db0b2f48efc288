//! `ClusterCatalog`: a file-based catalog, pulled from an image and served over HTTP.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

// Image reference rules, as upstream's catalog CRD spells them.
const REF_DOMAIN_RULE: &str = r#"self.matches('^([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])((\\.([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))+)?(:[0-9]+)?\\b')"#;
const REF_DOMAIN_MESSAGE: &str = r#"must start with a valid domain. valid domains must be alphanumeric characters (lowercase and uppercase) separated by the "." character."#;
const REF_NAME_RULE: &str = r#"self.find('(\\/[a-z0-9]+((([._]|__|[-]*)[a-z0-9]+)+)?((\\/[a-z0-9]+((([._]|__|[-]*)[a-z0-9]+)+)?)+)?)') != """#;
const REF_NAME_MESSAGE: &str = r#"a valid name is required. valid names must contain lowercase alphanumeric characters separated only by the ".", "_", "__", "-" characters."#;
const REF_DIGEST_ALGORITHM_RULE: &str = r#"self.find('(@.*:)') != "" ? self.find('(@.*:)').matches('(@[A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*[:])') : true"#;
const REF_DIGEST_ALGORITHM_MESSAGE: &str = r#"digest algorithm is not valid. valid algorithms must start with an uppercase or lowercase alpha character followed by alphanumeric characters and may contain the "-", "_", "+", and "." characters."#;
const REF_DIGEST_LENGTH_RULE: &str =
    r#"self.find('(@.*:)') != "" ? self.find(':.*$').substring(1).size() >= 32 : true"#;
const REF_DIGEST_LENGTH_MESSAGE: &str =
    "digest is not valid. the encoded string must be at least 32 characters";
const REF_DIGEST_HEX_RULE: &str =
    r#"self.find('(@.*:)') != "" ? self.find(':.*$').matches(':[0-9A-Fa-f]*$') : true"#;
const REF_DIGEST_HEX_MESSAGE: &str =
    "digest is not valid. the encoded string must only contain hex characters (A-F, a-f, 0-9)";

/// The desired state of a ClusterCatalog.
// NB: kube's printcolumn(...) arguments repeat `type_ = ...`, which clippy takes for duplicated
// attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "olm.operatorframework.io",
    version = "v1",
    kind = "ClusterCatalog",
    status = "ClusterCatalogStatus",
    derive = "PartialEq",
    doc = "ClusterCatalog makes File-Based Catalog (FBC) data available to your cluster.",
    printcolumn(name = "LastUnpacked", type_ = "date", json_path = ".status.lastUnpacked"),
    printcolumn(
        name = "Serving",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Serving")].status"#
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterCatalogSpec {
    /// source is where the catalog's content comes from.
    pub source: CatalogSource,

    /// priority breaks ties between catalogs that offer the same bundle; higher wins.
    #[serde(default)]
    #[schemars(range(min = -2147483648, max = 2147483647))]
    pub priority: i32,

    /// availabilityMode: "Available" serves the catalog; "Unavailable" stops serving it and
    /// makes clients treat it as absent.
    #[serde(default)]
    pub availability_mode: AvailabilityMode,
}

/// Whether a catalog is served and used.
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AvailabilityMode {
    /// Not served; clients treat the catalog as absent.
    Unavailable,
    /// Served and used.
    #[default]
    Available,
}

/// The source of a catalog; a union keyed by type.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.type) && self.type == 'Image' ? has(self.image) : !has(self.image)").message("image is required when source type is Image, and forbidden otherwise"))]
pub struct CatalogSource {
    /// type of the source; "Image" is the one kind.
    #[serde(rename = "type")]
    pub source_type: CatalogSourceType,
    /// image is the OCI image holding the catalog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageSource>,
}

/// The kinds of catalog source.
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CatalogSourceType {
    /// An OCI image.
    #[default]
    Image,
}

/// A catalog image, by tag or digest.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(r#"self.ref.find('(@.*:)') != "" ? !has(self.pollIntervalMinutes) : true"#).message("cannot specify pollIntervalMinutes while using digest-based image"))]
pub struct ImageSource {
    /// ref is the image reference: domain, name, and a tag or a digest.
    #[serde(rename = "ref")]
    #[schemars(length(max = 1000))]
    #[x_kube(validation = Rule::new(REF_DOMAIN_RULE).message(REF_DOMAIN_MESSAGE))]
    #[x_kube(validation = Rule::new(REF_NAME_RULE).message(REF_NAME_MESSAGE))]
    #[x_kube(validation = Rule::new(r#"self.find('(@.*:)') != "" || self.find(':.*$') != """#).message("must end with a digest or a tag"))]
    #[x_kube(validation = Rule::new(r#"self.find('(@.*:)') == "" ? (self.find(':.*$') != "" ? self.find(':.*$').substring(1).size() <= 127 : true) : true"#).message("tag is invalid. the tag must not be more than 127 characters"))]
    #[x_kube(validation = Rule::new(r#"self.find('(@.*:)') == "" ? (self.find(':.*$') != "" ? self.find(':.*$').matches(':[\\w][\\w.-]*$') : true) : true"#).message(r#"tag is invalid. valid tags must begin with a word character (alphanumeric + "_") followed by word characters or ".", and "-" characters"#))]
    #[x_kube(validation = Rule::new(REF_DIGEST_ALGORITHM_RULE).message(REF_DIGEST_ALGORITHM_MESSAGE))]
    #[x_kube(validation = Rule::new(REF_DIGEST_LENGTH_RULE).message(REF_DIGEST_LENGTH_MESSAGE))]
    #[x_kube(validation = Rule::new(REF_DIGEST_HEX_RULE).message(REF_DIGEST_HEX_MESSAGE))]
    pub reference: String,

    /// pollIntervalMinutes is how often a tag is checked for new content; not allowed with a
    /// digest. Unset: never polled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub poll_interval_minutes: Option<i32>,
}

/// The observed state of a ClusterCatalog.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ClusterCatalogStatus {
    /// conditions: Serving and Progressing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// resolvedSource is the source the served content was unpacked from, by digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_source: Option<ResolvedCatalogSource>,
    /// urls are where the catalog's content is served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub urls: Option<ClusterCatalogUrls>,
    /// lastUnpacked is when the served content was last unpacked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_unpacked: Option<Time>,
}

/// The resolved source of a catalog.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.type) && self.type == 'Image' ? has(self.image) : !has(self.image)").message("image is required when source type is Image, and forbidden otherwise"))]
pub struct ResolvedCatalogSource {
    /// type of the source.
    #[serde(rename = "type")]
    pub source_type: CatalogSourceType,
    /// image is the resolved image.
    pub image: ResolvedImageSource,
}

/// A catalog image resolved to a digest.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedImageSource {
    /// ref is the digest-based image reference.
    #[serde(rename = "ref")]
    #[schemars(length(max = 1000))]
    #[x_kube(validation = Rule::new(REF_DOMAIN_RULE).message(REF_DOMAIN_MESSAGE))]
    #[x_kube(validation = Rule::new(REF_NAME_RULE).message(REF_NAME_MESSAGE))]
    #[x_kube(validation = Rule::new(r#"self.find('(@.*:)') != """#).message("must end with a digest"))]
    #[x_kube(validation = Rule::new(REF_DIGEST_ALGORITHM_RULE).message(REF_DIGEST_ALGORITHM_MESSAGE))]
    #[x_kube(validation = Rule::new(REF_DIGEST_LENGTH_RULE).message(REF_DIGEST_LENGTH_MESSAGE))]
    #[x_kube(validation = Rule::new(REF_DIGEST_HEX_RULE).message(REF_DIGEST_HEX_MESSAGE))]
    pub reference: String,
}

/// Where a catalog is served.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterCatalogUrls {
    /// base is the URL clients append `/api/v1/all` (or `/api/v1/metas`) to.
    #[schemars(length(max = 525))]
    #[x_kube(validation = Rule::new("isURL(self)").message("must be a valid URL"))]
    #[x_kube(validation = Rule::new(r#"isURL(self) ? (url(self).getScheme() == "http" || url(self).getScheme() == "https") : true"#).message("scheme must be either http or https"))]
    pub base: String,
}
