//! Owns the `olm.operatorframework.io/v1` types: ClusterExtension, ClusterCatalog, conditions.
//! May import kube (derive only), k8s-openapi, serde, schemars; never the olmv1 crate (no I/O).

mod cluster_catalog;
mod cluster_extension;
pub mod conditions;
mod validation;

pub use cluster_catalog::*;
pub use cluster_extension::*;

/// The API group of both kinds.
pub const GROUP: &str = "olm.operatorframework.io";
/// The API version of both kinds.
pub const VERSION: &str = "v1";
