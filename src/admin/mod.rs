//! Owns what the admin commands compute (search, versions, upgrades, graphs, installer RBAC, cluster reader).
//! May import api, version, image, catalog, resolve, dependencies, bundle, apply; never controller or cmd.
//!
//! What the admin's command line (`olmv1 search|versions|upgrades|explain|status`) computes:
//! pure functions over catalog indexes and the controller's own resolver, plus the cluster
//! reader they share. Argument parsing and printing live in `src/cmd/`.

pub mod cluster;
pub mod dependencies;
pub mod graph;
pub mod migrate;
pub mod rbac;
pub mod search;
pub mod table;
pub mod terminal;
pub mod upgrades;
pub mod versions;
