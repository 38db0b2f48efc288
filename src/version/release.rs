//! A bundle's version plus release, and their ordering (operator-registry `VersionRelease`).
//!
//! Registry+v1 bundles may put a "release" in the build metadata (`1.0.0+2`). As upstream (with
//! the `BundleReleaseSupport` gate off, its default), build metadata that parses as a release
//! becomes the release and leaves the version; otherwise it stays build metadata.

use std::{cmp::Ordering, fmt};

use super::{VersionError, quote as go_quote};

/// Parses a strict semver version as blang's `Parse` does: `MAJOR.MINOR.PATCH[-PRE][+BUILD]`, no
/// `v`, numbers (numeric prerelease identifiers included) within u64, with blang's error messages.
pub fn parse_strict(text: &str) -> Result<semver::Version, VersionError> {
    let invalid = |message: String| VersionError::InvalidVersion(message);
    if text.is_empty() {
        return Err(invalid("Version string empty".into()));
    }
    let parts: Vec<&str> = text.splitn(3, '.').collect();
    let [major, minor, rest] = parts[..] else {
        return Err(invalid("No Major.Minor.Patch elements found".into()));
    };
    blang_number(major, "major", "Major")?;
    blang_number(minor, "minor", "Minor")?;
    let (rest, build) = match rest.split_once('+') {
        Some((rest, build)) => (rest, Some(build)),
        None => (rest, None),
    };
    let (patch, prerelease) = match rest.split_once('-') {
        Some((patch, pre)) => (patch, Some(pre)),
        None => (rest, None),
    };
    blang_number(patch, "patch", "Patch")?;
    for identifier in prerelease.into_iter().flat_map(|p| p.split('.')) {
        if identifier.is_empty() {
            return Err(invalid("Prerelease is empty".into()));
        }
        if identifier.bytes().all(|b| b.is_ascii_digit()) {
            if identifier.len() > 1 && identifier.starts_with('0') {
                return Err(invalid(format!(
                    "Numeric PreRelease version must not contain leading zeroes {}",
                    go_quote(identifier)
                )));
            }
            parse_go_u64(identifier)?;
        } else if !identifier.bytes().all(is_alphanumeric) {
            return Err(invalid(format!(
                "Invalid character(s) found in prerelease {}",
                go_quote(identifier)
            )));
        }
    }
    for identifier in build.into_iter().flat_map(|b| b.split('.')) {
        if identifier.is_empty() {
            return Err(invalid("Build meta data is empty".into()));
        }
        if !identifier.bytes().all(is_alphanumeric) {
            return Err(invalid(format!(
                "Invalid character(s) found in build meta data {}",
                go_quote(identifier)
            )));
        }
    }
    semver::Version::parse(text).map_err(|e| invalid(e.to_string()))
}

/// blang's characters of prerelease and build identifiers.
fn is_alphanumeric(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

/// One of major, minor, patch, checked in blang's order: characters, leading zeroes, range.
fn blang_number(text: &str, lower: &str, capitalized: &str) -> Result<u64, VersionError> {
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(VersionError::InvalidVersion(format!(
            "Invalid character(s) found in {lower} number {}",
            go_quote(text)
        )));
    }
    if text.len() > 1 && text.starts_with('0') {
        return Err(VersionError::InvalidVersion(format!(
            "{capitalized} number must not contain leading zeroes {}",
            go_quote(text)
        )));
    }
    parse_go_u64(text)
}

/// Go's `strconv.ParseUint(text, 10, 64)` with its error text (`text` holds only digits).
fn parse_go_u64(text: &str) -> Result<u64, VersionError> {
    text.parse::<u64>().map_err(|_| {
        let cause = if text.is_empty() {
            "invalid syntax"
        } else {
            "value out of range"
        };
        VersionError::InvalidVersion(format!("strconv.ParseUint: parsing {}: {cause}", go_quote(text)))
    })
}

/// Semver precedence: numbers, then prerelease; build metadata ignored (blang `Compare`).
pub fn cmp_precedence(a: &semver::Version, b: &semver::Version) -> Ordering {
    (a.major, a.minor, a.patch)
        .cmp(&(b.major, b.minor, b.patch))
        .then_with(|| a.pre.cmp(&b.pre))
}

/// A release: dot-separated semver prerelease identifiers, at most 20 characters; empty = none.
/// A release ranks above no release; releases compare as semver prereleases do.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct Release(semver::Prerelease);

impl Release {
    /// No release.
    pub const NONE: Release = Release(semver::Prerelease::EMPTY);

    /// Parses a release (operator-registry `NewRelease`); `""` is no release.
    pub fn parse(text: &str) -> Result<Release, VersionError> {
        if text.is_empty() {
            return Ok(Release::NONE);
        }
        if text.len() > 20 {
            return Err(VersionError::InvalidRelease(format!(
                "invalid release {}: must be at most 20 characters",
                go_quote(text)
            )));
        }
        semver::Prerelease::new(text)
            .map(Release)
            .map_err(|e| VersionError::InvalidRelease(format!("invalid release {}: {e}", go_quote(text))))
    }

    /// Whether there is no release.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The release text (`""` when none).
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

impl Ord for Release {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self.is_empty(), other.is_empty()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            // Non-empty semver prereleases compare segment by segment, as releases do.
            (false, false) => self.0.cmp(&other.0),
        }
    }
}

impl PartialOrd for Release {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.as_str())
    }
}

/// A bundle version and its release. Ordered by version precedence (build ignored), then release.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VersionRelease {
    /// The version; keeps build metadata that is not a valid release (e.g. `1.0.0+001`).
    pub version: semver::Version,
    /// The release taken from the build metadata, or none.
    pub release: Release,
}

impl VersionRelease {
    /// Parses a registry+v1 version the legacy way (upstream `ParseLegacyVersionRelease`):
    /// `1.0.0-pre+1.alpha.2` is version `1.0.0-pre`, release `1.alpha.2`; `1.0.0+001` keeps `+001`
    /// as build metadata and has no release.
    pub fn parse_legacy(text: &str) -> Result<VersionRelease, VersionError> {
        let mut version = parse_strict(text)?;
        let mut release = Release::NONE;
        if !version.build.is_empty()
            && let Ok(parsed) = Release::parse(version.build.as_str())
        {
            release = parsed;
            version.build = semver::BuildMetadata::EMPTY;
        }
        Ok(VersionRelease { version, release })
    }

    /// Parses a version with an explicit release (as recorded in `status.install.bundle.release`).
    pub fn parse_explicit(version: &str, release: &str) -> Result<VersionRelease, VersionError> {
        Ok(VersionRelease {
            version: parse_strict(version)?,
            release: Release::parse(release)?,
        })
    }

    /// Upstream `VersionRelease.Compare`: version precedence, then release.
    pub fn compare(&self, other: &VersionRelease) -> Ordering {
        cmp_precedence(&self.version, &other.version).then_with(|| self.release.cmp(&other.release))
    }

    /// The version string reported in `status.install.bundle.version` (upstream `MetadataFor` with
    /// the release gate off): the release goes back into the build metadata (`1.0.0+2`).
    pub fn status_version(&self) -> String {
        if self.release.is_empty() {
            self.version.to_string()
        } else {
            let mut v = self.version.clone();
            v.build =
                semver::BuildMetadata::new(self.release.as_str()).unwrap_or(semver::BuildMetadata::EMPTY);
            v.to_string()
        }
    }
}

impl fmt::Display for VersionRelease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.status_version())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_release_from_build_metadata() {
        let vr = VersionRelease::parse_legacy("1.0.0-pre+1.alpha.2").unwrap();
        assert_eq!(vr.version.to_string(), "1.0.0-pre");
        assert_eq!(vr.release.as_str(), "1.alpha.2");
        let vr = VersionRelease::parse_legacy("1.0.0+001").unwrap();
        assert_eq!(vr.version.to_string(), "1.0.0+001");
        assert!(vr.release.is_empty());
        assert_eq!(
            VersionRelease::parse_legacy("1.0.0+2").unwrap().status_version(),
            "1.0.0+2"
        );
    }

    #[test]
    fn ordering_by_version_then_release() {
        let mut list: Vec<VersionRelease> = ["0.0.1", "1.0.0-alpha+1", "1.0.0", "1.0.0-alpha+2"]
            .iter()
            .map(|s| VersionRelease::parse_legacy(s).unwrap())
            .collect();
        list.sort_by(|a, b| b.compare(a));
        let got: Vec<String> = list.iter().map(|v| v.status_version()).collect();
        assert_eq!(got, ["1.0.0", "1.0.0-alpha+2", "1.0.0-alpha+1", "0.0.1"]);
    }

    #[test]
    fn strict_parse_errors_are_blangs() {
        let cases = [
            ("", "Version string empty"),
            ("1.0", "No Major.Minor.Patch elements found"),
            ("v1.0.0", r#"Invalid character(s) found in major number "v1""#),
            ("01.0.0", r#"Major number must not contain leading zeroes "01""#),
            ("1.x.0", r#"Invalid character(s) found in minor number "x""#),
            ("1.00.0", r#"Minor number must not contain leading zeroes "00""#),
            ("1.0.x", r#"Invalid character(s) found in patch number "x""#),
            ("1.0.01", r#"Patch number must not contain leading zeroes "01""#),
            ("1..0", r#"strconv.ParseUint: parsing "": invalid syntax"#),
            (
                "18446744073709551616.0.0",
                r#"strconv.ParseUint: parsing "18446744073709551616": value out of range"#,
            ),
            ("1.0.0-", "Prerelease is empty"),
            ("1.0.0-a..b", "Prerelease is empty"),
            (
                "1.0.0-01",
                r#"Numeric PreRelease version must not contain leading zeroes "01""#,
            ),
            ("1.0.0-a_b", r#"Invalid character(s) found in prerelease "a_b""#),
            ("1.0.0+", "Build meta data is empty"),
            (
                "1.0.0+a_b",
                r#"Invalid character(s) found in build meta data "a_b""#,
            ),
        ];
        for (text, message) in cases {
            let error = parse_strict(text).expect_err(text);
            assert_eq!(error.to_string(), message, "{text}");
        }
        assert_eq!(
            parse_strict("1.0.0-rc.1+001").unwrap().to_string(),
            "1.0.0-rc.1+001"
        );
    }

    #[test]
    fn a_numeric_prerelease_beyond_u64_is_an_error_as_in_blang() {
        assert_eq!(
            parse_strict("1.0.0-18446744073709551616")
                .unwrap_err()
                .to_string(),
            r#"strconv.ParseUint: parsing "18446744073709551616": value out of range"#
        );
        assert!(parse_strict("1.0.0-18446744073709551615").is_ok());
        assert!(VersionRelease::parse_legacy("1.0.0-99999999999999999999").is_err());
    }
}
