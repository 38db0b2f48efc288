//! Command-line parsing and start-up of the `olmv1` subcommands (their logic is in library
//! modules: `admin`, `resolve`, ...).

pub mod explain;
pub mod install;
pub mod search;
pub mod sources;
pub mod status;
pub mod upgrades;
pub mod versions;
