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

/// The longest version range read, in bytes (both syntaxes). Ranges come from catalogs
/// (`olm.package.required`, `skipRange`) and from users (`spec.source.catalog.version`, which the
/// CRD caps at 64 bytes). The longest in the shared catalogs is 37 bytes (`pg4k-pgd.v1.1.1`'s
/// versionRange); 1 KiB is 27 times that, and keeps every later step (splitting, regex matching,
/// quoting) small.
pub const MAX_RANGE_BYTES: usize = 1024;
/// The most `||` alternatives in one range. The shared catalogs use at most 2; 32 is 16 times that.
pub const MAX_RANGE_ALTERNATIVES: usize = 32;
/// The most comparators (`>=1.0.0`, `1.2.x`, `~1.2`: the terms as written) in one range, over all
/// its alternatives: each is checked against every candidate version, so this bounds a range's
/// cost per version. The shared catalogs use at most 4 (`>=1.22.8 < 1.23.0 || >=1.25.0 <1.26.0`);
/// 64 is 16 times that.
pub const MAX_RANGE_COMPARATORS: usize = 64;

/// Why a version, version range or release could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    /// A version range that is not Masterminds syntax; the text is upstream's (the part quoted
    /// and cut).
    #[error("improper constraint: {}", quote(.0))]
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
    /// A range longer than [`MAX_RANGE_BYTES`]; `range` is its start, quoted and cut.
    #[error("range {range} is {bytes} bytes, over the limit of {limit}")]
    RangeTooLong {
        /// The range, quoted and cut (`go_quote_cut`).
        range: String,
        /// Its length.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// A range with more `||` alternatives or comparators than allowed; `range` is quoted and cut.
    #[error("range {range} has {count} {what}, over the limit of {limit}")]
    RangeTooManyTerms {
        /// The range, quoted and cut (`go_quote_cut`).
        range: String,
        /// What was counted: `alternatives` or `comparators`.
        what: &'static str,
        /// How many it has.
        count: usize,
        /// The limit.
        limit: usize,
    },
}

/// Refuses a range over [`MAX_RANGE_BYTES`] before any other work is done on it.
fn check_range_bytes(text: &str) -> Result<(), VersionError> {
    if text.len() > MAX_RANGE_BYTES {
        return Err(VersionError::RangeTooLong {
            range: quote(text),
            bytes: text.len(),
            limit: MAX_RANGE_BYTES,
        });
    }
    Ok(())
}

/// Refuses a range whose `count` of `what` is over `limit`.
fn check_range_terms(text: &str, what: &'static str, count: usize, limit: usize) -> Result<(), VersionError> {
    if count > limit {
        return Err(VersionError::RangeTooManyTerms {
            range: quote(text),
            what,
            count,
            limit,
        });
    }
    Ok(())
}

/// Range text in a message: quoted and cut.
fn quote(text: &str) -> String {
    crate::go_format::go_quote_cut(text, crate::go_format::QUOTE_CHARS)
}
