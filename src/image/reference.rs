//! Image references: `registry[:port]/repository[:tag][@digest]`, fully qualified as upstream
//! requires (`reference.ParseNamed` rejects names without a registry domain).

use std::fmt;
use std::sync::LazyLock;

use regex::Regex;

use super::ImageError;

// One path component of a repository name, as the distribution reference grammar spells it.
static REPOSITORY_COMPONENT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[a-z0-9]+(?:(?:[._]|__|[-]*)[a-z0-9]+)*$").expect("static regex"));
static TAG: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^[\w][\w.-]{0,127}$").expect("static regex"));
static DOMAIN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(?::[0-9]+)?$|^\[[0-9a-fA-F:]+\](?::[0-9]+)?$")
        .expect("static regex")
});

/// A fully qualified image reference.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ImageReference {
    /// Registry host, with port if any, as written (e.g. `quay.io`, `127.0.0.1:5000`).
    pub registry: String,
    /// Repository path inside the registry (e.g. `operatorhubio/catalog`).
    pub repository: String,
    /// Tag, if the reference names one.
    pub tag: Option<String>,
    /// Digest (`sha256:<hex>`), if the reference names one.
    pub digest: Option<String>,
}

impl ImageReference {
    /// Parses a reference; it must name a registry and a tag or a digest.
    pub fn parse(reference: &str) -> Result<Self, ImageError> {
        let invalid = |reason: &str| ImageError::InvalidReference {
            reference: reference.to_string(),
            reason: reason.to_string(),
        };
        if reference.is_empty() || reference.len() > 1000 {
            return Err(invalid("must be between 1 and 1000 characters"));
        }
        let (name_and_tag, digest) = match reference.split_once('@') {
            Some((left, digest)) => {
                validate_digest(digest).map_err(|reason| invalid(&reason))?;
                (left, Some(digest.to_string()))
            }
            None => (reference, None),
        };
        let last_slash = name_and_tag.rfind('/').ok_or_else(|| {
            invalid("repository name must be canonical (include a registry domain, e.g. quay.io/org/name)")
        })?;
        let (name, tag) = match name_and_tag[last_slash..].rfind(':') {
            Some(colon) => {
                let at = last_slash + colon;
                (&name_and_tag[..at], Some(name_and_tag[at + 1..].to_string()))
            }
            None => (name_and_tag, None),
        };
        if let Some(tag) = &tag
            && !TAG.is_match(tag)
        {
            return Err(invalid("tag must match [\\w][\\w.-]{0,127}"));
        }
        let (registry, repository) = name
            .split_once('/')
            .ok_or_else(|| invalid("missing repository"))?;
        let looks_like_domain = registry.contains('.') || registry.contains(':') || registry == "localhost";
        if !looks_like_domain || !DOMAIN.is_match(registry) {
            return Err(invalid(
                "repository name must be canonical (include a registry domain, e.g. quay.io/org/name)",
            ));
        }
        if repository
            .split('/')
            .any(|component| !REPOSITORY_COMPONENT.is_match(component))
        {
            return Err(invalid(
                "repository must be lowercase alphanumeric components separated by '/', '.', '_', '__' or '-'",
            ));
        }
        if tag.is_none() && digest.is_none() {
            return Err(invalid("must end with a digest or a tag"));
        }
        Ok(ImageReference {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag,
            digest,
        })
    }

    /// The canonical digest form `registry/repository@digest` for a resolved digest.
    pub fn with_digest(&self, digest: &str) -> String {
        format!("{}/{}@{}", self.registry, self.repository, digest)
    }

    /// What to ask the registry for: the digest when present, else the tag.
    pub fn manifest_reference(&self) -> &str {
        self.digest.as_deref().or(self.tag.as_deref()).unwrap_or("latest")
    }

    /// The host that serves the distribution API (Docker Hub's API host differs from its name).
    pub fn api_host(&self) -> &str {
        if self.registry == "docker.io" {
            "registry-1.docker.io"
        } else {
            &self.registry
        }
    }

    /// True when the registry is on a loopback address.
    pub fn is_loopback(&self) -> bool {
        is_loopback_host(&self.registry)
    }
}

impl fmt::Display for ImageReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// True for `localhost`, `127.x.y.z` and `[::1]`, with or without a port.
pub fn is_loopback_host(host_and_port: &str) -> bool {
    let host = if let Some(rest) = host_and_port.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        host_and_port
            .rsplit_once(':')
            .map_or(host_and_port, |(host, _)| host)
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .map(|ip| ip.is_loopback())
            .unwrap_or(false)
}

/// Checks `algorithm:hex`; only sha256 (64 hex characters) is verifiable here.
pub fn validate_digest(digest: &str) -> Result<(), String> {
    match digest.split_once(':') {
        Some(("sha256", hex)) if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) => Ok(()),
        Some(("sha256", _)) => Err(format!("digest {digest:?} must have 64 hex characters")),
        Some((algorithm, _)) => Err(format!(
            "digest algorithm {algorithm:?} is not supported (only sha256)"
        )),
        None => Err(format!("digest {digest:?} must be of the form sha256:<hex>")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn parses_tag_digest_and_port() {
        let r = ImageReference::parse("127.0.0.1:5000/catalogs/community:v4.16").unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "catalogs/community");
        assert_eq!(r.tag.as_deref(), Some("v4.16"));
        assert!(r.is_loopback());
        let r = ImageReference::parse(&format!("quay.io/org/name:tag@{DIGEST}")).unwrap();
        assert_eq!(r.digest.as_deref(), Some(DIGEST));
        assert_eq!(r.manifest_reference(), DIGEST);
        assert_eq!(r.with_digest(DIGEST), format!("quay.io/org/name@{DIGEST}"));
        assert_eq!(
            ImageReference::parse("localhost/a:b").unwrap().to_string(),
            "localhost/a:b"
        );
    }

    #[test]
    fn rejects_non_canonical_and_bad_references() {
        for bad in [
            "invalid-src-ref",
            "busybox:latest",
            "library/busybox:latest",
            "quay.io/org/name",
            "quay.io/Org/name:tag",
            "quay.io/org/name@sha256:abc",
            "quay.io/org/name@md5:0123456789abcdef0123456789abcdef",
            "quay.io/org/name:-bad",
        ] {
            assert!(ImageReference::parse(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn loopback_hosts() {
        assert!(is_loopback_host("localhost:5000"));
        assert!(is_loopback_host("127.0.0.1"));
        assert!(is_loopback_host("[::1]:5000"));
        assert!(!is_loopback_host("quay.io"));
        assert!(!is_loopback_host("10.0.0.1:5000"));
    }
}
