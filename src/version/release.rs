//! A bundle's version plus release, and their ordering (operator-registry `VersionRelease`).
//!
//! Registry+v1 bundles may put a "release" in the build metadata (`1.0.0+2`). As upstream (with
//! the `BundleReleaseSupport` gate off, its default), build metadata that parses as a release
//! becomes the release and leaves the version; otherwise it stays build metadata.

use std::{cmp::Ordering, fmt};

use super::VersionError;

/// Parses a strict semver version (blang `Parse`): `MAJOR.MINOR.PATCH[-PRE][+BUILD]`, no `v`.
pub fn parse_strict(text: &str) -> Result<semver::Version, VersionError> {
    if text.is_empty() {
        return Err(VersionError::InvalidVersion("Version string empty".to_string()));
    }
    semver::Version::parse(text).map_err(|e| VersionError::InvalidVersion(format!("{e}")))
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
                "invalid release {text:?}: must be at most 20 characters"
            )));
        }
        semver::Prerelease::new(text)
            .map(Release)
            .map_err(|e| VersionError::InvalidRelease(format!("invalid release {text:?}: {e}")))
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
}
