//! Owns container images: registry client, safe unpacking, digest-keyed cache, push.
//! May import go_format and backoff only (the bottom layer), and third-party crates.
//!
//! Container images: pulling from OCI registries into a digest-keyed disk cache with safe
//! unpacking, and publishing a directory as a one-layer image.
//!
//! Entry points:
//! - [`pull_to_dir`] / [`pull_with_client`]: reference -> unpacked root filesystem + labels.
//! - [`push_dir`]: directory -> image in a registry (for tests, fixtures and the demo).

pub mod cache;
pub mod credentials;
pub mod mirrors;
pub mod pull_secret;
pub mod push;
pub mod reference;
pub mod registry;
pub mod unpack;

use std::path::{Path, PathBuf};

pub use cache::{PullOptions, PulledImage, pull_and_read, pull_to_dir, pull_with_client, resolve_digest};
pub use mirrors::{RegistriesConf, RegistriesConfError};
pub use push::{PushOptions, PushedImage, RuntimeConfig, push_dir, push_layers};
pub use reference::ImageReference;
pub use registry::{Credential, Credentials, Platform, RegistryClient, RegistryConfig, RegistryOptions};
pub use unpack::{BundleLimitArgs, UnpackError, UnpackLimits};

/// Why pulling or pushing an image failed. Every message names the image and the cause.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The reference cannot be parsed or is not fully qualified.
    #[error("error parsing image reference {reference:?}: {reason}")]
    InvalidReference {
        /// The reference as given.
        reference: String,
        /// Why it is invalid.
        reason: String,
    },
    /// The client configuration is unusable (e.g. a bad CA bundle).
    #[error("registry client configuration: {cause}")]
    Config {
        /// The cause.
        cause: String,
    },
    /// The registry could not be reached, timed out, or answered an unexpected status.
    #[error("image {image}: {cause}")]
    Registry {
        /// The image.
        image: String,
        /// The cause.
        cause: String,
    },
    /// Authentication failed or is missing.
    #[error("image {image}: authentication to {registry} failed for repository {repository}: {cause}")]
    Unauthorized {
        /// The image.
        image: String,
        /// The registry host.
        registry: String,
        /// The repository.
        repository: String,
        /// The cause.
        cause: String,
    },
    /// The manifest or blob does not exist.
    #[error("image {image}: {what} not found (manifest unknown)")]
    NotFound {
        /// The image.
        image: String,
        /// What was missing.
        what: String,
    },
    /// Content did not match its digest.
    #[error("image {image}: {what} digest mismatch: expected {expected}, got {actual}")]
    DigestMismatch {
        /// The image.
        image: String,
        /// Which content.
        what: String,
        /// The digest asked for.
        expected: String,
        /// The digest of what arrived.
        actual: String,
    },
    /// A manifest, index or config is malformed or unsupported.
    #[error("image {image}: {cause}")]
    InvalidImage {
        /// The image.
        image: String,
        /// The cause.
        cause: String,
    },
    /// A body exceeded its size limit.
    #[error("image {image}: {what} exceeds the limit of {limit} bytes")]
    TooLarge {
        /// The image.
        image: String,
        /// Which body.
        what: String,
        /// The limit.
        limit: u64,
    },
    /// A layer is hostile or malformed.
    #[error("image {image}: layer {layer}: {source}")]
    Unpack {
        /// The image.
        image: String,
        /// The layer digest.
        layer: String,
        /// What was wrong.
        #[source]
        source: UnpackError,
    },
    /// The cache directory cannot take the image: read-only, not permitted, or full. Nothing of
    /// the image is used until it can.
    #[error("image {image}: cannot write to the cache directory {}: {source}", dir.display())]
    CacheUnwritable {
        /// The image.
        image: String,
        /// The cache directory (as configured).
        dir: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A cache entry is damaged and could not be replaced.
    #[error("image {image}: the cache entry {} is damaged: {cause}", path.display())]
    CorruptCache {
        /// The image.
        image: String,
        /// The entry.
        path: PathBuf,
        /// What does not match.
        cause: String,
    },
    /// The registries configuration refuses the pull (blocked) or cannot map it.
    #[error(transparent)]
    RegistriesConf(#[from] RegistriesConfError),
    /// Local file system trouble.
    #[error("image {image}: {action} {}: {source}", path.display())]
    Io {
        /// The image.
        image: String,
        /// What was being done.
        action: &'static str,
        /// Which path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl ImageError {
    /// A write refused because the cache directory `dir` is read-only, not writable or full
    /// becomes [`ImageError::CacheUnwritable`]; other errors stay as they are.
    pub fn naming_unwritable_cache(self, dir: &Path) -> ImageError {
        let unwritable = |e: &std::io::Error| {
            use std::io::ErrorKind::*;
            matches!(
                e.kind(),
                PermissionDenied | ReadOnlyFilesystem | StorageFull | QuotaExceeded
            )
        };
        let (image, source) = match self {
            ImageError::Io { image, source, .. } if unwritable(&source) => (image, source),
            ImageError::Unpack {
                image,
                source:
                    UnpackError::Write {
                        source: crate::confined::ConfinedError::Io { source, .. },
                        ..
                    },
                ..
            } if unwritable(&source) => (image, source),
            // Copying an entry's content out of the layer: the write half failed.
            ImageError::Unpack {
                image,
                source: UnpackError::Read(source),
                ..
            } if unwritable(&source) => (image, source),
            other => return other,
        };
        // Just the cause: some layers (tempfile) add the path of the failed file to the text.
        let errno = match source.kind() {
            std::io::ErrorKind::ReadOnlyFilesystem => Some(rustix::io::Errno::ROFS.raw_os_error()),
            std::io::ErrorKind::StorageFull => Some(rustix::io::Errno::NOSPC.raw_os_error()),
            std::io::ErrorKind::QuotaExceeded => Some(rustix::io::Errno::DQUOT.raw_os_error()),
            std::io::ErrorKind::PermissionDenied => Some(rustix::io::Errno::ACCESS.raw_os_error()),
            _ => source.raw_os_error(),
        };
        ImageError::CacheUnwritable {
            image,
            dir: dir.to_path_buf(),
            source: errno.map_or(source, std::io::Error::from_raw_os_error),
        }
    }

    /// True when retrying cannot help without a change to the reference or the image itself.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            ImageError::InvalidReference { .. } | ImageError::Config { .. } | ImageError::RegistriesConf(_)
        )
    }
}
