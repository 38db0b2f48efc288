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
pub mod pull_secret;
pub mod push;
pub mod reference;
pub mod registry;
pub mod unpack;

use std::path::PathBuf;

pub use cache::{PullOptions, PulledImage, pull_to_dir, pull_with_client};
pub use push::{PushOptions, PushedImage, RuntimeConfig, push_dir, push_layers};
pub use reference::ImageReference;
pub use registry::{Credential, Credentials, Platform, RegistryClient, RegistryConfig};
pub use unpack::{UnpackError, UnpackLimits};

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
    /// True when retrying cannot help without a change to the reference or the image itself.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            ImageError::InvalidReference { .. } | ImageError::Config { .. }
        )
    }
}
