//! Owns what the admin commands compute and the workflows they run (resolve, render, search,
//! versions, upgrades, graphs, explain, status, installer RBAC and the installer itself,
//! install/upgrade/uninstall, catalog sources, the request `explain` and `upgrades` resolve,
//! cluster reader, migration from OLM classic), and their text forms.
//! May import api, version, image, catalog, resolve, dependencies, bundle, apply, and controller
//! (only what makes the command line judge as the controller does: the dependency check's view of
//! installed extensions, served APIs and its blocked message); never cmd.
//!
//! What the admin's command line (`olmv1 resolve|render|search|versions|upgrades|explain|status|
//! rbac|install|upgrade|uninstall|migrate`) computes and does: pure functions over catalog
//! indexes and the controller's own resolver, the cluster reader they share, the workflows a test
//! can call, and the text each command shows. A workflow says what it does through a
//! [`Reporter`] and asks through a [`Confirm`]; argument parsing, writing to the terminal and exit
//! codes live in `src/cmd/`. Within admin, imports go one way: `migrate` and `explain` ->
//! `install` -> `installer` -> `sources` -> `cluster`, `resolve` -> `request` -> `sources`, and
//! `status` -> `upgrades`.

pub mod cluster;
pub mod dependencies;
pub mod explain;
pub mod graph;
pub mod install;
pub mod installer;
pub mod migrate;
pub mod output;
pub mod rbac;
pub mod render;
pub mod request;
pub mod resolve;
pub mod search;
pub mod sources;
pub mod status;
pub mod table;
pub mod terminal;
pub mod upgrades;
pub mod versions;

/// What a workflow says as it goes, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// Output, exactly as printed (newlines included).
    Out(String),
    /// A line for stderr, after the command's name (`olmv1 install: <text>`).
    Warning(String),
}

/// Where a workflow's [`Report`]s go.
pub type Reporter<'a> = &'a mut dyn FnMut(Report);

/// Asks whether to go on with what the question says; an error (its message) stops the workflow
/// with nothing more written.
pub type Confirm<'a> = &'a mut dyn FnMut(&str) -> Result<(), String>;
