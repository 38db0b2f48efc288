//! Reconcilers: ClusterExtension, ClusterCatalog, Upgradeable.

pub mod cli;
pub mod upgradeable;
