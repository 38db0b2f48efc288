//! Owns file-based catalogs: model, the property type, readers, index, HTTP client + cache, server.
//! May import api, version, image; never resolve, bundle, apply, controller or cmd.
//!
//! File-based catalogs (FBC): the model, streaming parsers, the per-package index, the HTTP
//! client with its cache, and the catalog HTTP server.
//!
//! - [`Meta`]: one FBC object as compact JSON plus its `schema`/`package`/`name` keys; read from a
//!   directory tree ([`read_dir_metas`], [`for_each_dir_meta`]), from JSONL ([`jsonl_metas`],
//!   [`JsonlReader`]), written back with [`write_jsonl`].
//! - [`DeclarativeConfig`]: the full model; [`CatalogIndex`]: the lean per-package index used by
//!   `resolve`.
//! - [`client`]: fetches `<base>/api/v1/all` from a catalog server.

pub mod cache;
pub mod client;
mod ignore;
mod index;
mod meta;
mod model;
mod property;
mod read;
pub mod server;
pub mod source;

use std::{path::Path, sync::Arc};

use crate::confined::ConfinedError;

pub use index::{
    BundleIndex, CatalogIndex, CatalogIndexBuilder, ChannelEntryIndex, ChannelIndex, PackageIndex,
};
pub use meta::{Meta, SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_DEPRECATIONS, SCHEMA_PACKAGE};
pub use model::{
    Bundle, Channel, ChannelEntry, DeclarativeConfig, Deprecation, DeprecationEntry, Icon,
    PROPERTY_BUNDLE_OBJECT, PROPERTY_CONSTRAINT, PROPERTY_CSV_METADATA, PROPERTY_GVK_REQUIRED,
    PROPERTY_MAX_OPENSHIFT_VERSION, PROPERTY_PACKAGE, PROPERTY_PACKAGE_REQUIRED, Package,
    PackageScopedReference, RelatedImage,
};
pub use property::{Property, PropertyValue};
pub use read::{
    DEFAULT_MAX_FILE_BYTES, INDEX_IGNORE_FILE, JsonlReader, for_each_dir_meta, for_each_dir_meta_within,
    jsonl_metas, list_fbc_files, parse_stream, read_dir_metas, write_jsonl,
};

/// Why a catalog could not be read, parsed or fetched. Every message names the file, URL or
/// object, and the cause.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CatalogError {
    /// A file or stream could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file or stream.
        path: String,
        /// The cause.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// An object (or a whole file) is not valid FBC.
    #[error("{location}: {message}")]
    Malformed {
        /// File and object, e.g. `pkg/catalog.yaml: object #3 (olm.bundle "foo.v1")`.
        location: String,
        /// What is wrong.
        message: String,
    },
    /// The catalog breaks an `opm validate` rule (duplicate package, bundle, channel or entry);
    /// the text is operator-registry's.
    #[error("{0}")]
    Invalid(String),
    /// Fetching a catalog over HTTP failed.
    #[error("fetching catalog from {url}: {message}")]
    Http {
        /// The URL.
        url: String,
        /// What failed, e.g. `error: received unexpected response status code 404`.
        message: String,
    },
}

impl From<ConfinedError> for CatalogError {
    fn from(e: ConfinedError) -> Self {
        let (path, message) = match e {
            ConfinedError::Io { path, source } => return CatalogError::io(&path, source),
            ConfinedError::NotFound { path } => (path, "not found".to_string()),
            ConfinedError::Symlink { path } => {
                (path, "is a symbolic link, which is not followed".to_string())
            }
            ConfinedError::NotRegular { path } => (path, "is not a regular file".to_string()),
            ConfinedError::NotDirectory { path } => (path, "not a directory".to_string()),
            ConfinedError::Escapes { path } => (path, "leaves the catalog directory".to_string()),
            ConfinedError::TooLarge { path, limit } => (path, format!("is over the limit of {limit} bytes")),
        };
        CatalogError::Malformed {
            location: path.display().to_string(),
            message,
        }
    }
}

impl CatalogError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> CatalogError {
        CatalogError::Io {
            path: path.display().to_string(),
            source: Arc::new(source),
        }
    }
}
