//! Reconcilers: ClusterExtension, ClusterCatalog, Upgradeable.

pub mod cli;
pub mod cluster_catalog;
pub mod cluster_extension;
pub mod leader;
pub mod metrics;
pub mod status;
pub mod upgradeable;
