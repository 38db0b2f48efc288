//! The Widget custom resource (`widgets.test.olmv1.dev`): `v1alpha1` says how big a widget is
//! (`spec.size: small|large`), `v1` (the storage version) how many replicas it runs
//! (`spec.replicas`). The bundle's CRD (test/operator/bundle/manifests) carries both schemas; the
//! controller works on `v1` only and the conversion webhook translates.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub const GROUP: &str = "test.olmv1.dev";
pub const KIND: &str = "Widget";
pub const V1ALPHA1: &str = "v1alpha1";
pub const V1: &str = "v1";
pub const API_VERSION_V1ALPHA1: &str = "test.olmv1.dev/v1alpha1";
pub const API_VERSION_V1: &str = "test.olmv1.dev/v1";

/// The most replicas a v1 Widget may ask for: the validating webhook refuses more. A small number
/// on purpose, so the tests have an invalid CR that the schema alone admits.
pub const MAX_REPLICAS: i64 = 10;

/// v1alpha1 sizes and the replicas each stands for in v1.
pub const SIZE_SMALL: &str = "small";
pub const SIZE_LARGE: &str = "large";
pub const SMALL_REPLICAS: i64 = 1;
pub const LARGE_REPLICAS: i64 = 3;

/// Where a v1 -> v1alpha1 conversion keeps the exact replica count that `size` cannot express, so
/// that v1 -> v1alpha1 -> v1 gives back the same object (the API server round-trips on reads).
pub const REPLICAS_ANNOTATION: &str = "widgets.test.olmv1.dev/replicas";

/// The v1 Widget the controller reconciles.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "test.olmv1.dev",
    version = "v1",
    kind = "Widget",
    status = "WidgetStatus",
    namespaced
)]
pub struct WidgetSpec {
    pub replicas: i64,
}

/// What the controller writes (the same shape in both versions).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WidgetStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    pub ready: bool,
    #[serde(default)]
    pub message: String,
    /// The bundle version of the operator that wrote this status (tells an upgrade's pods apart).
    #[serde(default)]
    pub bundle_version: String,
}

/// The v1 replicas a v1alpha1 size stands for; `None` for a size that is neither.
pub fn replicas_for_size(size: &str) -> Option<i64> {
    match size {
        SIZE_SMALL => Some(SMALL_REPLICAS),
        SIZE_LARGE => Some(LARGE_REPLICAS),
        _ => None,
    }
}

/// The v1alpha1 size that best describes `replicas`: one or none is small, more is large.
pub fn size_for_replicas(replicas: i64) -> &'static str {
    if replicas <= SMALL_REPLICAS {
        SIZE_SMALL
    } else {
        SIZE_LARGE
    }
}
