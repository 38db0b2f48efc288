//! Resolution tests: version-range conformance tables, upstream's resolver cases as data, the
//! real-catalog snapshots, and the `olmv1 resolve` command. None needs a cluster.

#[path = "../support/mod.rs"]
mod support;

mod cases;
mod cli;
mod deadline;
mod dependencies;
mod real_catalogs;
mod version_tables;
