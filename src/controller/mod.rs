//! Owns the reconcilers (ClusterExtension, ClusterCatalog, Upgradeable) and their metrics.
//! May import every module below it (api, version, image, catalog, resolve, dependencies, bundle,
//! apply); never cmd.
//!
//! Reconcilers: ClusterExtension, ClusterCatalog, Upgradeable.

pub mod cluster_catalog;
pub mod cluster_extension;
pub mod finalizer;
pub mod metrics;
pub mod status;
pub mod upgradeable;
