//! Owns operator dependencies: the requirement model, its CEL rules, the evaluator (pure).
//! May import go_format, escape, version, catalog, resolve; never bundle, apply, controller, admin or cmd.
//!
//! OLM classic's dependency model (`../shared/reference/dependencies.md`), made a pure library:
//!
//! - **Parsing.** [`requirements_of`] reads a bundle's requirements from its properties (a catalog's
//!   `olm.bundle` properties, or a bundle image's `metadata/properties.yaml`);
//!   [`requirements_from_bundle_metadata`] adds an image's `metadata/dependencies.yaml`. Every form is
//!   read: `olm.package.required` `{packageName, versionRange}` (blang range), `olm.gvk.required`
//!   `{group, version, kind}`, `olm.constraint` with `failureMessage` and exactly one of `package`,
//!   `gvk`, `cel`, `all`, `any`, `not` (`none`, its deprecated spelling, ignored when `not` is set).
//!   Unknown fields are refused (keys matched case-insensitively, as Go's decoder does). Every
//!   requirement is bounded before anything is evaluated (docs/limits-and-faults.md, "Requirements
//!   and version ranges"): raw bytes per property ([`MAX_CONSTRAINT_BYTES`], [`MAX_REQUIRED_BYTES`]),
//!   field lengths, nesting ([`MAX_CONSTRAINT_DEPTH`]), nodes and CEL rules per constraint and per
//!   bundle, requirements per bundle, version ranges; a CEL rule is compiled while parsing, once
//!   its tree and the bundle are within the limits, so a rule that does not compile or is not
//!   boolean is an error of the bundle ([`DependencyError`]), never "unsatisfied".
//! - **Facts.** [`BundleFacts`] is what a requirement is evaluated against: the bundle's package,
//!   version (blang `Parse` of its `olm.package` version), provided APIs (`olm.gvk`) and all its
//!   properties (what CEL sees).
//! - **Evaluation.** [`Requirement::satisfied_by`] (and [`Constraint::holds`]) answer "does this
//!   candidate bundle satisfy this requirement": each requirement is one predicate over one bundle,
//!   compound ones included, as classic evaluates them. [`unsatisfied`] answers "which requirements
//!   of a bundle are unsatisfied by these installed bundles and these served APIs", each with an
//!   admin-readable reason ([`Unsatisfied`]: the `failureMessage` when the author gave one). A served
//!   API counts only for a requirement that names an API (`olm.gvk.required`, or a `gvk` inside a
//!   constraint): it stands for a bundle providing that one API.
//! - **CEL.** [`CelRule`]: cel-rust with one variable, `properties` (a list of `{type, value}` maps,
//!   JSON numbers as doubles as Go decodes them), and `semver_compare(a, b)` (blang `Compare` after
//!   `ParseTolerant` of both arguments' `fmt.Sprint`). Bounded: rule length, parser nesting, AST
//!   depth and size, comprehension nesting and a static worst-case cost estimate
//!   ([`CelRule::estimated_cost`], over [`MAX_CEL_COST`] refused) at compile time, once per process;
//!   the candidate's properties by count and size at run time (a larger bundle does not match).
//!   [`Constraint::cost`] sums a tree's estimates for callers to charge. An evaluation error means
//!   "does not match", as in classic.

mod budget;
mod cel_rule;
mod installed;
mod model;
mod parse;
mod plan;

pub use budget::{CHECK_DURATION, CHECK_WORK_UNITS, PLAN_DURATION, PLAN_WORK_UNITS, check_meter};
pub use cel_rule::{
    CelInput, CelRule, CompileError, MAX_CACHED_BYTES as MAX_CEL_CACHED_BYTES, MAX_COST as MAX_CEL_COST,
    cache_usage as cel_cache_usage, compile_pattern_within, semver_compare,
};
pub use installed::{BrokenDependent, DependencyVerdict, broken_by_change, check_dependencies_within};
pub use model::{
    BundleFacts, Constraint, Gvk, LEAF_UNITS, MAX_SHORT_CHARS, PROPERTY_GVK, Requirement, Unsatisfied,
    unsatisfied,
};
pub use parse::{
    MAX_API_VERSION_BYTES, MAX_BUNDLE_NODES, MAX_CEL_RULES_PER_BUNDLE, MAX_CEL_RULES_PER_CONSTRAINT,
    MAX_CONSTRAINT_BYTES, MAX_CONSTRAINT_DEPTH, MAX_CONSTRAINT_NODES, MAX_FAILURE_MESSAGE_BYTES,
    MAX_GROUP_BYTES, MAX_KIND_BYTES, MAX_PACKAGE_NAME_BYTES, MAX_REQUIRED_BYTES, MAX_REQUIREMENTS,
    has_dependencies, requirements_from_bundle_metadata, requirements_of,
};
pub use plan::{
    Choice, InstalledExtension, KeptBundle, Plan, PlanError, PlanLimits, PlanRequest, PlannedBundle, plan,
    plan_within,
};

/// Why a bundle's dependencies cannot be read. Each message names the bundle and the cause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DependencyError {
    /// A requirement property (or a `dependencies.yaml` entry) is malformed, too large, too
    /// deep, or holds a CEL rule that does not compile.
    #[error("bundle {bundle:?} has an invalid {property} dependency: {message}")]
    Invalid {
        /// The bundle.
        bundle: String,
        /// The property (or dependency) type, e.g. `olm.constraint`.
        property: String,
        /// What is wrong.
        message: String,
    },
    /// Reading the requirements (their text, compiling their CEL rules) ran out of the meter of
    /// the check, plan or command reading them.
    #[error("bundle {bundle:?}: reading its {property} dependency {exhausted}")]
    Exhausted {
        /// The bundle.
        bundle: String,
        /// The property type, e.g. `olm.constraint`.
        property: String,
        /// The budget or deadline that ran out.
        exhausted: crate::meter::Exhausted,
    },
    /// A bundle image's `metadata/dependencies.yaml` or `metadata/properties.yaml` is not readable.
    #[error("bundle {bundle:?}: {file} is invalid: {message}")]
    File {
        /// The bundle.
        bundle: String,
        /// The file, e.g. `metadata/dependencies.yaml`.
        file: String,
        /// What is wrong.
        message: String,
    },
}

impl DependencyError {
    /// True but for a deadline passed: the bundle's content does not change; only another bundle
    /// (a catalog update) can help, which callers watch for anyway. A deadline may pass on a
    /// busy machine, so that is retried.
    pub fn is_terminal(&self) -> bool {
        !matches!(
            self,
            DependencyError::Exhausted {
                exhausted: crate::meter::Exhausted::Time { .. },
                ..
            }
        )
    }
}

#[cfg(test)]
mod hostile_tests;
#[cfg(test)]
mod tests;
