//! Owns version ranges (Masterminds), skipRanges (blang), version+release ordering (pure).
//! May import go_format only (a bottom layer), and third-party crates.
//!
//! Version ranges (Masterminds semver v3 constraints), skipRange (blang semver v4 ranges), and
//! OLM's version+release ordering.
//!
//! - [`VersionRange`]: `spec.source.catalog.version`, e.g. `>=1.11, <1.13`, `1.11.x`, `~1.12`, `^0.2.3`.
//! - [`SkipRange`]: the `skipRange` of a channel entry, e.g. `>=4.1.0 <4.1.2`.
//! - [`VersionRelease`]: a bundle's version plus its optional release (`1.0.0+2` = 1.0.0 release 2).

#[cfg(test)]
mod generated;
mod masterminds;
mod release;
mod skip_range;

pub use masterminds::{LooseVersion, VersionRange, check_one_constraint};
pub use release::{Release, VersionRelease, cmp_precedence, parse_strict};
pub use skip_range::SkipRange;

/// Why a version, version range or release could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    /// A version range that is not Masterminds syntax; the text is upstream's.
    #[error("improper constraint: {0:?}")]
    ImproperConstraint(String),
    /// A constraint whose version Masterminds cannot build (e.g. a prerelease with a leading zero).
    #[error("constraint parser error")]
    ConstraintParser,
    /// A version that is not strict semver (`MAJOR.MINOR.PATCH[-PRE][+BUILD]`).
    #[error("{0}")]
    InvalidVersion(String),
    /// A skipRange that blang semver cannot parse.
    #[error("{0}")]
    InvalidSkipRange(String),
    /// A release that is not dot-separated semver prerelease identifiers of at most 20 characters.
    #[error("{0}")]
    InvalidRelease(String),
}
