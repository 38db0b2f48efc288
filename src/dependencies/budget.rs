//! The budgets of dependency evaluation, charged to the one [`Meter`](crate::meter::Meter): every
//! requirement evaluated against a bundle is charged its worst-case cost before it runs, so a
//! catalog can make no check or plan do more than its budget, whatever its bundles declare.
//!
//! A unit is the meter's ([`crate::meter::Work`]): a `package` or `gvk` comparison is one, a CEL
//! rule its static worst-case estimate; compiling and estimating rules, and the texts a plan
//! renders, are charged in the same units. The budgets below were set from measurements
//! (docs/limits-and-faults.md, "One meter for catalog-driven work"): the largest real problems
//! use a small fraction of them, and a problem at its budget finishes within a second or so on
//! this project's machines.

use std::time::Duration;

/// The work of one plan (`olmv1 resolve --with-dependencies`, `install --with-dependencies`,
/// `explain`): every requirement of every candidate reached, against every candidate that may
/// satisfy it. The real catalogs' largest plans use under 0.1% of it.
pub const PLAN_WORK_UNITS: u64 = 50_000_000;

/// The longest one plan may take, loading to explanation (its meter's deadline).
pub const PLAN_DURATION: Duration = Duration::from_secs(10);

/// The work of one dependency check of the controller (a bundle's requirements against the
/// installed bundles and served APIs, and the installed dependents' requirements against the
/// change): a reconcile worker never spends more than this on a catalog's requirements.
pub const CHECK_WORK_UNITS: u64 = 20_000_000;

/// The longest one dependency check of the controller may take (its meter's deadline).
pub const CHECK_DURATION: Duration = Duration::from_secs(10);

/// A meter for one controller dependency check: [`CHECK_WORK_UNITS`] within [`CHECK_DURATION`].
pub fn check_meter() -> crate::meter::Meter {
    crate::meter::Meter::new(CHECK_WORK_UNITS).with_deadline(CHECK_DURATION)
}
