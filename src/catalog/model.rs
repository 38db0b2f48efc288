//! The full FBC model (operator-registry `declcfg`): packages, channels, bundles with every
//! property, deprecations, and objects of unknown schemas kept as they are.

use serde::{Deserialize, Serialize};

use super::{
    CatalogError, Meta,
    meta::{SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_DEPRECATIONS, SCHEMA_PACKAGE},
    property::Property,
};

/// Property type naming a bundle's package and version (exactly one per bundle).
pub const PROPERTY_PACKAGE: &str = "olm.package";
/// Property type of a whole manifest of the bundle (base64); large, not kept by the index.
pub const PROPERTY_BUNDLE_OBJECT: &str = "olm.bundle.object";
/// Property type of CSV metadata; large, not kept by the index.
pub const PROPERTY_CSV_METADATA: &str = "olm.csv.metadata";
/// Dependency on another package (refused by the resolver).
pub const PROPERTY_PACKAGE_REQUIRED: &str = "olm.package.required";
/// Dependency on an API (refused by the resolver).
pub const PROPERTY_GVK_REQUIRED: &str = "olm.gvk.required";
/// A generic dependency constraint (refused by the resolver).
pub const PROPERTY_CONSTRAINT: &str = "olm.constraint";
/// The highest OpenShift minor version the bundle supports.
pub const PROPERTY_MAX_OPENSHIFT_VERSION: &str = "olm.maxOpenShiftVersion";

/// A package icon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Icon {
    /// Base64-encoded image data.
    #[serde(rename = "base64data", default)]
    pub base64_data: String,
    /// The image media type.
    #[serde(rename = "mediatype", default)]
    pub media_type: String,
}

/// An `olm.package` object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Package {
    /// Always `olm.package`.
    pub schema: String,
    /// The package name.
    pub name: String,
    /// The channel installed when no channel is requested.
    #[serde(default)]
    pub default_channel: String,
    /// The package icon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<Icon>,
    /// A description of the package.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Package properties.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub properties: Vec<Property>,
}

/// One entry of a channel: a bundle and its upgrade edges.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ChannelEntry {
    /// The bundle name.
    pub name: String,
    /// The bundle this one replaces.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub replaces: String,
    /// Bundles this one skips.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skips: Vec<String>,
    /// Versions this one skips (blang semver range).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub skip_range: String,
}

/// An `olm.channel` object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Channel {
    /// Always `olm.channel`.
    pub schema: String,
    /// The channel name.
    pub name: String,
    /// The package of the channel.
    #[serde(default)]
    pub package: String,
    /// The bundles of the channel with their upgrade edges.
    #[serde(default)]
    pub entries: Vec<ChannelEntry>,
    /// Channel properties.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub properties: Vec<Property>,
}

/// An image a bundle refers to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelatedImage {
    /// A name for the image.
    #[serde(default)]
    pub name: String,
    /// The image reference.
    pub image: String,
}

/// An `olm.bundle` object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Bundle {
    /// Always `olm.bundle`.
    pub schema: String,
    /// The bundle name, e.g. `etcdoperator.v0.9.2`.
    #[serde(default)]
    pub name: String,
    /// The package of the bundle.
    #[serde(default)]
    pub package: String,
    /// The bundle image.
    #[serde(default)]
    pub image: String,
    /// Bundle properties (including `olm.package` with the version).
    #[serde(default)]
    pub properties: Vec<Property>,
    /// Images the bundle refers to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related_images: Vec<RelatedImage>,
}

/// What a deprecation entry refers to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PackageScopedReference {
    /// `olm.package`, `olm.channel` or `olm.bundle`.
    pub schema: String,
    /// The channel or bundle name; empty for the package.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// One deprecation: a reference and a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeprecationEntry {
    /// The deprecated package, channel or bundle.
    pub reference: PackageScopedReference,
    /// Why, and what to use instead.
    #[serde(default)]
    pub message: String,
}

/// An `olm.deprecations` object: the deprecated parts of one package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deprecation {
    /// Always `olm.deprecations`.
    pub schema: String,
    /// The package.
    #[serde(default)]
    pub package: String,
    /// The deprecation entries.
    #[serde(default)]
    pub entries: Vec<DeprecationEntry>,
}

/// A whole catalog, fully parsed (operator-registry `DeclarativeConfig`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeclarativeConfig {
    /// `olm.package` objects.
    pub packages: Vec<Package>,
    /// `olm.channel` objects.
    pub channels: Vec<Channel>,
    /// `olm.bundle` objects.
    pub bundles: Vec<Bundle>,
    /// `olm.deprecations` objects.
    pub deprecations: Vec<Deprecation>,
    /// Objects of any other schema, kept as they are.
    pub others: Vec<Meta>,
}

impl DeclarativeConfig {
    /// Parses metas into the model; an object that does not fit its schema is an error naming it.
    /// An object without a schema is an error, as in operator-registry.
    pub fn from_metas<'a>(
        metas: impl IntoIterator<Item = &'a Meta>,
    ) -> Result<DeclarativeConfig, CatalogError> {
        let mut cfg = DeclarativeConfig::default();
        for meta in metas {
            match &*meta.schema {
                SCHEMA_PACKAGE => cfg.packages.push(parse_typed(meta)?),
                SCHEMA_CHANNEL => cfg.channels.push(parse_typed(meta)?),
                SCHEMA_BUNDLE => cfg.bundles.push(parse_typed(meta)?),
                SCHEMA_DEPRECATIONS => cfg.deprecations.push(parse_typed(meta)?),
                "" => {
                    return Err(CatalogError::Malformed {
                        location: meta.location(),
                        message: "object is missing root schema field".to_string(),
                    });
                }
                _ => cfg.others.push(meta.clone()),
            }
        }
        Ok(cfg)
    }
}

pub(crate) fn parse_typed<T: serde::de::DeserializeOwned>(meta: &Meta) -> Result<T, CatalogError> {
    serde_json::from_slice(&meta.blob).map_err(|e| CatalogError::Malformed {
        location: meta.location(),
        message: e.to_string(),
    })
}
