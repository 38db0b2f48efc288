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

use std::time::Duration;

use crate::meter::{Exhausted, Meter};

/// The work of one admin command's computation over catalogs (`versions`, `search`, `upgrades`,
/// `explain`, `resolve`): every bundle, entry and edge walked, every requirement read and rule
/// compiled, every resolution and plan, every text made from catalog content, charged to one
/// [`Meter`] (docs/limits-and-faults.md, "One meter for catalog-driven work").
pub const COMMAND_WORK_UNITS: u64 = 200_000_000;

/// The longest one admin command's computation over catalogs may take (its meter's deadline): a
/// backstop for what the work budget does not see (a catalog's content read from disk, a busy
/// machine); the budget itself ends a release build's command within a second or so.
pub const COMMAND_DURATION: Duration = Duration::from_secs(60);

/// The environment variable that sets an admin command's budget instead of
/// [`COMMAND_WORK_UNITS`] (a plan within the command gets no more either): to bound the command
/// line tighter, or to give a debug build the same CPU budget as a release one (the fuzzer's
/// bounded run).
pub const WORK_UNITS_ENV: &str = "OLMV1_WORK_UNITS";

/// The budget of one admin command: `OLMV1_WORK_UNITS` when set to a number, else
/// [`COMMAND_WORK_UNITS`].
pub fn command_work_units() -> u64 {
    std::env::var(WORK_UNITS_ENV)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(COMMAND_WORK_UNITS)
}

/// A meter for one admin command: [`command_work_units`] within [`COMMAND_DURATION`].
pub fn command_meter() -> Meter {
    Meter::new(command_work_units()).with_deadline(COMMAND_DURATION)
}

/// What an item of a command that charges each item on a part of its meter (`status`'
/// extensions, `migrate check`'s Subscriptions) says when the command's meter ran out
/// ([`Meter::exhausted`]) before its answer: one sentence naming the command's limit, which ran
/// out while the item was worked on (`during`) or was spent on the `items` before it.
pub fn not_checked(exhausted: Exhausted, items: &str, during: bool) -> String {
    let limit = match exhausted {
        Exhausted::Work { limit } => format!("the command's budget of {limit} work units"),
        Exhausted::Time { limit } => {
            format!("the command's time limit of {} s", limit.as_secs_f64())
        }
    };
    if during {
        format!("not checked: {limit} ran out during its check")
    } else {
        format!("not checked: {limit} was spent on the {items} before it")
    }
}

/// The refusal of such a command (its exit status 2), one sentence: `checking the 40 extensions
/// needs more than the budget of N work units: 12 of them were not checked`.
/// `items` is a plural ("extensions"); one item is named in the singular.
pub fn not_all_checked(exhausted: Exhausted, items: &str, not_checked: usize, total: usize) -> String {
    if total == 1 {
        let item = items.strip_suffix('s').unwrap_or(items);
        return format!("checking the one {item} {exhausted}: it was not checked");
    }
    let were = match not_checked {
        1 => "1 of them was".to_string(),
        n => format!("{n} of them were"),
    };
    format!("checking the {total} {items} {exhausted}: {were} not checked")
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_not_all_checked_counts_its_items_in_words_that_agree() {
        let e = Exhausted::Work { limit: 10 };
        assert_eq!(
            not_all_checked(e, "extensions", 3, 5),
            "checking the 5 extensions needs more than the budget of 10 work units: 3 of them were not checked"
        );
        assert_eq!(
            not_all_checked(e, "Subscriptions", 1, 2),
            "checking the 2 Subscriptions needs more than the budget of 10 work units: 1 of them was not checked"
        );
        assert_eq!(
            not_all_checked(e, "extensions", 1, 1),
            "checking the one extension needs more than the budget of 10 work units: it was not checked"
        );
    }
}
