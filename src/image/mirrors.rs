//! Registry mirrors and remapping from a containers-registries.conf(5) file (its version 2
//! `[[registry]]` tables, and version 1's insecure and blocked lists), as containers/image reads
//! it for CRI-O, podman and upstream OLM: which hosts an image reference is pulled from, in order.
//! Pure: [`RegistriesConf::parse`] validates the text, [`RegistriesConf::pull_sources`] maps a
//! reference to its sources. The file is read once, at start-up ([`RegistriesConf::load`]).
//!
//! The rules (containers-registries.conf(5)):
//! - the one `[[registry]]` table whose `prefix` is the longest match of the reference is used; a
//!   prefix matches when the reference starts with it and continues with `/`, `:` or `@` (or ends);
//!   `*.example.com` matches any subdomain of example.com, as a host only;
//! - a missing `prefix` is the `location`; a missing `location` is the `prefix` (a wildcard prefix
//!   keeps the reference as written);
//! - sources: each `[[registry.mirror]]` in order, then the primary `location`; a mirror's part of
//!   the reference after the prefix is appended to its `location`;
//! - `mirror-by-digest-only = true`: mirrors only for references by digest; per mirror,
//!   `pull-from-mirror = "digest-only" | "tag-only" | "all"` (not together with the former);
//! - `blocked = true`: no source under the prefix is contacted (a mirror elsewhere still is);
//! - `insecure = true`: plain HTTP is allowed for what falls under the prefix, or the mirror.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::reference::ImageReference;

/// The default file, read when no flag or `CONTAINERS_REGISTRIES_CONF` names another.
pub const DEFAULT_REGISTRIES_CONF: &str = "/etc/containers/registries.conf";
/// The environment variable containers/image reads for another file.
pub const REGISTRIES_CONF_ENV: &str = "CONTAINERS_REGISTRIES_CONF";
/// The largest file read: real ones are a few KiB (an OpenShift cluster's with hundreds of
/// mirrors stays far below this).
pub const MAX_REGISTRIES_CONF_BYTES: u64 = 1 << 20;

/// A registries configuration that cannot be used, or a pull it refuses.
#[derive(Debug, thiserror::Error)]
pub enum RegistriesConfError {
    /// The file cannot be read.
    #[error("cannot read the registries configuration {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid registries.conf.
    #[error("the registries configuration {file} is invalid: {cause}")]
    Invalid {
        /// The file.
        file: String,
        /// What is wrong.
        cause: String,
    },
    /// The reference matches a blocked registry.
    #[error("image {image}: registry {prefix} is blocked in {file}")]
    Blocked {
        /// The image as referenced.
        image: String,
        /// The blocked prefix.
        prefix: String,
        /// The configuration file.
        file: String,
    },
    /// A prefix or location rewrites the reference into something that is not a reference.
    #[error(
        "image {image}: rewriting it with {location:?} of {file} gives {rewritten:?}, not a valid image reference"
    )]
    Rewrite {
        /// The image as referenced.
        image: String,
        /// The location used.
        location: String,
        /// The result.
        rewritten: String,
        /// The configuration file.
        file: String,
    },
}

impl RegistriesConfError {
    /// Every one of these needs the admin to change the file or the reference.
    pub fn is_terminal(&self) -> bool {
        true
    }
}

/// Which references a mirror serves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PullFromMirror {
    /// References by tag and by digest.
    #[default]
    All,
    /// References by digest only.
    DigestOnly,
    /// References by tag only.
    TagOnly,
}

/// One `[[registry.mirror]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mirror {
    /// Where the prefix's images are found instead.
    pub location: String,
    /// Plain HTTP allowed.
    pub insecure: bool,
    /// Which references it serves.
    pub pull_from: PullFromMirror,
}

/// One `[[registry]]` table, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registry {
    /// What references it applies to (`host[:port][/path]`, or `*.domain`).
    pub prefix: String,
    /// The primary location; empty for a wildcard prefix without one (the reference is kept).
    pub location: String,
    /// Plain HTTP allowed.
    pub insecure: bool,
    /// No pulls.
    pub blocked: bool,
    /// Mirrors only for references by digest.
    pub mirror_by_digest_only: bool,
    /// Tried before the primary location, in order.
    pub mirrors: Vec<Mirror>,
}

/// A registries configuration: the tables of one file (none: every pull goes where its
/// reference says).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegistriesConf {
    /// The file it was read from, for messages.
    pub file: String,
    /// The tables, in file order.
    pub registries: Vec<Registry>,
}

/// Where to try to pull an image from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullSource {
    /// The reference to pull (the image's own, or rewritten to a mirror or location).
    pub reference: ImageReference,
    /// Whether this is a mirror (false: the primary location).
    pub mirror: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct FileToml {
    #[serde(default)]
    registry: Vec<RegistryToml>,
    #[serde(default)]
    registries: Option<V1Toml>,
}

// Unknown keys (unqualified-search-registries, aliases, ...) are ignored, as containers/image
// ignores what it does not use.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RegistryToml {
    prefix: Option<String>,
    location: Option<String>,
    #[serde(default)]
    insecure: bool,
    #[serde(default)]
    blocked: bool,
    #[serde(default)]
    mirror_by_digest_only: bool,
    #[serde(default)]
    mirror: Vec<MirrorToml>,
    pull_from_mirror: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct MirrorToml {
    location: Option<String>,
    #[serde(default)]
    insecure: bool,
    pull_from_mirror: Option<String>,
}

#[derive(Deserialize)]
struct V1Toml {
    #[serde(default)]
    insecure: Option<V1List>,
    #[serde(default)]
    block: Option<V1List>,
}

#[derive(Deserialize)]
struct V1List {
    #[serde(default)]
    registries: Vec<String>,
}

impl RegistriesConf {
    /// The file to read: `flag`, else `CONTAINERS_REGISTRIES_CONF` (`env`), else
    /// [`DEFAULT_REGISTRIES_CONF`] when it exists; `None` when there is none.
    pub fn path(flag: Option<&Path>, env: Option<&str>) -> Option<PathBuf> {
        if let Some(flag) = flag {
            return Some(flag.to_path_buf());
        }
        if let Some(env) = env.filter(|e| !e.is_empty()) {
            return Some(PathBuf::from(env));
        }
        let default = Path::new(DEFAULT_REGISTRIES_CONF);
        default.exists().then(|| default.to_path_buf())
    }

    /// The configuration a command pulls with: `flag`, else [`REGISTRIES_CONF_ENV`], else
    /// [`DEFAULT_REGISTRIES_CONF`] when present (none: every pull goes where its reference says).
    pub fn configured(flag: Option<&Path>) -> Result<Self, RegistriesConfError> {
        let env = std::env::var(REGISTRIES_CONF_ENV).ok();
        match Self::path(flag, env.as_deref()) {
            Some(path) => Self::load(&path),
            None => Ok(Self::default()),
        }
    }

    /// Reads and validates `path` (at most [`MAX_REGISTRIES_CONF_BYTES`]).
    pub fn load(path: &Path) -> Result<Self, RegistriesConfError> {
        use std::io::Read;
        let read_err = |source| RegistriesConfError::Read {
            path: path.to_path_buf(),
            source,
        };
        let file = std::fs::File::open(path).map_err(read_err)?;
        let mut text = String::new();
        file.take(MAX_REGISTRIES_CONF_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(read_err)?;
        if text.len() as u64 > MAX_REGISTRIES_CONF_BYTES {
            return Err(RegistriesConfError::Invalid {
                file: path.display().to_string(),
                cause: format!("it is larger than {MAX_REGISTRIES_CONF_BYTES} bytes"),
            });
        }
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses and validates the text of a registries.conf named `file`.
    pub fn parse(text: &str, file: &str) -> Result<Self, RegistriesConfError> {
        let invalid = |cause: String| RegistriesConfError::Invalid {
            file: file.to_string(),
            cause,
        };
        let parsed: FileToml = toml::from_str(text).map_err(|e| invalid(e.message().to_string()))?;
        let mut registries = Vec::new();
        if let Some(v1) = parsed.registries {
            // Version 1: lists of hosts; it cannot be mixed with version 2's tables.
            if !parsed.registry.is_empty() {
                return Err(invalid(
                    "mixing version 1 ([registries.*]) and version 2 ([[registry]]) is not allowed".into(),
                ));
            }
            let mut v1_table =
                |host: &str, insecure: bool, blocked: bool| -> Result<(), RegistriesConfError> {
                    let host = parse_location(host).map_err(&invalid)?;
                    match registries.iter_mut().find(|r: &&mut Registry| r.location == host) {
                        Some(r) => {
                            r.insecure |= insecure;
                            r.blocked |= blocked;
                        }
                        None => registries.push(Registry {
                            prefix: host.clone(),
                            location: host,
                            insecure,
                            blocked,
                            mirror_by_digest_only: false,
                            mirrors: vec![],
                        }),
                    }
                    Ok(())
                };
            for host in v1.insecure.map(|l| l.registries).unwrap_or_default() {
                v1_table(&host, true, false)?;
            }
            for host in v1.block.map(|l| l.registries).unwrap_or_default() {
                v1_table(&host, false, true)?;
            }
        }
        for table in parsed.registry {
            registries.push(validate_table(table).map_err(&invalid)?);
        }
        // One location may appear in several tables (prefixes with different mirrors), but they
        // must agree on whether it is insecure or blocked.
        for (i, a) in registries.iter().enumerate() {
            for b in &registries[i + 1..] {
                let key = |r: &Registry| {
                    if r.location.is_empty() {
                        r.prefix.clone()
                    } else {
                        r.location.clone()
                    }
                };
                if key(a) == key(b) && (a.insecure != b.insecure || a.blocked != b.blocked) {
                    return Err(invalid(format!(
                        "registry {:?} is defined more than once with conflicting insecure or blocked settings",
                        key(a)
                    )));
                }
            }
        }
        Ok(RegistriesConf {
            file: file.to_string(),
            registries,
        })
    }

    /// The table a reference (or a bare `host[:port]`) falls under: the longest matching prefix,
    /// the first of equal ones.
    pub fn find(&self, reference: &str) -> Option<&Registry> {
        let mut best: Option<&Registry> = None;
        for registry in &self.registries {
            if matching_prefix_len(reference, &registry.prefix).is_some()
                && best.is_none_or(|b| registry.prefix.len() > b.prefix.len())
            {
                best = Some(registry);
            }
        }
        best
    }

    /// Whether the repository `host[:port]/path` may be reached over plain HTTP: the table it
    /// falls under, or a mirror whose location it is under, says `insecure = true`.
    pub fn is_insecure(&self, repository: &str) -> bool {
        self.find(repository).is_some_and(|r| r.insecure)
            || self
                .registries
                .iter()
                .flat_map(|r| &r.mirrors)
                .any(|m| m.insecure && matching_prefix_len(repository, &m.location).is_some())
    }

    /// Where to pull `image` from, in order: the mirrors that serve it, then the primary location.
    /// A source whose own name falls under a blocked table is left out (that is how a source
    /// never to be contacted, OpenShift's `NeverContactSource`, is written); no source left is an
    /// error naming the blocked registry.
    pub fn pull_sources(&self, image: &ImageReference) -> Result<Vec<PullSource>, RegistriesConfError> {
        let name = image.to_string();
        let Some(registry) = self.find(&name) else {
            return Ok(vec![PullSource {
                reference: image.clone(),
                mirror: false,
            }]);
        };
        let by_digest = image.digest.is_some();
        let mirrors = registry.mirrors.iter().filter(|m| {
            if registry.mirror_by_digest_only {
                return by_digest;
            }
            match m.pull_from {
                PullFromMirror::All => true,
                PullFromMirror::DigestOnly => by_digest,
                PullFromMirror::TagOnly => !by_digest,
            }
        });
        let mut sources = Vec::new();
        let mut blocked = None;
        let endpoints = mirrors
            .map(|m| (m.location.as_str(), true))
            .chain([(registry.location.as_str(), false)]);
        for (location, mirror) in endpoints {
            let reference = self.rewrite(image, &name, &registry.prefix, location)?;
            let repository = format!("{}/{}", reference.registry, reference.repository);
            if let Some(table) = self.find(&repository).filter(|t| t.blocked) {
                blocked = Some(table.prefix.clone());
                continue;
            }
            sources.push(PullSource { reference, mirror });
        }
        match (sources.is_empty(), blocked) {
            (true, Some(prefix)) => Err(RegistriesConfError::Blocked {
                image: name,
                prefix,
                file: self.file.clone(),
            }),
            _ => Ok(sources),
        }
    }

    fn rewrite(
        &self,
        image: &ImageReference,
        name: &str,
        prefix: &str,
        location: &str,
    ) -> Result<ImageReference, RegistriesConfError> {
        if location.is_empty() {
            return Ok(image.clone());
        }
        let matched = matching_prefix_len(name, prefix).unwrap_or(name.len());
        let rewritten = format!("{location}{}", &name[matched..]);
        ImageReference::parse(&rewritten).map_err(|_| RegistriesConfError::Rewrite {
            image: name.to_string(),
            location: location.to_string(),
            rewritten,
            file: self.file.clone(),
        })
    }
}

/// How much of `reference` the prefix matches, when it does: the whole prefix, followed by the end
/// or `/`, `:`, `@`; for `*.domain`, a host ending in `.domain` (up to the end of the host).
fn matching_prefix_len(reference: &str, prefix: &str) -> Option<usize> {
    if let Some(domain) = prefix.strip_prefix('*') {
        // `domain` is `.example.com`: it must end the host (nothing but `:port` or a path after).
        let index = reference.find(domain)?;
        if reference[..index].contains('/') || index == 0 {
            return None;
        }
        let end = index + domain.len();
        return match reference.as_bytes().get(end) {
            None | Some(b':' | b'/' | b'@') => Some(end),
            _ => None,
        };
    }
    let rest = reference.strip_prefix(prefix)?;
    match rest.as_bytes().first() {
        None | Some(b':' | b'/' | b'@') => Some(prefix.len()),
        _ => None,
    }
}

/// A `prefix` or `location` as written, without trailing slashes; no scheme, no spaces.
fn parse_location(location: &str) -> Result<String, String> {
    let trimmed = location.trim_end_matches('/');
    if trimmed.contains("://") {
        return Err(format!(
            "{location:?}: a location has no scheme (host[:port][/path])"
        ));
    }
    if trimmed.chars().any(char::is_whitespace) {
        return Err(format!("{location:?}: a location has no spaces"));
    }
    Ok(trimmed.to_string())
}

fn pull_from(value: Option<&str>, location: &str) -> Result<PullFromMirror, String> {
    match value {
        None | Some("" | "all") => Ok(PullFromMirror::All),
        Some("digest-only") => Ok(PullFromMirror::DigestOnly),
        Some("tag-only") => Ok(PullFromMirror::TagOnly),
        Some(other) => Err(format!(
            "unsupported pull-from-mirror value {other:?} for mirror {location:?} (all, digest-only or tag-only)"
        )),
    }
}

fn validate_table(table: RegistryToml) -> Result<Registry, String> {
    let location = parse_location(table.location.as_deref().unwrap_or_default())?;
    let prefix = match table.prefix.as_deref() {
        Some(prefix) if !prefix.is_empty() => parse_location(prefix)?,
        _ if location.is_empty() => return Err("a [[registry]] has neither prefix nor location".into()),
        _ => location.clone(),
    };
    if let Some(domain) = prefix.strip_prefix("*.") {
        if domain.is_empty() || domain.contains(['*', '/', ':']) {
            return Err(format!(
                "prefix {prefix:?}: a wildcard prefix is `*.` followed by a domain, nothing else"
            ));
        }
    } else if prefix.contains('*') {
        return Err(format!(
            "prefix {prefix:?}: a wildcard may only start a prefix (`*.example.com`)"
        ));
    }
    if location.contains('*') {
        return Err(format!("location {location:?}: a location has no wildcard"));
    }
    // A wildcard prefix without location keeps the reference as written.
    let location = if location.is_empty() && !prefix.starts_with("*.") {
        prefix.clone()
    } else {
        location
    };
    if table.pull_from_mirror.is_some() {
        return Err(format!(
            "registry {prefix:?}: pull-from-mirror is a setting of a [[registry.mirror]], not of a [[registry]]"
        ));
    }
    let mut mirrors = Vec::new();
    for mirror in table.mirror {
        let location = parse_location(mirror.location.as_deref().unwrap_or_default())?;
        if location.is_empty() {
            return Err(format!("registry {prefix:?}: a mirror has no location"));
        }
        if location.contains('*') {
            return Err(format!("mirror {location:?}: a location has no wildcard"));
        }
        if table.mirror_by_digest_only && mirror.pull_from_mirror.is_some() {
            return Err(format!(
                "registry {prefix:?}: mirror-by-digest-only and a mirror's pull-from-mirror ({location:?}) cannot both be set"
            ));
        }
        mirrors.push(Mirror {
            pull_from: pull_from(mirror.pull_from_mirror.as_deref(), &location)?,
            location,
            insecure: mirror.insecure,
        });
    }
    Ok(Registry {
        prefix,
        location,
        insecure: table.insecure,
        blocked: table.blocked,
        mirror_by_digest_only: table.mirror_by_digest_only,
        mirrors,
    })
}

#[cfg(test)]
#[path = "mirrors_tests.rs"]
mod tests;
