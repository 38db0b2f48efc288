//! A disk cache of unpacked images keyed by manifest digest, and the pull flow that fills it.
//!
//! Layout: `<cache_dir>/<scope>/<hex digest>/rootfs/` (the unpacked layers) and
//! `<cache_dir>/<scope>/<hex digest>/image.json` (digest reference and labels), where `<scope>` is
//! the credential the pull was made with ([`Credentials::scope`]): an image pulled with one
//! credential is never served to a pull made with another, or none. Entries are built in a
//! `.tmp-*` directory and renamed into place, so a present entry is always complete.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::ImageError;
use super::credentials::Credentials;
use super::mirrors::PullSource;
use super::reference::ImageReference;
use super::registry::{FetchedManifest, ImageManifest, RegistryClient, RegistryConfig};
use super::unpack::{UnpackLimits, UnpackTotals, apply_layer};

const ROOTFS_DIR: &str = "rootfs";
const METADATA_FILE: &str = "image.json";

/// What [`pull_to_dir`] needs.
#[derive(Clone, Debug)]
pub struct PullOptions {
    /// Where unpacked images are kept, one directory per digest.
    pub cache_dir: PathBuf,
    /// How to reach registries.
    pub registry: RegistryConfig,
    /// Bounds on unpacked content.
    pub limits: UnpackLimits,
}

impl PullOptions {
    /// Options with defaults (bundle-sized limits) for everything but the cache directory.
    pub fn new(cache_dir: impl Into<PathBuf>) -> Self {
        PullOptions {
            cache_dir: cache_dir.into(),
            registry: RegistryConfig::default(),
            limits: UnpackLimits::BUNDLE,
        }
    }
}

/// An image unpacked on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PulledImage {
    /// Canonical digest reference `registry/repository@sha256:...` (of the top-level manifest,
    /// the index when the image has one).
    pub digest_ref: String,
    /// The top-level manifest digest, `sha256:...`.
    pub digest: String,
    /// The unpacked root file system (read it, do not modify it: it is shared).
    pub dir: PathBuf,
    /// The image config's labels.
    pub labels: BTreeMap<String, String>,
    /// When this image was unpacked (the cache entry's creation).
    pub unpacked_at: SystemTime,
}

/// The completion marker of an entry, written last.
#[derive(Serialize, Deserialize)]
struct CachedMetadata {
    #[serde(rename = "ref")]
    digest_ref: String,
    digest: String,
    labels: BTreeMap<String, String>,
    /// [`tree_digest`] of `rootfs/` when the entry was made.
    #[serde(rename = "contentDigest")]
    content_digest: String,
}

/// What the cache holds for a digest.
#[derive(Debug)]
enum Entry {
    Missing,
    Valid(PulledImage),
    /// Present but damaged: why.
    Corrupt(String),
}

#[derive(Deserialize)]
struct ImageConfigFile {
    #[serde(default)]
    config: Option<ImageConfigSection>,
}

#[derive(Deserialize)]
struct ImageConfigSection {
    #[serde(default, rename = "Labels")]
    labels: Option<BTreeMap<String, String>>,
}

/// Pulls `reference` (tag or digest) into the cache of `options` and returns the unpacked image.
/// A digest reference already in the cache needs no network; a tag costs one manifest request
/// when its digest is cached. Errors name the image and the cause.
pub async fn pull_to_dir(reference: &str, options: &PullOptions) -> Result<PulledImage, ImageError> {
    let image = ImageReference::parse(reference)?;
    let client = RegistryClient::new(options.registry.clone())?;
    pull_with_client(&client, &image, &options.cache_dir, &options.limits).await
}

/// [`pull_to_dir`], then `read` over the unpacked root; what `read` returns is handed out only
/// if the entry still verified after it. The pull checks the entry before handing it out, but a
/// file damaged between that check and `read` would otherwise be used (and a manifest missing
/// from a render is pruned from the cluster): such an entry is removed and pulled again, once.
pub async fn pull_and_read<T>(
    reference: &str,
    options: &PullOptions,
    read: impl Fn(&Path) -> T,
) -> Result<(PulledImage, T), ImageError> {
    let mut damaged = (PathBuf::new(), String::new());
    for _ in 0..2 {
        let pulled = pull_to_dir(reference, options).await?;
        let read_back = read(&pulled.dir);
        let Some(entry) = pulled.dir.parent() else {
            return Ok((pulled, read_back));
        };
        let cause = match check_entry(entry.parent().unwrap_or(entry), &pulled.digest) {
            Entry::Valid(now) if now.unpacked_at == pulled.unpacked_at => return Ok((pulled, read_back)),
            Entry::Valid(_) => "it was replaced while it was read".to_string(),
            Entry::Missing => "it was removed while it was read".to_string(),
            Entry::Corrupt(cause) => {
                tracing::warn!(image = reference, path = %entry.display(), %cause, during = "read",
                    "cached image is damaged; pulling it again");
                remove_entry_dir(entry).map_err(|source| ImageError::Io {
                    image: reference.to_string(),
                    action: "removing the damaged cache entry",
                    path: entry.to_path_buf(),
                    source,
                })?;
                cause
            }
        };
        damaged = (entry.to_path_buf(), cause);
    }
    let (path, cause) = damaged;
    Err(ImageError::CorruptCache {
        image: reference.to_string(),
        path,
        cause,
    })
}

/// Like [`pull_to_dir`] with a long-lived client (keeps tokens and schemes between pulls).
/// The image is pulled from its first source that serves it (the mirrors of the client's
/// registries.conf, then its primary location) and named by `image` whatever the source.
pub async fn pull_with_client(
    client: &RegistryClient,
    image: &ImageReference,
    cache_dir: &Path,
    limits: &UnpackLimits,
) -> Result<PulledImage, ImageError> {
    let sources = client.config().registries_conf.pull_sources(image)?;
    // A digest already unpacked from any of the sources needs no network.
    if let Some(digest) = &image.digest {
        for source in &sources {
            let scoped = scoped_dir(cache_dir, &client.config().credentials, &source.reference);
            if let Some(hit) = usable_entry(&scoped, &source.reference, digest)? {
                return Ok(named(hit, image));
            }
        }
    }
    let (source, top) = fetch_first(client, image, &sources).await?;
    let scoped = &scoped_dir(cache_dir, &client.config().credentials, &source);
    if let Some(hit) = usable_entry(scoped, &source, &top.digest)? {
        return Ok(named(hit, image));
    }
    unpack_into_cache(client, &source, &top, scoped, limits)
        .await
        .map(|pulled| named(pulled, image))
        .map_err(|e| e.naming_unwritable_cache(cache_dir))
}

/// The digest `image` (a tag or a digest) resolves to at its first source that serves it.
pub async fn resolve_digest(client: &RegistryClient, image: &ImageReference) -> Result<String, ImageError> {
    let sources = client.config().registries_conf.pull_sources(image)?;
    let (_, top) = fetch_first(client, image, &sources).await?;
    Ok(top.digest)
}

/// The top-level manifest from the first source that serves it, and that source. A source that
/// cannot be reached, refuses the credentials or lacks the image passes to the next one, as
/// containers/image does; with several sources, the error lists each one's failure.
async fn fetch_first(
    client: &RegistryClient,
    image: &ImageReference,
    sources: &[PullSource],
) -> Result<(ImageReference, FetchedManifest), ImageError> {
    let mut failures = Vec::new();
    for source in sources {
        let reference = &source.reference;
        match client
            .fetch_manifest(reference, reference.manifest_reference())
            .await
        {
            Ok(top) => return Ok((reference.clone(), top)),
            Err(e) if sources.len() == 1 => return Err(e),
            Err(
                e @ (ImageError::Registry { .. }
                | ImageError::Unauthorized { .. }
                | ImageError::NotFound { .. }),
            ) => {
                failures.push(format!("{reference}: {e}"));
            }
            Err(e) => return Err(e),
        }
    }
    Err(ImageError::Registry {
        image: image.to_string(),
        cause: format!("no pull source serves it ({})", failures.join("; ")),
    })
}

/// An image pulled from a mirror keeps the name it was asked for (the digest is the same).
fn named(mut pulled: PulledImage, image: &ImageReference) -> PulledImage {
    pulled.digest_ref = image.with_digest(&pulled.digest);
    pulled
}

/// Downloads and unpacks `top` into a new entry of `cache_dir`.
async fn unpack_into_cache(
    client: &RegistryClient,
    image: &ImageReference,
    top: &FetchedManifest,
    cache_dir: &Path,
    limits: &UnpackLimits,
) -> Result<PulledImage, ImageError> {
    let manifest = client.platform_manifest(image, top).await?;
    let config_bytes = client.fetch_blob_bytes(image, &manifest.config).await?;
    let config: ImageConfigFile =
        serde_json::from_slice(&config_bytes).map_err(|e| ImageError::InvalidImage {
            image: image.to_string(),
            cause: format!("the image config is not valid JSON: {e}"),
        })?;
    let labels = config.config.and_then(|c| c.labels).unwrap_or_default();

    let io_err = |action: &'static str, path: &Path| {
        let image = image.to_string();
        let path = path.to_path_buf();
        move |source| ImageError::Io {
            image,
            action,
            path,
            source,
        }
    };
    std::fs::create_dir_all(cache_dir).map_err(io_err("creating cache directory", cache_dir))?;
    let staging = tempfile::Builder::new()
        .prefix(&format!(".tmp-{}-", hex_part(&top.digest)))
        .tempdir_in(cache_dir)
        .map_err(io_err("creating staging directory in", cache_dir))?;
    let rootfs = staging.path().join(ROOTFS_DIR);
    std::fs::create_dir(&rootfs).map_err(io_err("creating", &rootfs))?;
    download_and_apply_layers(client, image, &manifest, staging.path(), &rootfs, limits).await?;

    let content_digest = tree_digest_blocking(image, &rootfs).await?;
    let metadata = CachedMetadata {
        digest_ref: image.with_digest(&top.digest),
        digest: top.digest.clone(),
        labels,
        content_digest,
    };
    let metadata_path = staging.path().join(METADATA_FILE);
    let json = serde_json::to_vec_pretty(&metadata).unwrap_or_default();
    std::fs::write(&metadata_path, json).map_err(io_err("writing", &metadata_path))?;

    let final_dir = entry_dir(cache_dir, &top.digest);
    let staged = staging.keep();
    if let Err(e) = std::fs::rename(&staged, &final_dir) {
        // Another pull of the same digest finished first: its entry is as good as ours. A
        // damaged entry in the way is removed, and ours takes its place.
        let in_place = usable_entry(cache_dir, image, &top.digest);
        if let Ok(Some(hit)) = in_place {
            let _ = std::fs::remove_dir_all(&staged);
            return Ok(hit);
        }
        if in_place.is_ok() && std::fs::rename(&staged, &final_dir).is_ok() {
            return match check_entry(cache_dir, &top.digest) {
                Entry::Valid(hit) => Ok(hit),
                _ => Err(ImageError::Io {
                    image: image.to_string(),
                    action: "reading back",
                    path: final_dir,
                    source: std::io::Error::other("cache entry changed while it was written"),
                }),
            };
        }
        let _ = std::fs::remove_dir_all(&staged);
        return Err(ImageError::Io {
            image: image.to_string(),
            action: "moving the unpacked image to",
            path: final_dir,
            source: e,
        });
    }
    match check_entry(cache_dir, &top.digest) {
        Entry::Valid(hit) => Ok(hit),
        Entry::Missing => Err(ImageError::Io {
            image: image.to_string(),
            action: "reading back",
            path: final_dir,
            source: std::io::Error::other("cache entry vanished"),
        }),
        Entry::Corrupt(cause) => Err(ImageError::CorruptCache {
            image: image.to_string(),
            path: final_dir,
            cause,
        }),
    }
}

async fn download_and_apply_layers(
    client: &RegistryClient,
    image: &ImageReference,
    manifest: &ImageManifest,
    staging: &Path,
    rootfs: &Path,
    limits: &UnpackLimits,
) -> Result<(), ImageError> {
    let mut totals = UnpackTotals::default();
    for (index, layer) in manifest.layers.iter().enumerate() {
        let blob_path = staging.join(format!("layer-{index}.blob"));
        client.fetch_blob_to_file(image, layer, &blob_path).await?;
        let (root, limits_copy, path_copy) = (rootfs.to_path_buf(), *limits, blob_path.clone());
        let result = tokio::task::spawn_blocking(move || {
            let file = std::fs::File::open(&path_copy)?;
            let applied = apply_layer(&root, file, &limits_copy, &mut totals).map(|()| totals);
            Ok::<_, std::io::Error>(applied)
        })
        .await
        .map_err(|e| ImageError::Io {
            image: image.to_string(),
            action: "unpacking",
            path: blob_path.clone(),
            source: std::io::Error::other(e.to_string()),
        })?
        .map_err(|source| ImageError::Io {
            image: image.to_string(),
            action: "opening",
            path: blob_path.clone(),
            source,
        })?;
        totals = result.map_err(|source| ImageError::Unpack {
            image: image.to_string(),
            layer: layer.digest.clone(),
            source,
        })?;
        let _ = std::fs::remove_file(&blob_path);
    }
    Ok(())
}

/// The cache entry for `digest`, if complete and intact.
pub fn lookup(cache_dir: &Path, digest: &str) -> Option<PulledImage> {
    match check_entry(cache_dir, digest) {
        Entry::Valid(hit) => Some(hit),
        Entry::Missing | Entry::Corrupt(_) => None,
    }
}

/// The intact entry for `digest`; a damaged one is removed (and so pulled again).
fn usable_entry(
    cache_dir: &Path,
    image: &ImageReference,
    digest: &str,
) -> Result<Option<PulledImage>, ImageError> {
    match check_entry(cache_dir, digest) {
        Entry::Valid(hit) => Ok(Some(hit)),
        Entry::Missing => Ok(None),
        Entry::Corrupt(cause) => {
            let dir = entry_dir(cache_dir, digest);
            tracing::warn!(%image, path = %dir.display(), %cause, "cached image is damaged; pulling it again");
            match std::fs::remove_dir_all(&dir) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(ImageError::Io {
                    image: image.to_string(),
                    action: "removing the damaged cache entry",
                    path: dir,
                    source: e,
                }),
                _ => Ok(None),
            }
        }
    }
}

/// Reads the completion marker of `digest`'s entry and checks the tree against it.
fn check_entry(cache_dir: &Path, digest: &str) -> Entry {
    let dir = entry_dir(cache_dir, digest);
    let metadata_path = dir.join(METADATA_FILE);
    let bytes = match std::fs::read(&metadata_path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !dir.exists() => return Entry::Missing,
        Err(e) => return Entry::Corrupt(format!("{METADATA_FILE} cannot be read: {e}")),
    };
    let metadata: CachedMetadata = match serde_json::from_slice(&bytes) {
        Ok(metadata) => metadata,
        Err(e) => return Entry::Corrupt(format!("{METADATA_FILE} is not valid: {e}")),
    };
    if metadata.digest != digest {
        return Entry::Corrupt(format!(
            "{METADATA_FILE} names {} instead of {digest}",
            metadata.digest
        ));
    }
    let rootfs = dir.join(ROOTFS_DIR);
    match tree_digest(&rootfs) {
        Ok(actual) if actual == metadata.content_digest => {}
        Ok(actual) => {
            return Entry::Corrupt(format!(
                "content digest {actual} does not match {} recorded at unpack",
                metadata.content_digest
            ));
        }
        Err(e) => return Entry::Corrupt(format!("reading {}: {e}", rootfs.display())),
    }
    let unpacked_at = match std::fs::metadata(&metadata_path).and_then(|m| m.modified()) {
        Ok(at) => at,
        Err(e) => return Entry::Corrupt(format!("{METADATA_FILE}: {e}")),
    };
    Entry::Valid(PulledImage {
        digest_ref: metadata.digest_ref,
        digest: metadata.digest,
        dir: rootfs,
        labels: metadata.labels,
        unpacked_at,
    })
}

/// [`tree_digest`] on a blocking thread.
async fn tree_digest_blocking(image: &ImageReference, rootfs: &Path) -> Result<String, ImageError> {
    let path = rootfs.to_path_buf();
    let io_error = |source| ImageError::Io {
        image: image.to_string(),
        action: "hashing the unpacked content of",
        path: rootfs.to_path_buf(),
        source,
    };
    tokio::task::spawn_blocking(move || tree_digest(&path))
        .await
        .map_err(|e| io_error(std::io::Error::other(e.to_string())))?
        .map_err(io_error)
}

/// `sha256:<hex>` of a directory tree: every entry's relative path, kind, size and content
/// (a symbolic link's target), in name order, links never followed. Any file added, removed,
/// truncated or changed changes it.
pub fn tree_digest(root: &Path) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    hash_tree(root, Path::new(""), &mut hasher)?;
    Ok(format!("sha256:{}", hex::encode(hasher.finalize())))
}

fn hash_tree(dir: &Path, relative: &Path, hasher: &mut Sha256) -> std::io::Result<()> {
    let mut names: Vec<_> = std::fs::read_dir(dir)?
        .map(|entry| entry.map(|e| e.file_name()))
        .collect::<Result<_, _>>()?;
    names.sort();
    for name in names {
        let path = dir.join(&name);
        let relative = relative.join(&name);
        let metadata = std::fs::symlink_metadata(&path)?;
        let kind = metadata.file_type();
        // Length-prefixed fields: no two different trees hash the same listing.
        let field = |hasher: &mut Sha256, bytes: &[u8]| {
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(bytes);
        };
        field(hasher, relative.as_os_str().as_bytes());
        if kind.is_dir() {
            field(hasher, b"d");
            hash_tree(&path, &relative, hasher)?;
        } else if kind.is_symlink() {
            field(hasher, b"l");
            field(hasher, std::fs::read_link(&path)?.as_os_str().as_bytes());
        } else if kind.is_file() {
            field(hasher, b"f");
            let mut file_hasher = Sha256::new();
            let mut file = std::fs::File::open(&path)?;
            let mut buffer = vec![0u8; 64 * 1024];
            let mut size = 0u64;
            loop {
                let read = file.read(&mut buffer)?;
                if read == 0 {
                    break;
                }
                size += read as u64;
                file_hasher.update(&buffer[..read]);
            }
            hasher.update(size.to_le_bytes());
            hasher.update(file_hasher.finalize());
        } else {
            field(hasher, b"o");
        }
    }
    Ok(())
}

/// Deletes the cache entry of a pulled image (no error when already gone).
pub fn remove(pulled: &PulledImage) -> std::io::Result<()> {
    let Some(entry) = pulled.dir.parent() else {
        return Ok(());
    };
    remove_entry_dir(entry)
}

fn remove_entry_dir(entry: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(entry) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// How old a `.tmp-*` staging directory must be before a sweep deletes it, whatever the grace:
/// a pull still downloading writes into it, and a big bundle can take minutes on a slow link.
pub const STAGING_MAX_AGE: Duration = Duration::from_secs(3600);

/// A directory of the cache as a sweep sees it: an entry or a staging directory of one scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheDirEntry {
    /// `<cache_dir>/<scope>/<hex digest>` or `<cache_dir>/<scope>/.tmp-*`.
    pub path: PathBuf,
    /// The hex digest an entry is named by; `None` for a staging directory.
    pub hex_digest: Option<String>,
    /// When it was last created or written (the directory's mtime).
    pub modified: SystemTime,
}

/// The directories a sweep deletes: entries whose digest is not in `keep` (hex digests) and that
/// were not written within `grace` of `now`, and staging directories older than
/// [`STAGING_MAX_AGE`] (and `grace`). A time in the future counts as just written.
pub fn unused_entries<'a>(
    entries: &'a [CacheDirEntry],
    keep: &BTreeSet<String>,
    now: SystemTime,
    grace: Duration,
) -> Vec<&'a CacheDirEntry> {
    let older_than = |entry: &CacheDirEntry, age: Duration| {
        now.duration_since(entry.modified)
            .is_ok_and(|elapsed| elapsed >= age)
    };
    entries
        .iter()
        .filter(|entry| match &entry.hex_digest {
            Some(hex) => !keep.contains(hex) && older_than(entry, grace),
            None => older_than(entry, grace.max(STAGING_MAX_AGE)),
        })
        .collect()
}

/// The hex digest of an image reference in digest form (`...@sha256:<hex>`), as entries are named.
pub fn entry_name_of(image: &str) -> Option<String> {
    let (_, digest) = image.rsplit_once('@')?;
    Some(hex_part(digest)).filter(|hex| !hex.is_empty())
}

/// Whether any entry or staging directory of `cache_dir` was written between `newest` and
/// `oldest` ago (`newest` included): the periodic sweep asks the API server which images are
/// recorded only when an entry has come out of the grace since the last sweep.
pub fn has_entries_aged(cache_dir: &Path, newest: Duration, oldest: Duration) -> std::io::Result<bool> {
    let now = SystemTime::now();
    Ok(cache_dir_entries(cache_dir)?.iter().any(|entry| {
        now.duration_since(entry.modified)
            .is_ok_and(|age| newest <= age && age < oldest)
    }))
}

/// Whether any entry or staging directory of `cache_dir` other than those of `keep` is past the
/// grace: if none is, no sweep can delete anything, whatever the revision records name, and the
/// sweep after an install in a burst of them asks the API server nothing.
pub fn has_removable(cache_dir: &Path, keep: &BTreeSet<String>, grace: Duration) -> std::io::Result<bool> {
    let entries = cache_dir_entries(cache_dir)?;
    Ok(!unused_entries(&entries, keep, SystemTime::now(), grace).is_empty())
}

/// Deletes, in every scope of `cache_dir`, the entries no one keeps (see [`unused_entries`]);
/// returns the directories deleted. A missing cache directory holds nothing to delete.
pub fn remove_unused(
    cache_dir: &Path,
    keep: &BTreeSet<String>,
    grace: Duration,
) -> std::io::Result<Vec<PathBuf>> {
    let entries = cache_dir_entries(cache_dir)?;
    let mut removed = Vec::new();
    for entry in unused_entries(&entries, keep, SystemTime::now(), grace) {
        remove_entry_dir(&entry.path)?;
        removed.push(entry.path.clone());
    }
    Ok(removed)
}

/// The entries and staging directories of every scope of `cache_dir`.
fn cache_dir_entries(cache_dir: &Path) -> std::io::Result<Vec<CacheDirEntry>> {
    let scopes = match std::fs::read_dir(cache_dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        scopes => scopes?,
    };
    let mut entries = Vec::new();
    for scope in scopes {
        let scope = scope?;
        if !scope.file_type()?.is_dir() {
            continue;
        }
        for entry in std::fs::read_dir(scope.path())? {
            let entry = entry?;
            let metadata = match entry.metadata() {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                metadata => metadata?,
            };
            if !metadata.is_dir() {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let hex_digest = if name.starts_with(".tmp-") {
                None
            } else if !name.is_empty() && name.chars().all(|c| c.is_ascii_hexdigit()) {
                Some(name)
            } else {
                // Not something the cache made: left alone.
                continue;
            };
            entries.push(CacheDirEntry {
                path: entry.path(),
                hex_digest,
                modified: metadata.modified()?,
            });
        }
    }
    Ok(entries)
}

/// The part of the cache for pulls of `image` made with the credential `credentials` holds now.
fn scoped_dir(cache_dir: &Path, credentials: &Credentials, image: &ImageReference) -> PathBuf {
    cache_dir.join(credentials.scope(&image.registry))
}

fn entry_dir(cache_dir: &Path, digest: &str) -> PathBuf {
    cache_dir.join(hex_part(digest))
}

fn hex_part(digest: &str) -> String {
    // Digests were validated as sha256:<64 hex>; keep only safe characters anyway.
    digest
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .chars()
        .filter(char::is_ascii_hexdigit)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    fn entry(name: &str, hex: Option<&str>, modified: SystemTime) -> CacheDirEntry {
        CacheDirEntry {
            path: PathBuf::from(format!("/cache/anonymous/{name}")),
            hex_digest: hex.map(str::to_string),
            modified,
        }
    }

    #[test]
    fn only_unkept_entries_older_than_the_grace_are_unused() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let entries = [
            entry("aa", Some("aa"), now - 20 * MINUTE),
            entry("bb", Some("bb"), now - 20 * MINUTE),
            entry("cc", Some("cc"), now - MINUTE),
            entry("dd", Some("dd"), now + MINUTE),
            entry(".tmp-ee-1", None, now - 20 * MINUTE),
            entry(".tmp-ff-1", None, now - 2 * STAGING_MAX_AGE),
        ];
        let keep = BTreeSet::from(["bb".to_string()]);
        let unused: Vec<&str> = unused_entries(&entries, &keep, now, 10 * MINUTE)
            .iter()
            .map(|e| e.path.file_name().unwrap().to_str().unwrap())
            .collect();
        // aa: old and kept by no one; bb: kept; cc: within the grace; dd: written "later";
        // the young staging directory may belong to a pull still running.
        assert_eq!(unused, ["aa", ".tmp-ff-1"]);
    }

    #[test]
    fn entries_are_named_by_the_hex_of_a_digest_reference() {
        let hex = "0123456789abcdef".repeat(4);
        assert_eq!(
            entry_name_of(&format!("quay.io/o/b@sha256:{hex}")),
            Some(hex.clone())
        );
        assert_eq!(entry_name_of("quay.io/o/b:v1.0.0"), None);
    }

    #[test]
    fn a_sweep_deletes_unused_entries_of_every_scope_and_keeps_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        for path in [
            "anonymous/aa/rootfs",
            "anonymous/bb/rootfs",
            "scoped/cc/rootfs",
            "anonymous/not-an-entry",
        ] {
            std::fs::create_dir_all(dir.path().join(path)).unwrap();
        }
        let keep = BTreeSet::from(["bb".to_string()]);
        // Everything was just written: the grace keeps it all.
        assert!(has_entries_aged(dir.path(), Duration::ZERO, 10 * MINUTE).unwrap());
        assert!(!has_entries_aged(dir.path(), 10 * MINUTE, 20 * MINUTE).unwrap());
        assert!(remove_unused(dir.path(), &keep, 10 * MINUTE).unwrap().is_empty());
        // ... so a sweep need not read which images the records keep; past the grace it must,
        // unless the one entry past it is kept anyway.
        assert!(!has_removable(dir.path(), &BTreeSet::new(), 10 * MINUTE).unwrap());
        assert!(has_removable(dir.path(), &keep, Duration::ZERO).unwrap());
        let all = BTreeSet::from(["aa".to_string(), "bb".to_string(), "cc".to_string()]);
        assert!(!has_removable(dir.path(), &all, Duration::ZERO).unwrap());
        let mut removed = remove_unused(dir.path(), &keep, Duration::ZERO).unwrap();
        removed.sort();
        assert_eq!(
            removed,
            [dir.path().join("anonymous/aa"), dir.path().join("scoped/cc")]
        );
        assert!(dir.path().join("anonymous/bb/rootfs").is_dir());
        assert!(dir.path().join("anonymous/not-an-entry").is_dir());
        assert!(
            remove_unused(&dir.path().join("missing"), &keep, Duration::ZERO)
                .unwrap()
                .is_empty()
        );
        assert!(!has_entries_aged(&dir.path().join("missing"), Duration::ZERO, 10 * MINUTE).unwrap());
        assert!(!has_removable(&dir.path().join("missing"), &keep, Duration::ZERO).unwrap());
    }
}
